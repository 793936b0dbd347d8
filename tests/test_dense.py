"""Dense lane, rerank and the model failure modes, with the real bundled ONNX model and real usearch index."""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

import gitrepo
from backstory.history.repo import open_repo
from backstory.index import vectors
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.dense_build import embed_pending
from backstory.index.text_index import Filters
from backstory.models import Embedder, resolve_model
from backstory.search import dense as dense_module
from backstory.search import learned
from backstory.search.engine import Engine
from backstory.search.features import FEATURES
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo, kill_dense_phase
from onnx_fixtures import write_cross_encoder
from trials import wordy_history

pytestmark = pytest.mark.timeout(300)

PARAPHRASE_DIFF = """import time


def poll(job):
    wait = 1
    while not job.done():
        time.sleep(wait)
        wait = min(wait * 2, 60)
    return job.result()
"""


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(resolve_model(None, cache_dir=tmp_path_factory.mktemp("models")))


@pytest.fixture
def dense_repo(tmp_path: Path, embedder: Embedder) -> tuple[Path, dict[str, str]]:
    repo = GitRepo(tmp_path / "dense")
    shas = {
        "a": repo.commit("Initial", {"README.md": "# service\n"}),
        "b": repo.commit("Poll jobs", {"jobs/poll.py": PARAPHRASE_DIFF}),
        "c": repo.commit("Date helpers", {"util/dates.py": "def iso(d):\n    return d.strftime('%Y-%m-%d')\n"}),
        "d": repo.commit(
            "CSV export",
            {"export/csv.py": "import csv\n\ndef write_rows(fh, rows):\n    csv.writer(fh).writerows(rows)\n"},
        ),
    }
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    store = store_for(open_repo(repo.path))
    with store.write_lock():
        embed_pending(store, embedder)
    return repo.path, shas


def _engine(path: Path, embedder: Embedder, **kw) -> Engine:
    engine = Engine(path, models=ModelConfig(**kw))
    engine.dense._embedder = embedder  # share the session-scoped model instead of loading it per test
    return engine


def test_dense_lane_finds_paraphrase(dense_repo, embedder) -> None:
    path, shas = dense_repo
    engine = _engine(path, embedder, reranker="none")
    result = engine.search("back off exponentially between retries", SearchOptions(lanes=("dense",), rerank=False))
    assert result["results"][0]["commit"]["sha"] == shas["b"]
    assert result["results"][0]["why"]["lanes"] == {"dense": 1}
    status = engine.status()
    assert status["index"]["dense_coverage"] == 1.0
    assert status["dense"]["model_id"] == embedder.model_id and status["dense"]["dim"] == 384


def test_the_query_pass_started_early_is_the_one_rank_uses(dense_repo, embedder, monkeypatch) -> None:
    """The search starts the query's forward pass before the keyword lanes (`DenseLane.begin_pass`); `rank`
    takes that pass, and only for its own query and model; a search that fails before the lane drops it."""
    path, _shas = dense_repo
    engine = _engine(path, embedder, reranker="none")
    dense, query = engine.dense, "back off exponentially between retries"
    dense.begin_pass(query)
    vector, states = dense._pending[2].result()
    expected_vector, expected_states = embedder.embed_query_with_states(query)
    assert np.array_equal(vector, expected_vector) and np.array_equal(states, expected_states)
    # what rank() takes is the started pass itself (a marker stands in for it), for that query and model only
    marker: Future = Future()
    marker.set_result(("vector", "states"))
    dense._pending = (embedder.model_id, query, marker)
    assert dense._forward(embedder, query) == ("vector", "states") and dense._pending is None
    for other in ((embedder.model_id, "write rows as csv", marker), ("another-model", query, marker)):
        dense._pending = other
        assert isinstance(dense._forward(embedder, query)[0], np.ndarray) and dense._pending is None
    # a search uses its pass up; one that fails in a keyword lane drops it
    engine.search(query, SearchOptions(lanes=("diff", "dense"), rerank=False))
    assert dense._pending is None

    def broken(*_args, **_kwargs):
        raise RuntimeError("lane failed")

    monkeypatch.setattr("backstory.search.lanes.search_lane", broken)
    with pytest.raises(RuntimeError, match="lane failed"):
        engine.search(query, SearchOptions(lanes=("diff", "dense"), rerank=False))
    assert dense._pending is None


