"""Incremental indexing, purging, crash safety and locking, against real repositories and the real stores."""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tantivy

from backstory.history.repo import open_repo
from backstory.index.analyzer import query_terms
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.catalog import Catalog
from backstory.index.store import IndexBusy, RebuildNeeded, StoreError
from backstory.index.text_index import distinct_tokens, open_index
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo, build_sample, fast_history

NO_MODELS = ModelConfig(dense=False, reranker="none")


def _engine(path: Path) -> Engine:
    return Engine(path, models=NO_MODELS)


def _search(path: Path, text: str, **kw) -> list[str]:
    result = _engine(path).search(text, SearchOptions(rerank=False, **kw))
    return [r["commit"]["subject"] for r in result["results"]]


def _doc_count(path: Path) -> int:
    store = store_for(open_repo(path))
    index = open_index(store.tantivy_path, create=False)
    return int(index.searcher().num_docs)


def test_index_then_query_finds_retry_commit(sample) -> None:
    path, shas = sample
    report = index_repository(path)
    assert report.new_commits == len(shas)
    subjects = _search(path, "retry an HTTP request with exponential backoff")
    assert subjects[0] in ("Add retry with exponential backoff", "Log the retry attempts")
    assert set(subjects[:2]) == {"Add retry with exponential backoff", "Log the retry attempts"}


def test_second_run_indexes_only_new_commits(sample) -> None:
    path, _ = sample
    index_repository(path)
    docs = _doc_count(path)
    assert index_repository(path).new_commits == 0
    assert _doc_count(path) == docs
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 40
    repo.commit("Add a token bucket rate limiter", {"src/app/limit.py": "class TokenBucket:\n    pass\n"})
    report = index_repository(path)
    assert report.new_commits == 1
    assert _search(path, "token bucket rate limiter")[0] == "Add a token bucket rate limiter"


def test_reset_and_amend_purge_unreachable_commits(sample) -> None:
    path, shas = sample
    index_repository(path)
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 40
    repo.git("reset", "-q", "--hard", shas["Configure logging"])
    # before re-indexing: unreachable commits never appear in results
    assert "Add retry with exponential backoff" not in _search(path, "retry exponential backoff")
    repo.commit("Amended: add retry helper", {"src/app/retry.py": "def retry_helper():\n    return 'backoff'\n"})
    report = index_repository(path)
    assert report.purged_commits == 3
    assert report.new_commits == 1
    db = sqlite3.connect(store_for(open_repo(path)).db_path)
    assert db.execute("SELECT COUNT(*) FROM commits").fetchone()[0] == 4
    assert db.execute("SELECT COUNT(*) FROM hunks").fetchone()[0] == _doc_count(path)
    # the second stage's stored text goes with its commit (index/commit_terms.py)
    stored = {r[0] for r in db.execute("SELECT sha FROM commit_terms")}
    assert stored == {r[0] for r in db.execute("SELECT sha FROM commits WHERE n_hunks > 0")} and len(stored) == 4


def test_hunk_rows_carry_their_files_commit_and_paths_through_a_purge(tmp_path) -> None:
    """Hunks keep their commit, paths, change kind and language only in their file's row (schema 13): reads
    join them back, a purge finds a commit's hunks through its files, and uid order within a commit is (file,
    position) order, which catalogue reads take from the files_sha and hunks_fid indexes instead of sorting."""
    repo = GitRepo(tmp_path / "r")
    body = "".join(f"line {i}\n" for i in range(40))
    repo.commit("Start", {"a.py": body, "b.c": body})
    edited = body.replace("line 3\n", "line three\n").replace("line 30\n", "line thirty\n")
    repo.commit("Edit both ends", {"a.py": edited, "b.c": edited})
    index_repository(repo.path, options=BuildOptions(symbols=False))
    repo.git("reset", "-q", "--hard", "HEAD~1")
    repo.git("mv", "a.py", "z.py")
    sha = repo.commit("Edit and rename", {"z.py": edited, "b.c": edited})
    report = index_repository(repo.path)
    assert (report.purged_commits, report.new_commits) == (1, 1)
    store = store_for(open_repo(repo.path))
    db = store.db
    assert db.execute("SELECT COUNT(*) FROM hunks WHERE fid NOT IN (SELECT fid FROM files)").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM hunks").fetchone()[0] == _doc_count(repo.path) == 6
    uids = [r[0] for r in db.execute("SELECT uid FROM hunks ORDER BY uid")]
    rows = Catalog.of(store).hunk_rows(uids)
    mine = [rows[u] for u in uids if rows[u]["sha"] == sha]
    shown = [(r["path"], r["old_path"], r["change"], r["language"], r["idx"], r["new_start"]) for r in mine]
    assert shown == [
        ("b.c", "b.c", "modify", "c", 0, 1),
        ("b.c", "b.c", "modify", "c", 1, 28),
        ("z.py", "a.py", "rename", "python", 0, 1),
        ("z.py", "a.py", "rename", "python", 1, 28),
    ]
    assert Catalog.of(store).first_hunks_of([sha], 3) == {sha: [r["uid"] for r in mine[:3]]}
    by_commit: dict[str, list[int]] = {}
    for u in uids:  # every commit's hunks in hunk order; an unknown sha and a repeated one are left out / read once
        by_commit.setdefault(rows[u]["sha"], []).append(u)
    wanted = [*by_commit, "0" * 40, sha]
    assert Catalog.of(store).first_hunks_of(wanted, 1) == {s: h[:1] for s, h in by_commit.items()}
    assert Catalog.of(store).first_hunks_of(wanted, 99) == by_commit
    assert [t[0] for t in Catalog.of(store).commit_hunk_texts(sha, 3)] == ["b.c", "b.c", "z.py"]


