"""The symbols phase on a small history (the phase forced on: `DEFER_FROM` = 1), and the pure lane merge."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from backstory.index import symbols_phase
from backstory.index.build import index_repository
from backstory.index.store import Store, StoreError
from backstory.index.text_index import merge_rankings
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