def test_dense_respects_filters(dense_repo, embedder) -> None:
    path, shas = dense_repo
    engine = _engine(path, embedder, reranker="none")
    opts = SearchOptions(lanes=("dense",), rerank=False, filters=Filters(path_glob="util/*"))
    result = engine.search("back off exponentially between retries", opts)
    assert [r["commit"]["sha"] for r in result["results"]] == [shas["c"]]
    # the whole default pipeline (dense lane, MaxSim, learned second stage) under the same filter
    util_only = SearchOptions(filters=Filters(path_glob="util/*"))
    full = _engine(path, embedder).search("back off between retries", util_only)
    assert [r["commit"]["sha"] for r in full["results"]] == [shas["c"]]
    assert full["_meta"]["second_stage"] == "learned"


def test_rerank_reported_in_why(dense_repo, embedder) -> None:
    path, shas = dense_repo
    engine = _engine(path, embedder, reranker="maxsim")
    result = engine.search("wait longer each time until the job is done", SearchOptions())
    assert result["_meta"]["rerank"] == "maxsim"
    top = result["results"][0]
    assert top["commit"]["sha"] == shas["b"]
    assert isinstance(top["why"]["rerank"], float) and top["why"]["recency"] >= 1.0
    plain = engine.search("wait longer each time until the job is done", SearchOptions(rerank=False))
    assert plain["_meta"]["rerank"] is None and plain["results"][0]["why"]["rerank"] is None


def test_learned_second_stage_orders_the_reranked_candidates(dense_repo, embedder) -> None:
    path, shas = dense_repo
    engine = _engine(path, embedder, reranker="maxsim")
    query = "wait longer each time until the job is done"
    result = engine.search(query, SearchOptions())
    assert not result["_meta"]["warnings"]
    hits = result["results"]
    assert hits[0]["commit"]["sha"] == shas["b"]
    assert all(isinstance(h["why"]["learned"], float) for h in hits)
    # the score is the calibrated probability over the candidates: positive, in order, summing to at most 1
    assert all(0.0 < h["score"] <= 1.0 for h in hits) and sum(h["score"] for h in hits) <= 1.0 + 1e-6
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert hits[0]["why"]["decided_by"] == [] if len(hits) == 1 else hits[0]["why"]["decided_by"]
    assert result["_meta"]["second_stage"] == "learned"
    blend = engine.search(query, SearchOptions(second_stage="blend"))
    assert all(h["why"]["learned"] is None for h in blend["results"]) and blend["_meta"]["second_stage"] == "blend"
    again = engine.search(query, SearchOptions())["results"]
    assert [(h["commit"]["sha"], h["score"]) for h in again] == [(h["commit"]["sha"], h["score"]) for h in hits]


def test_learned_weights_decide_the_order(dense_repo, embedder, tmp_path) -> None:
    """A model that values a *low* MaxSim turns the reranked order upside down."""
    path, _ = dense_repo
    query = "poll the job, write csv rows, format iso dates"
    n = len(FEATURES)
    contrarian = learned.LinearRanker(
        "contrarian", FEATURES, (0.0,) * n, (1.0,) * n, tuple(-5.0 if f == "maxsim" else 0.0 for f in FEATURES)
    )
    model = tmp_path / "contrarian.json"
    model.write_text(json.dumps(contrarian.to_json()))
    hits = _engine(path, embedder, second_stage_path=str(model)).search(query, SearchOptions())["results"]
    reranks = [h["why"]["rerank"] for h in hits]
    assert len(set(reranks)) >= 3 and reranks == sorted(reranks)  # lowest MaxSim first
    assert hits[0]["why"]["decided_by"] == ["maxsim"]  # the one feature the model reads put it first
    blend = _engine(path, embedder).search(query, SearchOptions(second_stage="blend"))["results"]
    assert [h["commit"]["sha"] for h in blend] != [h["commit"]["sha"] for h in hits]


def test_learned_stage_only_over_the_pipeline_it_was_fitted_on(dense_repo, embedder) -> None:
    path, _ = dense_repo
    engine = _engine(path, embedder)
    query = "wait longer each time until the job is done"
    for opts in (
        SearchOptions(fusion="rrf"),
        SearchOptions(lanes=("diff", "dense")),
        SearchOptions(dense_commits="best-file"),
        SearchOptions(weights={"diff": 1.0, "message": 1.0, "dense": 0.0}),
    ):
        result = engine.search(query, opts)
        assert result["_meta"]["second_stage"] == "blend", opts
        assert all(h["why"]["learned"] is None for h in result["results"])
    assert engine.search(query, SearchOptions(rerank=False))["_meta"]["second_stage"] is None
    with pytest.raises(ValueError, match="unknown second stage"):
        engine.search(query, SearchOptions(second_stage="Learned"))
    # fitted on another embedding model's scores: the blend, silently (the _meta says which ran)
    engine.ordering._models[False] = dataclasses.replace(learned.load(), embedding_model="some-other-model")
    result = engine.search(query, SearchOptions())
    assert result["_meta"]["second_stage"] == "blend" and not result["_meta"]["warnings"]