def test_no_messages_keeps_messages_out_of_lanes(sample) -> None:
    path, _ = sample
    index_repository(path, options=BuildOptions(no_messages=True))
    engine = _engine(path)
    assert engine.manifest()["options"]["no_messages"] is True
    result = engine.search("Configure logging", SearchOptions(rerank=False, lanes=("message",)))
    assert result["results"] == []
    result = engine.search("exponential backoff", SearchOptions(rerank=False))
    assert result["results"][0]["commit"]["subject"]  # still shown
    generation = engine.manifest()["generation"]
    assert index_repository(path).new_commits == 0  # options left at their defaults follow the index
    assert engine.manifest()["generation"] == generation and engine.manifest()["options"]["no_messages"] is True
    index_repository(path, rebuild=True)  # --rebuild builds with exactly the options given
    with pytest.raises(RebuildNeeded, match="different options"):  # an option asked for that differs
        index_repository(path, options=BuildOptions(no_messages=True))


def test_rebuild_after_option_change(sample) -> None:
    path, shas = sample
    index_repository(path, options=BuildOptions(no_messages=True))
    report = index_repository(path, rebuild=True)
    assert report.new_commits == len(shas)


def test_concurrent_indexer_fails_cleanly(sample) -> None:
    path, _ = sample
    index_repository(path)
    store = store_for(open_repo(path))
    with store.write_lock():
        with pytest.raises(IndexBusy, match="another `backstory index`"):
            index_repository(path)
        proc = subprocess.run(
            [sys.executable, "-m", "backstory", "index", str(path), "--no-dense"], capture_output=True, text=True
        )
        assert proc.returncode == 4  # an error the user can fix (cli.EXIT_ERROR)
        assert "another `backstory index`" in proc.stderr
    assert index_repository(path).new_commits == 0


def test_corrupt_index_gives_clear_error_and_is_left_alone(sample) -> None:
    path, _ = sample
    index_repository(path)
    store = store_for(open_repo(path))
    meta = store.tantivy_path / "meta.json"
    meta.write_text("{ truncated")
    before = meta.read_bytes()
    with pytest.raises(StoreError, match="--rebuild"):
        index_repository(path)
    with pytest.raises(StoreError, match="--rebuild"):
        _engine(path).search("retry", SearchOptions(rerank=False))
    assert meta.read_bytes() == before
    (store.path / "manifest.json").write_text("not json")
    with pytest.raises(StoreError, match="manifest is unreadable"):
        index_repository(path)
    assert index_repository(path, rebuild=True).new_commits > 0


