"""How the catalogue stores what it keeps (schema 14): a file's hunk excerpts as one compressed value, patch ids
as 64-bit integers, 16 KB pages. Real repositories, real index."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from backstory.cli import EXIT_ERROR
from backstory.history.repo import open_repo
from backstory.index.build import index_repository
from backstory.index.relations import patch_ids
from backstory.index.store import PAGE_SIZE, store_for
from backstory.index.values import pack_excerpts, unpack_excerpts
from backstory.search import health
from backstory.search.engine import Engine
from gitrepo import GitRepo, merge_missing_a_tree

pytestmark = pytest.mark.timeout(120)  # a deadlock fails here, not at the suite's 300 s

LINES = [f"line {i}\n" for i in range(60)]


def _text(changes: dict[int, str]) -> str:
    return "".join(changes.get(i, line) for i, line in enumerate(LINES))


@pytest.mark.parametrize(
    "excerpts",
    [
        ["@@ -1 +1 @@\n-a\n+b"],
        ["@@ -1,2 +1,2 @@\n x\n-a\n+b", "", "@@ -9 +9 @@\n-é ü 漢\n+\0 nul\n+\ud800 lone surrogate"],
        ["12 34\n", "\n\n", " "],  # text that looks like the lengths line
    ],
)
def test_a_files_excerpts_come_back_as_stored(excerpts: list[str]) -> None:
    data = pack_excerpts(excerpts)
    assert data is not None
    assert unpack_excerpts(data) == excerpts


def test_a_file_without_hunks_stores_nothing_and_damage_is_a_value_error() -> None:
    assert pack_excerpts([]) is None
    good = pack_excerpts(["abc", "de"])
    assert good is not None
    for bad in (b"not zlib", good[:-3], good[:2]):
        with pytest.raises(ValueError):
            unpack_excerpts(bad)
    with pytest.raises(ValueError, match="do not add up"):
        unpack_excerpts(zlib.compress(b"2 9\nabc"))


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    repo.commit("Add the file", {"a.txt": _text({}), "b.txt": "one\n"})
    # three hunks in one file (far apart), and a second file: each hunk reads back its own excerpt
    repo.commit(
        "Edit three places", {"a.txt": _text({2: "two\n", 30: "thirty\n", 57: "fifty-seven\n"}), "b.txt": "1\n"}
    )
    return repo


def test_each_hunk_reads_its_own_excerpt_from_its_files_value(repo: GitRepo) -> None:
    index_repository(repo.path)
    engine = Engine(repo.path)
    db = engine.store.db
    sha = repo.head()
    rows = db.execute(
        "SELECT h.uid, f.path, h.idx FROM hunks h JOIN files f ON f.fid = h.fid WHERE f.sha=? ORDER BY h.uid", (sha,)
    ).fetchall()
    assert [(r["path"], r["idx"]) for r in rows] == [("a.txt", 0), ("a.txt", 1), ("a.txt", 2), ("b.txt", 0)]
    hunks = engine.catalog.hunk_rows([r["uid"] for r in rows])
    excerpts = [hunks[r["uid"]]["excerpt"] for r in rows]
    assert "+two" in excerpts[0] and "+thirty" in excerpts[1] and "+fifty-seven" in excerpts[2]
    assert "+1" in excerpts[3]
    assert all(e.startswith("@@ ") for e in excerpts)
    # one hunk at a time, in any order: the same texts
    backwards = [engine.catalog.hunk_rows([r["uid"]])[r["uid"]]["excerpt"] for r in reversed(rows)]
    assert backwards == excerpts[::-1]
    # the commit's texts for the second stage, read through the same function
    assert [t for _p, t, _s in engine.catalog.commit_hunk_texts(sha, 40)] == excerpts
    # one stored value a file; the hunk and file rows keep no text of their own
    assert not {"excerpt", "excerpts"} & {
        r[1] for t in ("hunks", "files") for r in db.execute(f"PRAGMA table_info({t})")
    }
    sql = "SELECT x.data FROM excerpts x JOIN files f ON f.fid = x.fid WHERE f.sha=? ORDER BY f.fid"
    assert [unpack_excerpts(r[0]) for r in db.execute(sql, (sha,))] == [excerpts[:3], excerpts[3:]]


def test_patch_ids_are_integers_that_find_a_cherry_pick(repo: GitRepo) -> None:
    forward = patch_ids([("a.py", "a.py", [("1=1-1+", ["x = 1", "x = 2"])])])
    assert forward is not None and all(isinstance(i, int) and -(2**63) <= i < 2**63 for i in forward)
    index_repository(repo.path)
    db = store_for(open_repo(repo.path)).db
    types = {r[0] for r in db.execute("SELECT DISTINCT typeof(forward) || typeof(inverse) FROM patch_ids")}
    assert types == {"integerinteger"}


def test_a_damaged_excerpts_value_is_said_in_one_line(repo: GitRepo) -> None:
    index_repository(repo.path)
    db_path = store_for(open_repo(repo.path)).db_path
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE excerpts SET data = X'789c0000' WHERE fid IN (SELECT fid FROM files WHERE path = 'a.txt')")
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "query", "thirty", "--no-dense", "-C", str(repo.path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_ERROR, (proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    assert line.startswith("backstory: ") and "\n" not in line, line
    assert "catalogue is damaged" in line and "--rebuild" in line, line


def test_a_rewritten_commits_excerpts_go_with_it(repo: GitRepo) -> None:
    index_repository(repo.path)
    repo.git("commit", "-q", "--amend", "-m", "Edit three places, reworded")
    index_repository(repo.path)
    db = store_for(open_repo(repo.path)).db
    orphans = db.execute("SELECT COUNT(*) FROM excerpts WHERE fid NOT IN (SELECT fid FROM files)").fetchone()[0]
    with_hunks = db.execute("SELECT COUNT(DISTINCT fid) FROM hunks").fetchone()[0]
    assert orphans == 0
    assert db.execute("SELECT COUNT(*) FROM excerpts").fetchone()[0] == with_hunks == 4


def test_a_new_catalogue_has_the_larger_pages(repo: GitRepo) -> None:
    index_repository(repo.path)
    db = store_for(open_repo(repo.path)).db
    assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_threads_sharing_the_connection_read_excerpts_without_deadlock(repo: GitRepo) -> None:
    """The language server's threads share one catalogue connection. Excerpts were once decompressed by an SQL
    function: SQLite called back into Python while holding the connection's lock, and a thread holding the
    interpreter's lock that asked SQLite for anything waited for it forever (a hover beside a history request)."""
    for i in range(12):
        repo.commit(f"Edit {i}", {"a.txt": _text({i: f"edit {i}\n", 40 + i: f"far {i}\n"}), f"c{i}.txt": f"{i}\n"})
    index_repository(repo.path)
    engine = Engine(repo.path)
    catalog = engine.catalog
    uids = [r[0] for r in engine.store.db.execute("SELECT uid FROM hunks")]
    shas = [r[0] for r in engine.store.db.execute("SELECT sha FROM commits")]
    stop = time.monotonic() + 3.0
    errors: list[BaseException] = []
    done = [0, 0]

    def hunks() -> None:
        try:
            while time.monotonic() < stop:
                assert len(catalog.hunk_rows(uids)) == len(uids)
                done[0] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    def others() -> None:
        try:
            while time.monotonic() < stop:
                catalog.consequences(shas)
                for sha in shas[:3]:
                    catalog.commit_hunk_texts(sha, 40)
                done[1] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=hunks, daemon=True), threading.Thread(target=others, daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), f"deadlocked after {done} rounds"
    assert not errors, errors
    assert done[0] > 10 and done[1] > 10