def test_an_index_with_messages_gets_the_model_fitted_with_messages(dense_repo, embedder) -> None:
    """Over an index with messages the message lane dominates the fused score and the message is a feature,
    so the second stage uses the weights fitted on such indexes, not the message-blind ones."""
    path, shas = dense_repo
    index_repository(path, options=BuildOptions(no_messages=False), rebuild=True)
    store = store_for(open_repo(path))
    with store.write_lock():
        embed_pending(store, embedder)
    engine = _engine(path, embedder)
    result = engine.search("Poll jobs", SearchOptions())
    assert result["_meta"]["second_stage"] == "learned" and not result["_meta"]["warnings"]
    assert result["results"][0]["commit"]["sha"] == shas["b"]
    assert "message" in result["results"][0]["why"]["lanes"]
    assert engine.ordering.model(True) is not None and set(engine.ordering._models) == {True}
    assert engine.ordering.model(True) == learned.load(messages=True) != learned.load(messages=False)


def test_broken_second_stage_model_falls_back_to_the_blend(dense_repo, embedder, tmp_path) -> None:
    path, _ = dense_repo
    bad = tmp_path / "second_stage.json"
    bad.write_text('{"name": "x", "features": ["fused"]}')
    engine = _engine(path, embedder, reranker="maxsim", second_stage_path=str(bad))
    query = "wait longer each time until the job is done"
    result = engine.search(query, SearchOptions())
    assert any("second-stage model" in w and "rerank + fused" in w for w in result["_meta"]["warnings"])
    blend = _engine(path, embedder, reranker="maxsim").search(query, SearchOptions(second_stage="blend"))
    assert [h["commit"]["sha"] for h in result["results"]] == [h["commit"]["sha"] for h in blend["results"]]
    assert all(h["why"]["learned"] is None for h in result["results"])


def test_cross_encoder_reranker_from_directory(dense_repo, embedder, tmp_path) -> None:
    path, _ = dense_repo
    ce = write_cross_encoder(tmp_path / "ce")
    engine = _engine(path, embedder, reranker="cross-encoder", cross_encoder_dir=str(ce))
    result = engine.search("poll the job", SearchOptions())
    assert result["_meta"]["rerank"] == "cross-encoder"
    assert all(isinstance(r["why"]["rerank"], float) for r in result["results"])
    # the learned second stage was fitted on MaxSim scores, so a cross-encoder's are blended instead
    assert all(r["why"]["learned"] is None for r in result["results"]) and not result["_meta"]["warnings"]


def test_reranker_that_fails_to_load_gives_the_fused_order(tmp_path, embedder) -> None:
    """Without rerank scores the candidates are the fused top k again: the dense lane's extra candidates would
    otherwise skip commits fused ranked higher (here recent ones, lifted by a heavy recency weight)."""
    repo = GitRepo(tmp_path / "r")
    recent = (time.time() - gitrepo.BASE_TIME) / 86400 - 1
    repo.commit("Poll jobs", {"jobs/poll.py": PARAPHRASE_DIFF}, days=recent - 400)
    repo.commit("Queue", {"jobs/queue.py": "def wait_for(job):\n    return job.result(60)\n"}, days=recent - 300)
    repo.commit("Dates", {"util/dates.py": "def iso(d):\n    return d.strftime('%Y-%m-%d')\n"}, days=recent)
    repo.commit("CSV", {"export/csv.py": "import csv\ndef rows(f, r):\n    csv.writer(f).writerows(r)\n"}, days=recent)
    repo.commit("Colour", {"ui/colour.py": "RED = '#f00'\nGREEN = '#0f0'\n"}, days=recent)
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    store = store_for(open_repo(repo.path))
    with store.write_lock():
        embed_pending(store, embedder)
    broken = write_cross_encoder(tmp_path / "ce")
    (broken / "model.onnx").write_bytes(b"not an onnx graph")
    opts = SearchOptions(k=2, rerank_top=2, dense_pool=5, recency_weight=20.0)
    query = "wait longer each time until the job is done"
    result = _engine(repo.path, embedder, reranker="cross-encoder", cross_encoder_dir=str(broken)).search(query, opts)
    assert any("reranker unavailable" in w for w in result["_meta"]["warnings"])
    assert result["_meta"]["rerank"] is None and result["_meta"]["second_stage"] is None
    plain = _engine(repo.path, embedder).search(query, dataclasses.replace(opts, rerank=False))
    assert [h["commit"]["subject"] for h in result["results"]] == [h["commit"]["subject"] for h in plain["results"]]
    # the same scores but for the recency factor's clock, which moves between the two searches
    assert [h["score"] for h in result["results"]] == pytest.approx([h["score"] for h in plain["results"]], rel=1e-5)
    assert all(h["why"]["rerank"] is None and h["why"]["learned"] is None for h in result["results"])


