"""A lost or damaged vector file (issue #27, item 2) is detected on every open, said in status and queries, and
repaired by the next ``backstory index`` (the units are embedded again; the keyword index and the token states
are kept) — with the real bundled model, real usearch files damaged on disk, and real killed writers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backstory.history.repo import open_repo
from backstory.index import dense_build, integrity, unit_states, vectors
from backstory.index.build import index_repository, store_for
from backstory.index.dense_build import embed_pending
from backstory.index.store import Store
from backstory.models import Embedder, resolve_model
from backstory.models.states import STATES_RECIPE
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import fast_history
from trials import kill_when, overwrite, wordy_history

pytestmark = pytest.mark.timeout(400)
QUERIES = ("multiply the value by nine", "update module 3", "func_5_25 change")


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(resolve_model(None, cache_dir=tmp_path_factory.mktemp("models")))


def _store(path: Path) -> Store:
    return store_for(open_repo(path))


def _embed(path: Path, embedder: Embedder) -> int:
    store = _store(path)
    with store.write_lock():
        return embed_pending(store, embedder)


def _engine(path: Path, embedder: Embedder) -> Engine:
    engine = Engine(path, models=ModelConfig())
    engine.dense._embedder = embedder  # the module's model, not one loaded per engine
    return engine


def _answers(path: Path, embedder: Embedder) -> list[list[tuple[str, float]]]:
    with _engine(path, embedder) as engine:
        out = []
        for q in QUERIES:
            result = engine.search(q, SearchOptions(k=10))
            assert "dense" in result["_meta"]["lanes"] and not result["_meta"]["warnings"]
            out.append([(r["commit"]["sha"], r["score"]) for r in result["results"]])
        return out


@pytest.fixture
def dense_index(tmp_path: Path, embedder: Embedder) -> tuple[Path, int, list[list[tuple[str, float]]]]:
    path = tmp_path / "r"
    fast_history(path, 60, files=12)
    index_repository(path)
    units = _embed(path, embedder)
    assert units == 60
    return path, units, _answers(path, embedder)


def _damage(store: Store, how: str) -> None:
    path = store.vectors_path
    if how == "deleted":
        path.unlink()
    elif how == "garbled":  # the middle of the file, length kept: usearch reads it without complaint
        overwrite(path, path.stat().st_size // 2, 4096)
    elif how == "truncated":
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size // 3)
    elif how == "header":
        overwrite(path, 0, 64, 0x00)


@pytest.mark.parametrize("how", ["deleted", "garbled", "truncated", "header"])
def test_damaged_vector_file_is_said_and_the_next_index_repairs_it(dense_index, embedder, how) -> None:
    path, units, clean = dense_index
    store = _store(path)
    _damage(store, how)
    with _engine(path, embedder) as engine:
        result = engine.search(QUERIES[0], SearchOptions(k=10))
        meta = result["_meta"]
        assert "dense" not in meta["lanes"] and result["results"]  # the keyword lanes still answer
        assert any(w.startswith("dense lane off: the vector file") for w in meta["warnings"]), meta["warnings"]
        assert any("`backstory index`" in w for w in meta["warnings"])
        assert meta["index"]["dense_coverage"] == 0.0  # not 100 %
        status = engine.status()
        assert status["integrity"]["ok"] is False and "vector file" in status["hint"]
        assert status["index"]["dense_coverage"] == 0.0
    assert _embed(path, embedder) == units  # every unit embedded again, no --rebuild
    assert _answers(path, embedder) == clean  # and the answers are the clean index's, scores included
    with _engine(path, embedder) as engine:
        status = engine.status()
        assert status["integrity"] == {"ok": True, "problems": []} and status["index"]["dense_coverage"] == 1.0
    assert _embed(path, embedder) == 0


def test_cli_index_re_embeds_a_deleted_vector_file(dense_index) -> None:
    path, units, _clean = dense_index
    _store(path).vectors_path.unlink()
    status = subprocess.run(
        [sys.executable, "-m", "backstory", "status", "--json", "-C", str(path)], capture_output=True, text=True
    )
    assert status.returncode == 0, status.stderr
    assert "vector file vectors.usearch is missing" in json.loads(status.stdout)["hint"]
    proc = subprocess.run([sys.executable, "-m", "backstory", "index", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"embedded {units} file changes" in proc.stdout
    assert "vectors.usearch is missing" in proc.stderr  # said, not silent
    assert f"embedding the {units} file unit(s) again" in proc.stderr


def test_a_copied_vector_file_is_not_taken_for_damage(dense_index, embedder, tmp_path) -> None:
    path, _units, clean = dense_index
    store = _store(path)
    shutil.copy(store.vectors_path, tmp_path / "copy")  # new modification time, same bytes
    os.replace(tmp_path / "copy", store.vectors_path)
    with _engine(path, embedder) as engine:
        assert engine.dense.problem() is None
    assert _answers(path, embedder) == clean
    assert _embed(path, embedder) == 0


def test_writer_killed_mid_dense_phase_is_resumed_not_repaired(tmp_path, embedder) -> None:
    """A dense phase killed -9 anywhere leaves a vector file the catalogue's stamps account for: readers do not
    call it damage and the next run embeds only what is left."""
    path = tmp_path / "r"
    wordy_history(path, 400)  # ~50 tokens a unit: the codec is fitted after 256 units, then batches are claimed
    index_repository(path)
    store = _store(path)

    def some_embedded(db) -> bool:  # type: ignore[no-untyped-def]
        return int(db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0]) >= 64

    env = {"BACKSTORY_DENSE_SAVE_SECONDS": "0", "BACKSTORY_DENSE_BATCH": "64"}
    kill_when(["index", str(path)], some_embedded, store.db_path, env)
    claimed = int(store.db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0])
    assert 64 <= claimed < 400
    with _engine(path, embedder) as engine:
        assert engine.dense.problem() is None
        assert engine.search("update module 7", SearchOptions(k=5))["_meta"]["warnings"] == []
    assert _embed(path, embedder) == 400 - claimed  # resumed, not repaired


def test_vector_file_renamed_but_not_yet_claimed_is_trusted(dense_index, embedder) -> None:
    """The crash window of the two-phase stamp, made exactly: a writer saved more vectors (its stamp recorded
    as expected, the file renamed into place) and died before the transaction that claims them."""
    path, units, clean = dense_index
    store = _store(path)
    (path / "pkg" / "late.py").write_text("def late():\n    return 'late'\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", "commit", "-qm", "Late change"], cwd=path, check=True)
    index_repository(path)
    index = vectors.load(store.vectors_path, embedder.dim)
    (fid,) = [r[0] for r in store.db.execute("SELECT fid FROM files WHERE embedded=0")]
    vectors.upsert(index, [fid], embedder.embed(["late"]))
    dense_build._save(store, index)  # what the killed writer did last
    assert integrity.VECTORS_NEXT in {r[0] for r in store.db.execute("SELECT key FROM state")}
    with _engine(path, embedder) as engine:
        assert engine.dense.problem() is None and engine.status()["integrity"]["ok"]
    assert _embed(path, embedder) == 1  # the unclaimed vector is simply overwritten
    assert integrity.VECTORS_NEXT not in {r[0] for r in store.db.execute("SELECT key FROM state")}
    assert len(clean) == len(QUERIES) and units == 60


def test_the_state_codec_does_not_depend_on_the_embedding_batch(tmp_path, embedder, monkeypatch) -> None:
    """BACKSTORY_DENSE_BATCH used to decide which units the codec was fitted on (those of the batch that crossed
    the threshold), so the MaxSim scores, and the ranking, depended on it."""
    built = tmp_path / "built"
    wordy_history(built, 300)
    index_repository(built)
    results = {}
    for batch in ("256", "64", "100"):
        path = tmp_path / f"b{batch}"
        shutil.copytree(built, path, symlinks=True)
        monkeypatch.setenv("BACKSTORY_DENSE_BATCH", batch)
        assert _embed(path, embedder) == 300
        db = _store(path).db
        codec = unit_states.load_codec(db, STATES_RECIPE)
        assert codec is not None
        states = dict(db.execute("SELECT fid, states FROM unit_states ORDER BY fid").fetchall())
        with _engine(path, embedder) as engine:
            answers = [
                [(r["commit"]["sha"], r["why"]["rerank"]) for r in engine.search(q, SearchOptions(k=10))["results"]]
                for q in ("parse the cookie header", "retry on timeout", "render a template")
            ]
        results[batch] = (codec.digest, states, answers)
    assert results["64"] == results["256"] and results["100"] == results["256"]