def test_a_merge_left_unlisted_and_then_rewritten_away_leaves_no_row(repo: GitRepo) -> None:
    base = repo.head()
    _merge_a_branch(repo, "side")
    _index_only_the_lanes(repo)
    db = store_for(open_repo(repo.path)).db
    assert db.execute("SELECT COUNT(*) FROM merges_unlisted").fetchone()[0] == 1
    repo.git("reset", "-q", "--hard", base)
    repo.commit("Another edit", {"b.txt": "other\n"})
    index_repository(repo.path)
    assert db.execute("SELECT COUNT(*) FROM merges_unlisted").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM commits WHERE is_merge=1").fetchone()[0] == 0


def test_a_merge_that_cannot_be_read_stays_unlisted_until_it_can(repo: GitRepo) -> None:
    """A damaged repository: an object only the merge has (its `src` tree) is missing. The run indexes the
    rest, says so, and keeps the merge unlisted (exact history diffs it on the fly, when it can) instead of
    recording it as a merge with nothing to list; once the object is back, the next run lists it."""
    merge, parents, loose, away = merge_missing_a_tree(repo)
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "index", "--no-dense", str(repo.path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "1 merge could not be read from git" in proc.stderr and "git fsck" in proc.stderr, proc.stderr
    db = store_for(open_repo(repo.path)).db
    assert [tuple(r) for r in db.execute("SELECT sha FROM merges_unlisted")] == [(merge,)]
    assert db.execute("SELECT COUNT(*) FROM merge_paths WHERE sha=?", (merge,)).fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM commits WHERE state='indexed' AND is_merge=0").fetchone()[0] == 5
    said = health.status(Engine(repo.path), thorough=False)
    assert said["pending"]["merges"] == said["pending"]["unreadable_merges"] == 1, said["pending"]
    assert "merge" not in said["next"], said["next"]  # another run cannot diff it: not offered as a step
    alone = {"index": {"head": merge}, "pending": {"merges": 1, "unreadable_merges": 1, "dense": 0}}
    assert health.next_step(alone).startswith("repair the repository: git could not read 1 merge(s)")
    away.rename(loose)
    assert index_repository(repo.path).unreadable_merges == 0
    said = health.status(Engine(repo.path), thorough=False)
    assert said["pending"]["merges"] == said["pending"]["unreadable_merges"] == 0, said["pending"]
    assert db.execute("SELECT COUNT(*) FROM merges_unlisted").fetchone()[0] == 0
    rows = db.execute("SELECT parent, path, ops IS NOT NULL FROM merge_paths WHERE sha=? ORDER BY rowid", (merge,))
    assert [tuple(r) for r in rows] == [(parents[0], "src/app.py", 1), (parents[1], "src/app.py", 1)]


def test_an_unreadable_merge_rewritten_away_is_no_longer_counted(repo: GitRepo) -> None:
    """The count `status` gives is of the merges recorded as unreadable that are still unlisted: after the
    damaged merge is rewritten away and a run that wrote a new (readable) merge is stopped before the merges
    phase, that new merge waits to be listed and nothing is unreadable."""
    _merge, parents, _loose, _away = merge_missing_a_tree(repo)
    assert index_repository(repo.path).unreadable_merges == 1
    repo.git("reset", "-q", "--hard", parents[0])
    _merge_a_branch(repo, "other")
    _index_only_the_lanes(repo)
    pending = health.status(Engine(repo.path), thorough=False)["pending"]
    assert (pending["merges"], pending["unreadable_merges"]) == (1, 0), pending


def _merge_a_branch(repo: GitRepo, branch: str) -> None:
    """A branch off HEAD that edits b.txt, merged back into main with a merge commit."""
    repo.git("checkout", "-q", "-b", branch)
    repo.commit(f"{branch.capitalize()} edit", {"b.txt": f"{branch}\n"})
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", f"Merge {branch}", branch)


def _index_only_the_lanes(repo: GitRepo) -> None:
    """An index run stopped as the keyword lanes complete: its merges are left unlisted."""
    cancel = threading.Event()
    index_repository(repo.path, progress=lambda phase, _d, _t: phase != "history" and cancel.set(), cancel=cancel)
