"""Reliability of the index across interrupted runs on other branches (issue #27, item 1), on real repositories
built with git fast-import and real runs interrupted in-process (Ctrl-C's path) and with kill -9."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from backstory.cli import EXIT_NO_RESULTS, EXIT_OK
from backstory.history.repo import open_repo
from backstory.index import build, graph
from backstory.index.build import index_repository, store_for
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo
from trials import branched_history, kill_when, rev_list

pytestmark = pytest.mark.timeout(300)
NO_MODELS = ModelConfig(dense=False, reranker="none")


def _shas(engine: Engine, query: str) -> list[str]:
    return [r["commit"]["sha"] for r in engine.search(query, SearchOptions(rerank=False))["results"]]


def _assert_truthful_on_main(repo: GitRepo) -> None:
    """On main after B's run was interrupted: what status says adds up with git, B's commits never show, and
    the main commits B's run purged are reported as missing rather than silently absent."""
    b_only = set(rev_list(repo, "B", "^main"))
    purged = rev_list(repo, "main", "^B")  # main's commits after the fork: B's run purged them
    with Engine(repo.path, models=NO_MODELS) as engine:
        info, _allowed, hint = engine.freshness()
        assert info["indexed_commits"] + info["commits_behind_head"] == len(rev_list(repo, "HEAD"))
        assert info["commits_behind_head"] == len(purged) == 150
        assert hint is not None and "150 commit(s) behind" in hint
        assert not b_only & set(_shas(engine, "bravo12 handling"))
        assert not b_only & set(_shas(engine, "bravo3"))
        assert not set(purged) & set(_shas(engine, "alpha290"))  # purged: not found, and the hint says why
    report = index_repository(repo.path)
    assert report.new_commits == 150 and report.purged_commits > 0
    with Engine(repo.path, models=NO_MODELS) as engine:
        info, _allowed, hint = engine.freshness()
        assert info["commits_behind_head"] == 0 and info["indexed_commits"] == 300 and hint is None
        assert _shas(engine, "alpha290")[:1] == [purged[10]]  # rev-list is newest first: 300, 299, ... 290
        assert not b_only & set(_shas(engine, "bravo12 handling"))
        assert set(engine.catalog.indexed_shas()) == set(rev_list(repo, "HEAD"))


def test_cancelled_run_on_another_branch_does_not_make_the_old_head_look_complete(tmp_path, monkeypatch) -> None:
    repo = branched_history(tmp_path / "r")
    assert index_repository(repo.path).new_commits == 300
    repo.git("checkout", "-q", "B")
    monkeypatch.setattr(build, "BATCH_COMMITS", 20)
    cancel = threading.Event()

    def progress(phase: str, done: int, _total: int) -> None:
        if phase == "history" and done > 0:
            cancel.set()  # what Ctrl-C and the language server's cancel do: stop between batches

    report = index_repository(repo.path, progress=progress, cancel=cancel)
    assert report.cancelled and 0 < report.new_commits < 400 and report.purged_commits == 150
    repo.git("checkout", "-q", "main")
    _assert_truthful_on_main(repo)


