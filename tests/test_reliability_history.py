"""Odd but valid histories (issue #27): commit dates Python's datetime cannot hold (item 4), a committed
symlink loop (item 8), a shallow clone's boundary commit in exact history. Real repositories, the real CLI."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backstory.cli import EXIT_ERROR, EXIT_NO_RESULTS, EXIT_OK
from backstory.history.repo import git_size
from backstory.search.results import iso
from gitrepo import GitRepo
from trials import raw_commit

pytestmark = pytest.mark.timeout(300)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backstory", *args], capture_output=True, text=True, timeout=120)


def _ok(proc: subprocess.CompletedProcess[str], *codes: int) -> str:
    """Its output, once it exited with 0 (or one of ``codes``: 1 is "nothing found") and no traceback."""
    assert proc.returncode in (EXIT_OK, *codes) and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_iso_renders_what_git_allows_and_datetime_cannot() -> None:
    assert iso(1_700_000_000, 3600) == "2023-11-14T23:13:20+01:00"  # the author's zone, as before
    assert iso(1_700_000_000, 25 * 3600) == "2023-11-14T22:13:20+00:00"  # ±24 h or more: the instant, in UTC
    assert iso(1_700_000_000, -(99 * 3600 + 59 * 60)) == "2023-11-14T22:13:20+00:00"
    assert iso(99_999_999_999_999, 0) == "9999-12-31T23:59:59+00:00"  # past year 9999: the last representable
    assert iso(-99_999_999_999_999, 0) == "0001-01-01T00:00:00+00:00"
    assert iso(253_402_300_799, 3600) == "9999-12-31T23:59:59+00:00"  # its local time would be past 9999
    for value in (iso(99_999_999_999_999, 7200), iso(0, 86399), iso(1_700_000_000, 90000)):
        dt.datetime.fromisoformat(value)  # every view parses it back


def test_commits_with_out_of_range_dates_are_searched_shown_and_followed(repo: GitRepo) -> None:
    repo.commit("Add the fetch helper", {"net.py": "def fetch(url):\n    return get(url)\n"})
    odd = {
        "tz": raw_commit(
            repo, {"net.py": "def fetch(url):\n    return get(url, timeout=5)\n"}, "Fetch with a timeout",
            "Ann <ann@example.com> 1700000000 +2500", "Ann <ann@example.com> 1700000000 -9959",
        ),
        "future": raw_commit(
            repo, {"net.py": "def fetch(url):\n    return get(url, timeout=9)\n"}, "Fetch with a longer timeout",
            "Ann <ann@example.com> 99999999999999 +0000",
        ),
    }  # fmt: skip
    assert "3170843" in repo.git("log", "-1", "--format=%ad")  # git itself shows it
    path = str(repo.path)
    _ok(cli("index", path, "--no-dense"))
    result = json.loads(_ok(cli("query", "fetch timeout", "--json", "--no-dense", "-C", path)))
    found = {r["commit"]["sha"]: r["commit"] for r in result["results"]}
    assert set(odd.values()) <= set(found)
    assert found[odd["tz"]]["date"] == "2023-11-14T22:13:20+00:00"
    assert found[odd["future"]]["date"] == "9999-12-31T23:59:59+00:00"
    for sha in odd.values():
        assert "Fetch with" in _ok(cli("show", sha, "-C", path))
    history = json.loads(_ok(cli("history", "net.py:1", "--json", "-C", path)))
    assert {c["commit"]["sha"] for c in history["commits"]} >= set(odd.values())
    at = json.loads(_ok(cli("query", "--at", "net.py:1", "--json", "--no-dense", "-C", path)))
    assert {c["commit"]["sha"] for c in at["exact"]} >= set(odd.values())


def test_symlink_loop_in_the_work_tree_is_a_clear_error(repo: GitRepo) -> None:
    repo.commit("Add code", {"app.py": "def main():\n    return 0\n"})
    os.symlink("loop_b", repo.path / "loop_a")
    os.symlink("loop_a", repo.path / "loop_b")
    repo.git("add", "-A")
    repo.commit("Commit a symlink loop")
    path = str(repo.path)
    _ok(cli("index", path, "--no-dense"))
    for args in (("history", "loop_a:1"), ("query", "--at", "loop_a:1", "--json", "--no-dense")):
        proc = cli(*args, "-C", path)
        assert proc.returncode == EXIT_ERROR and "Traceback" not in proc.stderr, proc.stderr
        assert "loop_a" in proc.stderr and "symbolic link" in proc.stderr, proc.stderr
    _ok(cli("history", "app.py:1", "-C", path, "--json"))


def test_shallow_boundary_commit_is_not_an_exact_change_to_every_symbol(tmp_path: Path) -> None:
    origin = GitRepo(tmp_path / "origin")
    body = "def alpha():\n    return {}\n\n\ndef beta():\n    return {}\n"
    for i in range(1, 6):
        origin.commit(f"Change {i}", {"mod.py": body.format(i, 0), "other.py": f"x = {i}\n"})
    origin.commit("Change beta", {"mod.py": body.format(5, 1)})
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "2", origin.path.as_uri(), str(clone)], check=True)
    boundary = (clone / ".git" / "shallow").read_text().split()[0]
    _ok(cli("index", str(clone), "--no-dense"))
    history = json.loads(_ok(cli("history", "mod.py:1", "--json", "-C", str(clone)), EXIT_NO_RESULTS))
    assert boundary not in [c["commit"]["sha"] for c in history["commits"]]  # alpha did not change in the clone
    assert "shallow" in (history["_meta"].get("hint") or "") + " ".join(history["_meta"]["warnings"])
    beta = json.loads(_ok(cli("history", "mod.py:5", "--json", "-C", str(clone))))
    assert [c["commit"]["subject"] for c in beta["commits"]] == ["Change beta"]


def test_a_deepened_shallow_clone_is_indexed_past_its_old_boundary(tmp_path: Path) -> None:
    """The boundary commit was stored as a root (its diff against nothing); after `git fetch --unshallow` the
    next run indexes it again with its real parents, and the history behind it."""
    origin = GitRepo(tmp_path / "origin")
    body = "def alpha():\n    return {}\n\n\ndef beta():\n    return {}\n"
    for i in range(1, 6):
        origin.commit(f"Change {i}", {"mod.py": body.format(i, 0), "other.py": f"x = {i}\n"})
    origin.commit("Change beta", {"mod.py": body.format(5, 1)})
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "2", origin.path.as_uri(), str(clone)], check=True)
    _ok(cli("index", str(clone), "--no-dense"))
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", "--unshallow"], check=True)
    _ok(cli("index", str(clone), "--no-dense"))
    status = json.loads(_ok(cli("status", "--json", "-C", str(clone))))
    assert status["index"]["indexed_commits"] == 6 and status["index"]["commits_behind_head"] == 0
    history = json.loads(_ok(cli("history", "mod.py:1", "--json", "-C", str(clone))))
    subjects = [c["commit"]["subject"] for c in history["commits"]]
    assert sorted(subjects) == ["Change 1", "Change 2", "Change 3", "Change 4", "Change 5"], subjects
    changes = {c["commit"]["subject"]: [h["change"] for h in c["hunks"]] for c in history["commits"]}
    assert changes["Change 5"] == ["modify"] and not history["_meta"]["warnings"]  # no longer an "add"


def test_git_sizes_with_units_in_the_repository_config_are_read_as_git_reads_them(repo: GitRepo) -> None:
    """``core.bigFileThreshold = 512m`` and the like are valid git (dulwich read them with ``int()`` and opening the
    repository failed); a value git itself refuses is a clear error that names it, and the index is left as it was."""
    repo.write("pool.py", "def make_pool(size):\n    return [None] * size\n")
    repo.commit("Add a connection pool")
    for key, value in (("core.bigFileThreshold", "512m"), ("pack.windowMemory", "100M"), ("core.packedGitLimit", "1g")):
        repo.git("config", key, value)
    os.chdir(repo.path)
    _ok(cli("index"))
    assert "Add a connection pool" in _ok(cli("query", "connection pool"))
    sizes = (
        b"10",
        b" 64k",
        b"512m",
        b"1G",
        b"0x10",
        b"010",
        b"-1",
        b"12x",
        b"1.5g",
        b"512 m",
        b"08",
        b"",
        "٣".encode(),
    )
    assert [git_size(v) for v in sizes] == [10, 64 << 10, 512 << 20, 1 << 30, 16, 8] + [None] * 7  # as git 2.39
    repo.write("pool.py", "def make_pool(size):\n    return [object()] * size\n")
    repo.commit("Fill the pool")
    repo.git("config", "pack.windowMemory", "12x")  # only commands that write packs read it: git log works
    _ok(cli("index"))
    repo.git("config", "core.deltaBaseCacheLimit", "12x")  # git refuses it in every command: "bad numeric config value"
    before = sorted((p.name, p.stat().st_size) for p in (repo.path / ".git" / "backstory").iterdir())
    for proc in (cli("index"), cli("query", "connection pool")):
        assert proc.returncode == EXIT_ERROR and "Traceback" not in proc.stderr
        assert "bad numeric config value '12x' for 'core.deltaBaseCacheLimit'" in proc.stderr
    assert sorted((p.name, p.stat().st_size) for p in (repo.path / ".git" / "backstory").iterdir()) == before