def test_missing_model_keeps_keyword_lanes(dense_repo, tmp_path) -> None:
    path, shas = dense_repo
    engine = Engine(path, models=ModelConfig(model_path=str(tmp_path / "no-model"), reranker="maxsim"))
    result = engine.search("poll job result", SearchOptions())
    assert result["results"][0]["commit"]["sha"] == shas["b"]
    assert "dense" not in result["_meta"]["lanes"]
    assert any("model unavailable" in w for w in result["_meta"]["warnings"])
    assert any("reranker unavailable" in w for w in result["_meta"]["warnings"])


def test_model_change_embeds_again_and_keeps_the_keyword_index(dense_repo, embedder, caplog) -> None:
    """Vectors stamped with another model never mix with new ones: search leaves the dense lane off and says
    why; the next dense phase drops them and embeds every unit again, without touching the keyword index."""
    path, _ = dense_repo
    store = store_for(open_repo(path))
    manifest = store.read_manifest()
    manifest["dense"]["model_id"] = "some-other-model"
    store.write_manifest(manifest)
    units = store.db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
    hunks = store.db.execute("SELECT COUNT(*) FROM hunks").fetchone()[0]
    engine = _engine(path, embedder, reranker="none")
    result = engine.search("poll job", SearchOptions(rerank=False))
    assert "dense" not in result["_meta"]["lanes"]
    assert any("some-other-model" in w and "backstory index" in w for w in result["_meta"]["warnings"])
    with store.write_lock(), caplog.at_level(logging.WARNING, logger="backstory.index"):
        assert embed_pending(store, embedder) == units
    assert "some-other-model" in caplog.text and "keyword index is kept" in caplog.text
    assert store.read_manifest()["dense"]["model_id"] == embedder.model_id
    assert store.db.execute("SELECT COUNT(*) FROM hunks").fetchone()[0] == hunks
    assert len(vectors.load(store.vectors_path, embedder.dim)) == units
    result = _engine(path, embedder, reranker="none").search("poll job", SearchOptions(rerank=False))
    assert "dense" in result["_meta"]["lanes"]


def test_language_server_re_embeds_another_models_vectors_in_its_child(dense_repo, embedder) -> None:
    """An index up to date with HEAD is a "small update" the server runs itself, unless its vectors come from
    another model (an upgrade with new weights): re-embedding every unit is a first index's work, and the memory
    it takes would stay with the server."""
    from backstory.lsp.indexing import _small_update
    from backstory.lsp.state import RepoState

    path, _ = dense_repo
    state = RepoState(engine=_engine(path, embedder), key=str(path))
    assert _small_update(state, dense=True)
    store = state.engine.store
    manifest = store.read_manifest()
    manifest["dense"]["model_id"] = "the-previous-weights"
    store.write_manifest(manifest)
    assert not _small_update(state, dense=True)
    assert _small_update(state, dense=False)  # no dense phase: nothing to re-embed
    store.db.execute("DELETE FROM state WHERE key='commit_terms'")  # an index built before they were stored
    assert not _small_update(state, dense=False)  # storing every commit's text is a child's work too


def test_bad_dense_batch_setting_is_named(monkeypatch) -> None:
    from backstory.index.dense_build import DEFAULT_BATCH, batch_size

    assert batch_size() == DEFAULT_BATCH
    monkeypatch.setenv("BACKSTORY_DENSE_BATCH", "32")
    assert batch_size() == 32
    for bad in ("abc", "0", "-1"):
        monkeypatch.setenv("BACKSTORY_DENSE_BATCH", bad)
        with pytest.raises(ValueError, match="BACKSTORY_DENSE_BATCH"):
            batch_size()


