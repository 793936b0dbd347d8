"""Branch scope: HEAD's history by default; `index --all-branches` adds every local branch, searched with
`query --branch REF` or `--all-branches`; a deleted branch's commits leave the index with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backstory.lsp.options import parse_options
from gitrepo import RETRY_CODE, GitRepo
from test_cli import query, run


def _subjects(answer: dict[str, Any]) -> set[str]:
    return {r["commit"]["subject"] for r in answer["results"]}


@pytest.fixture
def branched(tmp_path: Path) -> GitRepo:
    """main: a retry helper and a README; topic (not merged): a websocket reconnect; HEAD stays on main."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit("add retry helper", {"net.py": RETRY_CODE})
    repo.git("checkout", "-q", "-b", "topic")
    repo.commit(
        "reconnect the websocket after a dropped heartbeat",
        {"ws.py": "def reconnect_websocket(sock):\n    sock.heartbeat_reset()\n    return sock.reopen()\n"},
    )
    repo.git("checkout", "-q", "main")
    repo.commit("describe the retry helper", {"README.md": "# net\n\nRetries with backoff.\n"})
    return repo


def test_head_history_by_default_and_a_branch_once_indexed(branched: GitRepo) -> None:
    path = str(branched.path)
    assert run("index", path, "--no-dense", "-q").returncode == 0
    assert not _subjects(query(branched.path, "websocket heartbeat reconnect"))  # topic: not HEAD's history
    asked = query(branched.path, "websocket heartbeat reconnect", "--branch", "topic")
    assert not asked["results"]
    assert any("not indexed" in w and "--all-branches" in w for w in asked["_meta"]["warnings"])
    everywhere = query(branched.path, "websocket heartbeat reconnect", "--all-branches")
    assert any("HEAD's history only" in w for w in everywhere["_meta"]["warnings"])

    assert run("index", path, "--no-dense", "-q", "--all-branches").returncode == 0
    topic = "reconnect the websocket after a dropped heartbeat"
    assert topic not in _subjects(query(branched.path, "websocket heartbeat reconnect"))  # default: HEAD's
    on_topic = query(branched.path, "websocket heartbeat reconnect", "--branch", "topic")
    assert topic in _subjects(on_topic) and not on_topic["_meta"]["warnings"]
    assert topic in _subjects(query(branched.path, "websocket heartbeat reconnect", "--all-branches"))
    # the topic branch's history includes main's first commit, not main's later one
    assert _subjects(query(branched.path, "retry helper backoff", "--branch", "topic", "-k", "5")) == {
        "add retry helper"
    }
    # later runs keep the scope (no flag needed), and a deleted branch's commits leave the index
    branched.commit("retry fewer times", {"net.py": RETRY_CODE.replace("attempts=5", "attempts=2")})
    assert run("index", path, "--no-dense", "-q").returncode == 0
    assert topic in _subjects(query(branched.path, "websocket heartbeat reconnect", "--all-branches"))
    branched.git("branch", "-q", "-D", "topic")
    assert run("index", path, "--no-dense", "-q").returncode == 0
    assert topic not in _subjects(query(branched.path, "websocket heartbeat reconnect", "--all-branches"))


def test_an_unknown_revision_is_a_clear_error(branched: GitRepo) -> None:
    assert run("index", str(branched.path), "--no-dense", "-q").returncode == 0
    proc = run("query", "-C", str(branched.path), "retry", "--no-dense", "--branch", "no-such-branch")
    assert proc.returncode not in (0, 1)
    assert "unknown revision 'no-such-branch'" in proc.stderr
    both = run("query", "-C", str(branched.path), "retry", "--branch", "topic", "--all-branches")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_the_language_server_option() -> None:
    options, problems = parse_options({"backstory": {"allBranches": True}})
    assert options.allBranches and not problems
    options, problems = parse_options({"all_branches": "yes"})
    assert not options.allBranches and problems
