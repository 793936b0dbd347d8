"""Branch scope: HEAD's history by default; `index --all-branches` adds every local branch, searched with
`query --branch REF` or `--all-branches`; a deleted branch's commits leave the index with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backstory.lsp.options import parse_options
from gitrepo import RETRY_CODE, GitRepo


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backstory", *args], capture_output=True, text=True, timeout=240)


def _query(path: Path, text: str, *extra: str) -> dict[str, Any]:
    proc = _cli("query", "-C", str(path), text, "--json", "--no-dense", "--no-rerank", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


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
    assert _cli("index", path, "--no-dense", "-q").returncode == 0
    assert not _subjects(_query(branched.path, "websocket heartbeat reconnect"))  # topic: not HEAD's history
    asked = _query(branched.path, "websocket heartbeat reconnect", "--branch", "topic")
    assert not asked["results"]
    assert any("not indexed" in w and "--all-branches" in w for w in asked["_meta"]["warnings"])
    everywhere = _query(branched.path, "websocket heartbeat reconnect", "--all-branches")
    assert any("HEAD's history only" in w for w in everywhere["_meta"]["warnings"])

    assert _cli("index", path, "--no-dense", "-q", "--all-branches").returncode == 0
    topic = "reconnect the websocket after a dropped heartbeat"
    assert topic not in _subjects(_query(branched.path, "websocket heartbeat reconnect"))  # default: HEAD's
    on_topic = _query(branched.path, "websocket heartbeat reconnect", "--branch", "topic")
    assert topic in _subjects(on_topic) and not on_topic["_meta"]["warnings"]
    assert topic in _subjects(_query(branched.path, "websocket heartbeat reconnect", "--all-branches"))
    # the topic branch's history includes main's first commit, not main's later one
    assert _subjects(_query(branched.path, "retry helper backoff", "--branch", "topic", "-k", "5")) == {
        "add retry helper"
    }
    # later runs keep the scope (no flag needed), and a deleted branch's commits leave the index
    branched.commit("retry fewer times", {"net.py": RETRY_CODE.replace("attempts=5", "attempts=2")})
    assert _cli("index", path, "--no-dense", "-q").returncode == 0
    assert topic in _subjects(_query(branched.path, "websocket heartbeat reconnect", "--all-branches"))
    branched.git("branch", "-q", "-D", "topic")
    assert _cli("index", path, "--no-dense", "-q").returncode == 0
    assert topic not in _subjects(_query(branched.path, "websocket heartbeat reconnect", "--all-branches"))


def test_an_unknown_revision_is_a_clear_error(branched: GitRepo) -> None:
    assert _cli("index", str(branched.path), "--no-dense", "-q").returncode == 0
    proc = _cli("query", "-C", str(branched.path), "retry", "--no-dense", "--branch", "no-such-branch")
    assert proc.returncode not in (0, 1)
    assert "unknown revision 'no-such-branch'" in proc.stderr
    both = _cli("query", "-C", str(branched.path), "retry", "--branch", "topic", "--all-branches")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_the_language_server_option() -> None:
    options, problems = parse_options({"backstory": {"allBranches": True}})
    assert options.allBranches and not problems
    options, problems = parse_options({"all_branches": "yes"})
    assert not options.allBranches and problems