def test_cli_index_reports_missing_model(tmp_path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit("one", {"a.py": "x = 1\n"})
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "index", str(repo.path), "--model", str(tmp_path / "missing")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "dense phase skipped" in proc.stderr
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "backstory", "status", "--json", "-C", str(repo.path)], capture_output=True, text=True
    ).stdout)  # fmt: skip
    assert status["index"]["indexed_commits"] == 1 and status["index"]["dense_coverage"] == 0.0


def test_cli_second_index_run_embeds_nothing(tmp_path) -> None:
    """A history too small to fit the token-state codec on is embedded once, not on every run."""
    repo = GitRepo(tmp_path / "tiny")
    repo.commit("Poll jobs", {"jobs/poll.py": PARAPHRASE_DIFF})
    repo.commit("Date helpers", {"util/dates.py": "def iso(d):\n    return d.strftime('%Y-%m-%d')\n"})

    def cli(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "backstory", *args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "embedded 2 file changes" in cli("index", str(repo.path))
    assert "embedded 0 file changes" in cli("index", str(repo.path))
    status = json.loads(cli("status", "--json", "-C", str(repo.path)))
    assert status["index"]["dense_coverage"] == 1.0 and status["states_bytes"] == 0  # no codec yet
    repo.commit("CSV export", {"export/csv.py": "import csv\n\ndef write_rows(fh, rows):\n    pass\n"})
    assert "embedded 1 file change in" in cli("index", str(repo.path))
    assert json.loads(cli("status", "--json", "-C", str(repo.path)))["index"]["dense_coverage"] == 1.0


def test_damaged_vector_file_is_said_and_the_next_index_embeds_again(dense_repo, embedder) -> None:
    path, _ = dense_repo
    store = store_for(open_repo(path))
    store.vectors_path.write_bytes(b"\x00garbage" * 10)
    with store.write_lock():
        assert embed_pending(store, embedder) == 4  # repaired in place: no --rebuild (tests/test_reliability_dense.py)
    store.vectors_path.write_bytes(b"\x00garbage" * 10)
    cli = [sys.executable, "-m", "backstory", "index", str(path), "--no-messages"]  # as the fixture was built
    proc = subprocess.run(cli, capture_output=True, text=True)
    assert proc.returncode == 0 and "embedded 4 file changes" in proc.stdout, proc.stderr
    assert "vectors.usearch is damaged" in proc.stderr and "Traceback" not in proc.stderr


def test_dense_phase_survives_kill_9(tmp_path, embedder) -> None:
    path = tmp_path / "big"
    wordy_history(path, 400)  # ~50 tokens a unit: the codec is fitted after 256 units, batches are saved from then
    index_repository(path)
    store = store_for(open_repo(path))
    done = kill_dense_phase(path, 64)
    assert 64 <= done < 400
    index = vectors.load(store.vectors_path, embedder.dim)
    assert len(index) >= done  # every vector the catalogue claims is on disk
    with store.write_lock():
        embed_pending(store, embedder)
    index = vectors.load(store.vectors_path, embedder.dim)
    db = sqlite3.connect(store.db_path)
    assert db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0] == 400
    assert len(index) == 400


