"""The symbols phase on a small history (the phase forced on: `DEFER_FROM` = 1), and the pure lane merge."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import tantivy

from backstory.history.policy import PathPolicy
from backstory.history.reader import read_commit
from backstory.history.repo import open_repo
from backstory.index import symbols_phase
from backstory.index.build import index_repository
from backstory.index.prepare import hunk_docs
from backstory.index.store import Store, StoreError
from backstory.index.text_index import HunkDoc, add_docs, index_exists, merge_rankings, open_index, uids_query
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import CACHE_CODE, DATES_CODE, RETRY_CODE, GitRepo


def _history(path: Path) -> GitRepo:
    repo = GitRepo(path)
    repo.commit("add retry helper", {"net.py": RETRY_CODE})
    repo.commit("add date helpers", {"dates.py": DATES_CODE})
    repo.commit("add a cache", {"cache.py": CACHE_CODE, "README.md": "# cache\n"})
    repo.commit("retry less often", {"net.py": RETRY_CODE.replace("attempts=5", "attempts=3")})
    repo.commit("describe the cache", {"README.md": "# cache\n\nAn LRU cache.\n"})
    return repo


def _stop_at_symbols(path: Path, index: Path) -> None:
    cancel = threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "symbols":
            cancel.set()

    assert index_repository(path, index_dir=index, progress=progress, cancel=cancel).cancelled


@pytest.fixture
def deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(symbols_phase, "DEFER_FROM", 1)


def test_a_changed_read_stops_the_phase_with_the_fix_and_loses_nothing(tmp_path: Path, deferred: None) -> None:
    """If a commit no longer reads as it was indexed, the phase stops with a clear error naming the fix; what
    is staged stays searchable."""
    repo = _history(tmp_path / "repo")
    index = tmp_path / "index"
    _stop_at_symbols(repo.path, index)
    db = sqlite3.connect(Store(index).db_path)
    sha = db.execute("SELECT sha FROM files WHERE path='net.py' AND parsed=-1 ORDER BY fid LIMIT 1").fetchone()[0]
    with db:
        net = "SELECT fid FROM files WHERE sha=? AND path='net.py'"
        db.execute(f"DELETE FROM hunks WHERE fid IN ({net})", (sha,))  # the catalogue no longer agrees
    with pytest.raises(StoreError, match=r"reads differently.*backstory index --rebuild"):
        index_repository(repo.path, index_dir=index)
    assert Store(index).staging_path.is_dir()
    with Engine(repo.path, index_dir=index, models=ModelConfig(dense=False, reranker="none")) as engine:
        found = engine.search("fetch retry backoff", SearchOptions(rerank=False))["results"]
    assert found  # the staged commits still answer


def test_symbols_reach_the_main_index_and_staging_goes(tmp_path: Path, deferred: None) -> None:
    repo = _history(tmp_path / "repo")
    index = tmp_path / "index"
    _stop_at_symbols(repo.path, index)
    store = Store(index)
    assert store.staging_path.is_dir()
    with Engine(repo.path, index_dir=index, models=ModelConfig(dense=False, reranker="none")) as engine:
        symbol_lane = SearchOptions(rerank=False, lanes=("symbol",))
        assert engine.freshness()[0]["symbols_pending"] > 0
        assert not engine.search("fetch_with_retry", symbol_lane)["results"]  # no symbols yet
        index_repository(repo.path, index_dir=index)
        assert not store.staging_path.exists()
        assert engine.freshness()[0]["symbols_pending"] == 0
        hits = engine.search("fetch_with_retry", symbol_lane)["results"]
    assert {h["commit"]["subject"] for h in hits} == {"add retry helper", "retry less often"}


def test_merge_rankings_keeps_each_uid_once_best_first() -> None:
    main = [(3, 2.0), (1, 1.5), (7, 1.0)]
    staged = [(5, 1.5), (7, 1.25), (9, 0.5)]
    assert merge_rankings(main, staged) == [(3, 2.0), (1, 1.5), (5, 1.5), (7, 1.25), (9, 0.5)]
    assert merge_rankings(main, staged, limit=2) == [(3, 2.0), (1, 1.5)]
    assert merge_rankings([], []) == []


def _docs(directory: Path, language: str | None = None) -> int:
    """Live documents of a Tantivy index (of one language), 0 when there is none."""
    if not index_exists(directory):
        return 0
    index = open_index(directory, create=False)
    searcher = index.searcher()
    if language is None:
        return int(searcher.num_docs)
    query = tantivy.Query.term_query(index.schema, "language", language)
    return int(searcher.search(query, limit=1000, count=True).count)


def _hunks(index: Path, language: str | None = None) -> int:
    db = sqlite3.connect(Store(index).db_path)
    sql = "SELECT COUNT(*) FROM hunks h JOIN files f ON f.fid = h.fid" + (" WHERE f.language=?" if language else "")
    return int(db.execute(sql, (language,) if language else ()).fetchone()[0])


def test_only_files_waiting_for_symbols_are_staged(tmp_path: Path, deferred: None) -> None:
    """The keyword phase puts a deferred commit's files without symbols (here README.md) in the main index at
    once, and only the Python files in the staging one; the phase moves those, and every hunk ends in the main
    index once."""
    repo = _history(tmp_path / "repo")
    index = tmp_path / "index"
    _stop_at_symbols(repo.path, index)
    store = Store(index)
    assert _docs(store.tantivy_path, "markdown") == _hunks(index, "markdown") > 0
    assert _docs(store.staging_path, "markdown") == 0
    assert _docs(store.staging_path, "python") == _hunks(index, "python") > 0
    assert _docs(store.tantivy_path, "python") == 0
    index_repository(repo.path, index_dir=index)
    assert _docs(store.tantivy_path) == _hunks(index) and not store.staging_path.exists()


def _as_an_older_version_staged(repo_path: Path, index: Path) -> int:
    """Make the staging index what an older version made: the staged commits' other files' documents moved to
    it from the main index (documents built as the keyword phase builds them). Returns how many moved."""
    store = Store(index)
    db = store.db
    todo = symbols_phase.pending(db)
    repo = open_repo(repo_path)
    moved: list[HunkDoc] = []
    for info in todo:
        files = db.execute(
            "SELECT f.parsed, MIN(h.uid) FROM files f LEFT JOIN hunks h ON h.fid = f.fid WHERE f.sha=?"
            " GROUP BY f.fid ORDER BY f.fid",
            (info.sha,),
        ).fetchall()
        cd = read_commit(repo, info, PathPolicy(), with_symbols=False)
        per_file = hunk_docs(cd, [first or 0 for _parsed, first in files], False)
        moved += [d for (parsed, _first), docs in zip(files, per_file, strict=True) if parsed != -1 for d in docs]
    main = open_index(store.tantivy_path, create=False).writer(heap_size=15_000_000, num_threads=1)
    main.delete_documents_by_query(uids_query(d.uid for d in moved))
    main.commit()
    main.wait_merging_threads()
    staging = open_index(store.staging_path, create=False).writer(heap_size=15_000_000, num_threads=1)
    add_docs(staging, moved)
    staging.commit()
    staging.wait_merging_threads()
    return len(moved)


def test_a_staging_index_of_whole_commits_is_moved_whole(tmp_path: Path, deferred: None) -> None:
    """A staging index that holds other files too (an older version staged whole commits) is moved as it was
    made: the README, staged with cache.py, reaches the main index too, once."""
    repo = _history(tmp_path / "repo")
    index = tmp_path / "index"
    _stop_at_symbols(repo.path, index)
    assert _as_an_older_version_staged(repo.path, index) == 1  # the README of "add a cache"
    store = Store(index)
    assert _docs(store.staging_path, "markdown") == 1 and _docs(store.tantivy_path, "markdown") == 1
    index_repository(repo.path, index_dir=index)
    assert _docs(store.tantivy_path, "markdown") == _hunks(index, "markdown") == 2
    assert _docs(store.tantivy_path) == _hunks(index) and not store.staging_path.exists()


def test_a_move_killed_after_the_main_index_committed_is_redone_once(
    tmp_path: Path, deferred: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between the main index's commit and the catalogue's: the next run moves the same files again,
    dropping the copies the first attempt added and nothing else (the README stays)."""
    repo = _history(tmp_path / "repo")
    index = tmp_path / "index"
    _stop_at_symbols(repo.path, index)

    def killed(self: symbols_phase.Staging, shas: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as dying, pytest.raises(KeyboardInterrupt):
        dying.setattr(symbols_phase.Staging, "delete", killed)
        index_repository(repo.path, index_dir=index)
    store = Store(index)
    assert _docs(store.tantivy_path, "python") == _hunks(index, "python")  # moved, not yet marked
    index_repository(repo.path, index_dir=index)
    assert _docs(store.tantivy_path, "python") == _hunks(index, "python")
    assert _docs(store.tantivy_path, "markdown") == _hunks(index, "markdown") > 0
    assert _docs(store.tantivy_path) == _hunks(index) and not store.staging_path.exists()
