"""Pull-request titles as queries: an evaluation set for an index that holds commit messages.

Commit-subject queries measure a message-blind index (``evaluate``'s default); over an index *with* messages
they only test that the message lane finds a message it was given. A GitHub merge commit ("Merge pull request
#N from owner/branch") carries the pull request's title in its body, written for the whole change and often
in other words than its commits' subjects: a query a developer might type, with known answers (the
non-merge commits the pull request brought in). Titles equal to one of those subjects are kept but marked, so
reports can show the paraphrased ones apart.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dulwich.errors import MissingCommitError
from dulwich.objects import ObjectID
from dulwich.repo import Repo

from ..history.repo import head_sha, open_repo

PREFIX = b"Merge pull request "
MAX_COMMITS = 20  # a bigger pull request is a branch merge more than one change; its title says little


@dataclass(frozen=True)
class PullRequest:
    title: str
    merge: str  # the merge commit's sha
    commits: frozenset[str]  # its non-merge commits, any of which answers the title
    same_as_subject: bool  # the title is one of those commits' subjects (case-insensitive)


def pull_requests(repo_path: str | Path, indexed: set[str] | None = None) -> list[PullRequest]:
    """Every GitHub pull-request merge on HEAD's history with a title of three words or more, at most
    :data:`MAX_COMMITS` commits on its branch (merges included) and at least one non-merge commit among them
    (in ``indexed``, when given), sorted by merge sha. A pull request whose branch a shallow clone cut off is
    left out."""
    repo = open_repo(repo_path)
    try:
        return sorted(_pull_requests(repo, indexed), key=lambda pr: pr.merge)
    finally:
        repo.close()


def _pull_requests(repo: Repo, indexed: set[str] | None) -> Iterator[PullRequest]:
    for entry in repo.get_walker(include=[ObjectID(head_sha(repo).encode())]):
        merge = entry.commit
        if len(merge.parents) != 2 or not merge.message.startswith(PREFIX):
            continue
        lines = merge.message.decode("utf-8", "replace").split("\n")[1:]
        title = next((line.strip() for line in lines if line.strip()), "")
        if len(title.split()) < 3:
            continue
        try:
            walk = repo.get_walker(include=[merge.parents[1]], exclude=[merge.parents[0]], max_entries=MAX_COMMITS + 1)
            commits = [e.commit for e in walk]
        except (KeyError, MissingCommitError):  # beyond a shallow clone's boundary
            continue
        if len(commits) > MAX_COMMITS:
            continue
        answers = {c.id.decode(): c for c in commits if len(c.parents) == 1}
        if indexed is not None:
            answers = {sha: c for sha, c in answers.items() if sha in indexed}
        if not answers:
            continue
        subjects = {c.message.decode("utf-8", "replace").split("\n")[0].strip().lower() for c in answers.values()}
        yield PullRequest(title, merge.id.decode(), frozenset(answers), title.lower() in subjects)


def sample(prs: list[PullRequest], n: int, seed: int) -> list[PullRequest]:
    """``n`` of them, shuffled by ``seed`` (deterministic: the input is sorted)."""
    prs = list(prs)
    random.Random(seed).shuffle(prs)
    return prs[:n]