def test_dense_commit_score_is_the_centroid_of_its_files(tmp_path, embedder) -> None:
    repo = GitRepo(tmp_path / "centroid")
    repo.commit("Initial", {"README.md": "# service\n"})
    mixed = repo.commit("Poll and dates", {"jobs/poll.py": PARAPHRASE_DIFF, "docs/dates.md": "ISO dates: %Y-%m-%d\n"})
    single = repo.commit("Retry", {"jobs/retry.py": "def retry(f):\n    for delay in (1, 2, 4):\n        f()\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    store = store_for(open_repo(repo.path))
    with store.write_lock():
        embed_pending(store, embedder)
    engine = _engine(repo.path, embedder, reranker="none")
    query = "back off exponentially between retries"
    qv = embedder.embed_query(query)
    index = vectors.load(store.vectors_path, 384)
    fids = {sha: [r[0] for r in store.db.execute("SELECT fid FROM files WHERE sha=? ORDER BY fid", (sha,))]
            for sha in (mixed, single)}  # fmt: skip
    unit = {}
    for keys in fids.values():
        stored = np.asarray(index.get(np.asarray(keys, dtype=np.uint64)), dtype=np.float32)  # float16 on disk
        for f, v in zip(keys, stored, strict=True):
            unit[f] = v / np.linalg.norm(v)
    centre = np.mean([unit[f] for f in fids[mixed]], axis=0)
    expected = float(centre @ (qv / np.linalg.norm(qv))) / float(np.linalg.norm(centre))
    best_file = max(float(unit[f] @ (qv / np.linalg.norm(qv))) for f in fids[mixed])
    opts = SearchOptions(lanes=("dense",), rerank=False, recency_weight=0.0, weights={"dense": 1.0})
    fused = {r["commit"]["sha"]: r["why"]["fused"] for r in engine.search(query, opts)["results"]}
    assert fused[mixed] == pytest.approx(expected, abs=1e-5)
    assert best_file > expected + 0.01  # the unrelated file pulls the two-file commit's centroid away
    opts.dense_commits = "best-file"
    previous = {r["commit"]["sha"]: r["why"]["fused"] for r in engine.search(query, opts)["results"]}
    # the vector index's own cosine (usearch's kernel for this CPU, here AVX-512) rounds the float16 vectors'
    # products differently from numpy by up to ~2e-5; the two modes differ by far more (above)
    assert previous[mixed] == pytest.approx(best_file, abs=1e-4)
    assert previous[single] == pytest.approx(fused[single], abs=1e-5)  # one file: both scores agree


def test_centroids_kept_between_searches_are_bounded_and_change_no_score(tmp_path, embedder, monkeypatch) -> None:
    repo = GitRepo(tmp_path / "bounded")
    for i in range(6):
        repo.commit(f"Change {i}", {f"jobs/job{i}.py": f"def job{i}(retries):\n    return retries * {i}\n",
                                     f"docs/job{i}.md": f"Job {i} retries with a delay\n"})  # fmt: skip
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    store = store_for(open_repo(repo.path))
    with store.write_lock():
        embed_pending(store, embedder)
    opts = SearchOptions(lanes=("dense",), rerank=False, recency_weight=0.0, weights={"dense": 1.0})
    queries = ["retry a job with a delay", "documentation of the jobs", "multiply retries"]

    def scores(engine: Engine) -> list[list[tuple[str, float]]]:
        return [[(r["commit"]["sha"], r["why"]["fused"]) for r in engine.search(q, opts)["results"]] for q in queries]

    unbounded = _engine(repo.path, embedder, reranker="none")
    expected = scores(unbounded)
    assert len(unbounded.dense._centroids_of) == 6
    monkeypatch.setattr(dense_module, "CENTROID_CACHE", 2)
    bounded = _engine(repo.path, embedder, reranker="none")
    assert scores(bounded) == expected  # every search computes most centroids again, to the same bits
    assert scores(bounded) == expected
    assert len(bounded.dense._centroids_of) == 2


def test_float32_vector_file_is_stored_as_float16_once_as_a_fresh_build_would(tmp_path, embedder, monkeypatch) -> None:
    path = tmp_path / "wordy"
    wordy_history(path, 120)
    old_dir, fresh_dir = tmp_path / "old", tmp_path / "fresh"
    with monkeypatch.context() as m:
        m.setattr(vectors, "DTYPE", "f32")  # what versions before float16 saved
        index_repository(path, options=BuildOptions(no_messages=True), index_dir=old_dir)
        old = store_for(open_repo(path), old_dir)
        with old.write_lock():
            assert embed_pending(old, embedder) == 120
    assert vectors.stored_as(vectors.load(old.vectors_path, embedder.dim)) == "f32"
    f32_bytes = old.vectors_path.stat().st_size
    with old.write_lock():
        assert embed_pending(old, embedder) == 0  # nothing embedded again: the file is rewritten
    converted = vectors.load(old.vectors_path, embedder.dim)
    assert vectors.stored_as(converted) == "f16" and len(converted) == 120
    assert old.vectors_path.stat().st_size < 0.6 * f32_bytes
    index_repository(path, options=BuildOptions(no_messages=True), index_dir=fresh_dir)
    fresh_store = store_for(open_repo(path), fresh_dir)
    with fresh_store.write_lock():
        embed_pending(fresh_store, embedder)
    fresh = vectors.load(fresh_store.vectors_path, embedder.dim)
    for query in ("multiply the value", "Change 7", "func_99 docstring"):
        qv = embedder.embed_query(query)
        assert vectors.search(converted, qv, 10) == vectors.search(fresh, qv, 10)
    engine = Engine(path, index_dir=old_dir, models=ModelConfig(reranker="none"))
    engine.dense._embedder = embedder
    assert engine.search("multiply the value", SearchOptions(lanes=("dense",), rerank=False))["results"]
