"""Prior art for a change (`backstory query --changes`): the worktree's uncommitted change, a commit, a range."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backstory.features.changes import change_query, worktree_change
from backstory.history.worktree import worktree_changes
from backstory.search.engine import Engine
from gitrepo import GitRepo
from test_cli import ok


def changes(path: Path, *extra: str) -> dict[str, Any]:
    """The JSON of ``query --changes``: exit 0 with results, 1 without (cli.EXIT_NO_RESULTS)."""
    out = ok("query", "-C", str(path), "--json", "--no-dense", "--no-rerank", "--changes", *extra, code=(0, 1))
    return json.loads(out)


@pytest.fixture
def indexed(sample):
    path, shas = sample
    ok("index", str(path), "--no-dense")
    return path, shas


def test_worktree_change_finds_the_commits_that_wrote_the_code(indexed) -> None:
    path, shas = indexed
    net = path / "src/app/net.py"
    net.write_text(net.read_text().replace("delay *= 2", "delay = min(delay * 2, 30.0)"))
    result = changes(path)
    assert result["changes"]["source"] == "worktree"
    [f] = result["changes"]["files"]
    assert f["path"] == "src/app/net.py" and f["added"] == 1 and f["removed"] == 1
    assert "fetch_with_retry" in f["symbols"]
    top = {r["commit"]["sha"] for r in result["results"][:2]}
    assert top == {shas["Add retry with exponential backoff"], shas["Log the retry attempts"]}
    assert "fetch_with_retry" in result["query"] and "delay" in result["query"]


def test_commit_and_range_leave_their_own_commits_out(indexed) -> None:
    path, shas = indexed
    logged = shas["Log the retry attempts"]
    result = changes(path, logged)
    got = [r["commit"]["sha"] for r in result["results"]]
    assert result["changes"]["source"] == "commit" and result["changes"]["commits"] == [logged]
    assert logged not in got
    assert shas["Add retry with exponential backoff"] in got[:2]
    ranged = changes(path, "HEAD~2..HEAD")
    assert set(ranged["changes"]["commits"]) == {logged, shas["Add an LRU cache"]}
    assert not {logged, shas["Add an LRU cache"]} & {r["commit"]["sha"] for r in ranged["results"]}
    assert {f["path"] for f in ranged["changes"]["files"]} == {"src/app/net.py", "src/app/cache.py"}


def test_clean_worktree_says_there_is_nothing_to_search(indexed) -> None:
    path, _shas = indexed
    result = changes(path)
    assert result["results"] == [] and result["changes"]["files"] == []
    assert "no uncommitted changes" in result["_meta"]["hint"]


def test_worktree_reads_staged_and_unstaged_but_not_untracked(repo: GitRepo) -> None:
    repo.commit("start", {"a.py": "def a():\n    return 1\n", "gone.py": "x = 1\n"})
    repo.write("a.py", "def a():\n    return 2\n")  # unstaged
    repo.write("staged.py", "def staged():\n    pass\n")
    repo.git("add", "staged.py")
    repo.write("untracked.py", "def nope():\n    pass\n")
    repo.git("rm", "-q", "gone.py")
    files = {f.path: f for f in worktree_changes(repo.path)}
    assert set(files) == {"a.py", "staged.py", "gone.py"}
    assert (files["a.py"].change, files["staged.py"].change, files["gone.py"].change) == ("modify", "add", "delete")
    assert [s.name for s in files["a.py"].hunks[0].symbols] == ["a"]
    only = worktree_changes(repo.path, ["staged.py"])
    assert [f.path for f in only] == ["staged.py"]


def test_large_change_is_condensed_and_every_file_contributes(repo: GitRepo) -> None:
    repo.commit("start", {"big.py": "", "small.py": "x = 0\n"})
    repo.write("big.py", "".join(f"value_{i} = compute_{i}()\n" for i in range(2000)))
    repo.write("small.py", "x = special_marker_name\n")
    with Engine(repo.path) as engine:
        change = worktree_change(engine)
    query = change_query(change.files)
    assert len(query) <= 4000
    assert "special_marker_name" in query and "value_0 = compute_0()" in query
    assert query.splitlines()[0] == "big.py small.py"