@pytest.mark.timeout(180)
def test_resume_after_kill_9_has_no_duplicates_or_gaps(tmp_path) -> None:
    path = tmp_path / "big"
    fast_history(path, 600)
    env = {**os.environ, "BACKSTORY_INDEX_BATCH": "10"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "backstory", "index", str(path), "--no-dense"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    db_path = store_for(open_repo(path)).db_path
    deadline = time.monotonic() + 120
    killed_at = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if db_path.exists():
            try:
                with sqlite3.connect(db_path, timeout=1) as db:
                    killed_at = db.execute("SELECT COUNT(*) FROM commits WHERE state='indexed'").fetchone()[0]
            except sqlite3.OperationalError:
                killed_at = 0
            if killed_at >= 50:
                os.kill(proc.pid, signal.SIGKILL)
                break
        time.sleep(0.02)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "indexing finished before it could be killed"
    assert 50 <= killed_at < 600
    report = index_repository(path)
    assert report.new_commits + killed_at >= 600
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT COUNT(*) FROM commits WHERE state='indexed'").fetchone()[0] == 600
    hunks = db.execute("SELECT COUNT(*) FROM hunks").fetchone()[0]
    assert hunks == 600
    assert db.execute("SELECT COUNT(DISTINCT f.sha) FROM hunks h JOIN files f ON f.fid = h.fid").fetchone()[0] == 600
    assert _doc_count(path) == hunks  # no duplicate Tantivy documents
    searcher = open_index(store_for(open_repo(path)).tantivy_path, create=False).searcher()
    schema = open_index(store_for(open_repo(path)).tantivy_path, create=False).schema
    q = tantivy.Query.term_query(schema, "diff", query_terms("value")[0])
    assert searcher.search(q, limit=1000, count=True).count == 600


def test_index_directory_is_configurable(sample, tmp_path) -> None:
    path, shas = sample
    custom = tmp_path / "custom-index"
    index_repository(path, index_dir=custom)
    assert (custom / "manifest.json").exists()
    assert not (path / ".git" / "backstory").exists()
    result = Engine(path, index_dir=custom, models=NO_MODELS).search("lru cache", SearchOptions(rerank=False))
    assert result["results"][0]["commit"]["sha"] == shas["Add an LRU cache"]


def _indexed_subjects(path: Path) -> set[str]:
    db = sqlite3.connect(store_for(open_repo(path)).db_path)
    return {r[0] for r in db.execute("SELECT subject FROM commits WHERE state = 'indexed'")}


def test_linked_worktree_gets_its_own_index_seeded_from_the_main_one(sample, tmp_path) -> None:
    path, shas = sample
    index_repository(path)
    main_subjects = _indexed_subjects(path)
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 40
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", str(wt), shas["Configure logging"])
    wt_store = store_for(open_repo(wt))
    assert wt_store.path != store_for(open_repo(path)).path
    assert wt_store.path.is_relative_to(path / ".git" / "worktrees")

    report = index_repository(wt)  # a copy of the main index, then purged to the worktree's HEAD
    assert report.new_commits == 0
    assert report.purged_commits == 3
    assert "Add retry with exponential backoff" not in _indexed_subjects(wt)
    assert _indexed_subjects(path) == main_subjects  # the main checkout's index lost nothing
    assert index_repository(path).new_commits == 0
    assert _search(wt, "structured logging")[0] == "Configure logging"
    assert "Add retry with exponential backoff" in _search(path, "retry exponential backoff")


def test_worktree_index_is_built_fresh_when_the_main_one_cannot_be_copied(sample, tmp_path) -> None:
    path, shas = sample
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 40
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", str(wt), "HEAD")
    index_repository(path, options=BuildOptions(no_messages=True))  # built with other options: not a seed
    assert index_repository(wt).new_commits == len(shas)
    assert index_repository(wt).new_commits == 0
    wt2 = tmp_path / "wt2"
    repo.git("worktree", "add", "-q", str(wt2), "HEAD")
    with store_for(open_repo(path)).write_lock():  # main index busy: build fresh instead of waiting
        assert index_repository(wt2, options=BuildOptions(no_messages=True)).new_commits == len(shas)


def test_build_sample_is_deterministic(tmp_path) -> None:
    a = build_sample(tmp_path / "a")
    b = build_sample(tmp_path / "b")
    assert a == b


def test_sibling_names_are_indexed_once_per_token_and_still_found(tmp_path) -> None:
    assert distinct_tokens("Flask.run Flask.route Flask.make_response") == "flask run route make_response make response"
    assert distinct_tokens("") == ""
    # a file whose sibling definitions share a qualifier: a change to one method is found by another's name
    repo = GitRepo(tmp_path / "sib")
    methods = "".join(f"    def handler_{i}(self):\n        return {i}\n\n" for i in range(30))
    methods += "    def shutdown_gracefully(self):\n        return None\n"
    repo.commit("Add the dispatcher", {"src/disp.py": f"class Dispatcher:\n{methods}"})
    tweaked = f"class Dispatcher:\n{methods}".replace("return 7\n", "return 70\n")
    repo.commit("Tweak one handler", {"src/disp.py": tweaked})
    index_repository(repo.path)
    hits = _engine(repo.path).search("shutdown_gracefully", SearchOptions(rerank=False, lanes=("symbol",)))["results"]
    assert {r["commit"]["subject"] for r in hits} == {"Add the dispatcher", "Tweak one handler"}


def test_reader_segments_are_equal_and_a_multiple_of_the_workers() -> None:
    from backstory.index.parallel import CHUNK, SEGMENT_MAX, segments

    for total in (1, CHUNK, 150, 1000, 5531, 20_000):
        for n in (1, 2, 3):
            plan = segments(total, n)
            assert plan[0][0] == 0 and plan[-1][1] == total
            assert all(a[1] == b[0] for a, b in itertools.pairwise(plan))  # contiguous, in order
            sizes = [b - a for a, b in plan]
            assert max(sizes) <= max(SEGMENT_MAX, CHUNK) and max(sizes) - min(sizes) <= max(sizes) // 2 + 1
            if total >= n * CHUNK * 2:
                assert len(plan) % n == 0 and len(plan) >= 2 * n  # every worker gets the same number of segments
    assert segments(0, 2) == []
    assert [b - a for a, b in segments(5531, 2)] == [922, 922, 922, 922, 922, 921]