def test_killed_run_on_another_branch_does_not_make_the_old_head_look_complete(tmp_path) -> None:
    repo = branched_history(tmp_path / "r")
    assert index_repository(repo.path).new_commits == 300
    repo.git("checkout", "-q", "B")
    b_only = rev_list(repo, "B", "^main")
    db_path = store_for(open_repo(repo.path)).db_path
    marks = ",".join("?" * len(b_only))

    def some_of_b_indexed(db) -> bool:  # type: ignore[no-untyped-def]
        # between two batches (nothing pending) is where the old shortcut was fooled: a pending row made
        # readers walk the graph anyway
        sql = f"SELECT COUNT(*) FROM commits WHERE state='indexed' AND sha IN ({marks})"
        pending = db.execute("SELECT COUNT(*) FROM commits WHERE state<>'indexed'").fetchone()[0]
        return int(db.execute(sql, b_only).fetchone()[0]) >= 5 and pending == 0

    kill_when(["index", str(repo.path), "--no-dense"], some_of_b_indexed, db_path, {"BACKSTORY_INDEX_BATCH": "5"})
    repo.git("checkout", "-q", "main")
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "status", "--json", "-C", str(repo.path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["index"]["commits_behind_head"] == 150 and status["index"]["indexed_commits"] == 150
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "query", "bravo3", "--json", "--no-dense", "-C", str(repo.path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode in (EXIT_OK, EXIT_NO_RESULTS) and "Traceback" not in proc.stderr, proc.stderr
    assert not set(b_only) & {r["commit"]["sha"] for r in json.loads(proc.stdout)["results"]}
    _assert_truthful_on_main(repo)


def test_branched_history_is_what_the_trials_say(tmp_path: Path) -> None:
    repo = branched_history(tmp_path / "r")
    assert len(rev_list(repo, "main")) == 300 and len(rev_list(repo, "B")) == 550
    assert len(rev_list(repo, "B", "^main")) == 400 and len(rev_list(repo, "main", "^B")) == 150


def test_an_interrupted_run_on_head_counts_what_is_left_without_walking_the_graph(tmp_path, monkeypatch) -> None:
    """While (or after) a long run toward HEAD, the catalogue holds only HEAD's history: freshness counts what is
    left instead of walking git (graph.RUN_HEAD); the counts equal the walk's. Once HEAD moves, the walk is back."""
    repo = branched_history(tmp_path / "r")
    monkeypatch.setattr(build, "BATCH_COMMITS", 20)
    cancel = threading.Event()

    def progress(phase: str, done: int, _total: int) -> None:
        if phase == "history" and done >= 60:
            cancel.set()

    report = index_repository(repo.path, progress=progress, cancel=cancel)
    assert report.cancelled and 0 < report.new_commits < 300
    with Engine(repo.path, models=NO_MODELS) as engine:
        walked = graph.reachable(engine.store, engine.repo, rev_list(repo, "HEAD")[0])
        assert engine.catalog.indexed_shas() <= walked.reachable
        with monkeypatch.context() as m:
            m.setattr(graph, "reachable", None)  # the walk is not taken (calling it would fail)
            info, allowed, hint = engine.freshness()
        assert allowed is None and info["indexed_commits"] == report.new_commits
        assert info["commits_behind_head"] == len(walked.ordered) == 300 - report.new_commits
        assert hint is not None and f"{300 - report.new_commits} commit(s) behind" in hint
        assert _shas(engine, "alpha300")  # the newest commits are searchable
    repo.commit("Zulu handling", {"core/new.py": "def handle_zulu(value):\n    return value\n"})
    with Engine(repo.path, models=NO_MODELS) as engine:
        info, allowed, _hint = engine.freshness()  # HEAD moved: walked again, still adds up
        assert info["indexed_commits"] + info["commits_behind_head"] == 301 and allowed is not None
    assert not index_repository(repo.path).cancelled
    with Engine(repo.path, models=NO_MODELS) as engine:
        info, _allowed, hint = engine.freshness()
        assert info["indexed_commits"] == 301 and info["commits_behind_head"] == 0 and hint is None


def test_a_first_run_makes_its_newest_commits_searchable_before_walking_the_whole_history(
    tmp_path, monkeypatch
) -> None:
    """The prelude (build._prelude): an empty index gets HEAD's newest commits from a date-ordered walk that stops
    after them; interrupted in the whole walk that follows, they stay searchable without a walk per search (what
    is left is not counted yet), and the next run completes the history around them, symbols included."""
    repo = branched_history(tmp_path / "r")
    newest = rev_list(repo, "HEAD")[: build.PRELUDE_COMMITS]  # one commit an hour: date order = rev-list order

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C during the whole walk

    with monkeypatch.context() as m:
        m.setattr(build, "reachable", interrupted)
        with pytest.raises(KeyboardInterrupt):
            index_repository(repo.path)
    with Engine(repo.path, models=NO_MODELS) as engine:
        assert engine.catalog.indexed_shas() == set(newest)
        assert _shas(engine, "alpha300")[:1] == [newest[0]]
        with monkeypatch.context() as m:
            m.setattr(graph, "reachable", None)  # nor does a search walk: the rest is "not counted yet"
            info, allowed, hint = engine.freshness()
        assert allowed is None and info["indexed_commits"] == build.PRELUDE_COMMITS
        assert info["commits_behind_head"] is None
        assert hint == "only HEAD's newest commits are indexed so far: run `backstory index`"
    report = index_repository(repo.path)
    assert report.new_commits == 300 - build.PRELUDE_COMMITS and not report.cancelled
    with Engine(repo.path, models=NO_MODELS) as engine:
        assert engine.catalog.indexed_shas() == set(rev_list(repo, "HEAD"))
        assert engine.catalog.pending_symbol_files() == 0
        assert _shas(engine, "alpha201")[:1] == [rev_list(repo, "HEAD")[99]]
        assert engine.freshness()[0]["commits_behind_head"] == 0
