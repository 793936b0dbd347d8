"""Pull-request titles as evaluation queries over an index with messages (``backstory.pr_titles``), on a real
git history with GitHub-style merge commits."""

from __future__ import annotations

import json
from pathlib import Path

from backstory import pr_titles
from backstory.evaluate import main
from gitrepo import GitRepo


def merge(repo: GitRepo, branch: str, message: str) -> str:
    env = {"GIT_AUTHOR_DATE": "1700000000 +0000", "GIT_COMMITTER_DATE": "1700000000 +0000"}
    repo.git("merge", "-q", "--no-ff", "-m", message, branch, env=env)
    return repo.head()


def history(tmp_path: Path) -> tuple[GitRepo, dict[str, list[str]]]:
    """main: start; PR #1 (two commits, a paraphrasing title); a plain branch merge; PR #2 (title = its subject);
    PR #3 (a two-word title)."""
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {"net.py": "def send(x):\n    return x\n"})
    main_branch = repo.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    shas: dict[str, list[str]] = {}
    for name, commits in {
        "retry": [("Wrap send in a loop", "a"), ("Sleep longer after each failure", "b")],
        "stable": [("Fix typo in the comment", "c")],
        "cache": [("Cache parsed headers between requests", "d")],
        "misc": [("Tidy up the module", "e")],
    }.items():
        repo.git("checkout", "-q", "-b", name, main_branch)
        shas[name] = [repo.commit(subject, {f"{name}.py": f"v = {v!r}\n"}) for subject, v in commits]
        repo.git("checkout", "-q", main_branch)
    merge(repo, "retry", "Merge pull request #1 from ada/retry\n\nRetry uploads with exponential backoff")
    merge(repo, "stable", "Merge branch 'stable'")
    merge(repo, "cache", "Merge pull request #2 from ada/cache\n\nCache parsed headers between requests")
    merge(repo, "misc", "Merge pull request #3 from ada/misc\n\nTidy up")
    return repo, shas


def test_pull_requests_are_titles_with_their_commits(tmp_path: Path) -> None:
    repo, shas = history(tmp_path)
    prs = {pr.title: pr for pr in pr_titles.pull_requests(repo.path)}
    assert set(prs) == {"Retry uploads with exponential backoff", "Cache parsed headers between requests"}
    retry, cache = prs["Retry uploads with exponential backoff"], prs["Cache parsed headers between requests"]
    assert retry.commits == frozenset(shas["retry"]) and not retry.same_as_subject
    assert cache.commits == frozenset(shas["cache"]) and cache.same_as_subject
    # commits the index does not hold are no answer; a pull request left with none is dropped
    only = pr_titles.pull_requests(repo.path, indexed={shas["retry"][1]})
    assert [(pr.title, pr.commits) for pr in only] == [(retry.title, frozenset(shas["retry"][1:]))]
    assert pr_titles.sample(list(prs.values()), 5, 1) == pr_titles.sample(list(prs.values()), 5, 1)


def test_evaluate_with_pull_request_titles_reports_the_paraphrased_ones_apart(tmp_path: Path) -> None:
    repo, _shas = history(tmp_path)
    out = tmp_path / "report.json"
    idx = tmp_path / "idx"
    assert main([str(repo.path), "--pr-titles", "--index-dir", str(idx), "--configs", "bm25", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["queries"] == 2
    assert report["bm25"]["paraphrased"]["R@10"] in (0.0, 1.0)  # one paraphrased query: found or not
    assert report["bm25"]["R@1"] >= 0.5  # the title equal to its commit's subject is found by the message lane
    assert json.loads((idx / "manifest.json").read_text())["options"]["no_messages"] is False
