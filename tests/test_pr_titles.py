"""Pull-request titles as evaluation queries over an index with messages (``backstory.evaluation.pr_titles``), on a real
git history with GitHub-style merge commits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from backstory.evaluation import pr_titles
from backstory.evaluation.evaluate import main
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
    assert sorted(pr.title for pr in pr_titles.sample(list(prs.values()), 5, 1)) == sorted(prs)
    assert len(pr_titles.sample(list(prs.values()), 1, 1)) == 1


def test_a_pull_request_answers_with_its_own_non_merge_commits_only(tmp_path: Path, monkeypatch) -> None:
    """A branch that merged main back in: that merge and main's commits are no answer. A branch longer than
    MAX_COMMITS is a bulk merge, not a change, and is left out."""
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {"a.py": "a = 0\n"})
    main_branch = repo.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    repo.git("checkout", "-q", "-b", "feature")
    own = [repo.commit("Add the parser", {"p.py": "p = 1\n"})]
    repo.git("checkout", "-q", main_branch)
    on_main = repo.commit("Unrelated fix on main", {"a.py": "a = 1\n"})
    repo.git("checkout", "-q", "feature")
    merge(repo, main_branch, "Merge branch 'main' into feature")
    own.append(repo.commit("Parse nested blocks", {"p.py": "p = 2\n"}))
    repo.git("checkout", "-q", main_branch)
    merge(repo, "feature", "Merge pull request #9 from ada/feature\n\nA parser for nested blocks")
    (pr,) = pr_titles.pull_requests(repo.path)
    assert pr.commits == frozenset(own) and on_main not in pr.commits
    monkeypatch.setattr(pr_titles, "MAX_COMMITS", 2)  # the branch has three commits, its merge included
    assert pr_titles.pull_requests(repo.path) == []


def test_a_shallow_clone_leaves_out_what_it_cut_off(tmp_path: Path) -> None:
    repo, _shas = history(tmp_path)
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo.path}", str(shallow)], check=True)
    assert pr_titles.pull_requests(shallow) == []  # the branches are beyond the boundary: no crash, no answers


def test_evaluate_with_pull_request_titles_reports_the_paraphrased_ones_apart(tmp_path: Path) -> None:
    repo, _shas = history(tmp_path)
    out = tmp_path / "report.json"
    idx = tmp_path / "idx"
    assert main([str(repo.path), "--pr-titles", "--index-dir", str(idx), "--configs", "bm25", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["queries"] == 2
    assert report["bm25"]["paraphrased"]["n"] == 1  # one of the two titles paraphrases its commits
    assert report["bm25"]["R@1"] >= 0.5  # the title equal to its commit's subject is found by the message lane
    assert json.loads((idx / "manifest.json").read_text())["options"]["no_messages"] is False
