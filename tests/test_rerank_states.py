"""Stored token states for the MaxSim rerank: the codec, what the dense phase stores, and that the rerank reads
them (and scores exactly as a fresh forward pass would), with the real bundled model and real indexes."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backstory.evaluation.rerank_variants import VARIANTS, VariantReranker, pool_tokens
from backstory.history.repo import open_repo
from backstory.index import unit_states
from backstory.index.build import index_repository, store_for
from backstory.index.dense_build import embed_pending, unit_passages
from backstory.index.packing import ZSTD_MAGIC
from backstory.index.store import COMPACT_PENDING, Store, StoreError
from backstory.models import Embedder, MaxSimReranker, resolve_model
from backstory.models.states import (
    COMPONENTS,
    LEVELS,
    MIN_FIT_TOKENS,
    REQUANTIZABLE,
    STATES_RECIPE,
    StateCodec,
    maxsim,
)
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo, kill_dense_phase
from trials import WORDS, wordy_history

pytestmark = pytest.mark.timeout(300)

DIFFS = {
    "net/retry.py": "import time\n\ndef fetch(url, tries=5):\n    delay = 0.5\n    for _ in range(tries):\n"
    "        try:\n            return get(url)\n        except TimeoutError:\n            time.sleep(delay)\n"
    "            delay *= 2\n    raise RuntimeError(url)\n",
    "util/dates.py": "def iso(d):\n    return d.strftime('%Y-%m-%d')\n\n"
    "def parse(s):\n    return datetime.fromisoformat(s)\n",
    "export/csv.py": "import csv\n\ndef write_rows(fh, rows):\n    csv.writer(fh).writerows(rows)\n",
}


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(resolve_model(None, cache_dir=tmp_path_factory.mktemp("models")))


def _engine(path: Path, embedder: Embedder) -> Engine:
    engine = Engine(path, models=ModelConfig(reranker="maxsim"))
    engine.dense._embedder = embedder
    return engine


def _embed(path: Path, embedder: Embedder) -> int:
    store = store_for(open_repo(path))
    with store.write_lock():
        return embed_pending(store, embedder)


def test_codec_roundtrip_is_close_deterministic_and_serialisable(embedder: Embedder) -> None:
    texts = [f"{p}\n{body}" for p, body in DIFFS.items()] * 3
    states = np.concatenate(embedder.token_states(texts, content_only=True))
    codec = StateCodec.fit(states, components=48)
    assert codec.components == 48 and codec.dim == embedder.dim
    again = StateCodec.fit(states, components=48)
    assert again.digest == codec.digest  # same sample, same bytes
    assert StateCodec.from_bytes(codec.to_bytes()).digest == codec.digest
    blob = codec.encode(states)
    assert len(blob) == len(states) * codec.token_bytes == len(states) * (2 + 24)  # 48 int4 codes
    back = codec.decode(blob)
    assert back.shape == states.shape
    np.testing.assert_allclose(np.linalg.norm(back, axis=1), 1.0, rtol=1e-5)
    cosines = (back * states).sum(axis=1)
    # the fitting sample comes back closely (0.9 / 0.97 at 7 levels; the coarse step costs ranking nothing measured)
    assert cosines.min() > 0.85 and cosines.mean() > 0.92
    assert codec.encode(states) == blob
    # scoring in the reduced space equals scoring the reconstruction
    query = embedder.token_states(["retry the request with a timeout"])[0]
    per_text = [codec.encode(x) for x in embedder.token_states(texts[:3], content_only=True)] + [b""]
    expected = [maxsim(query, codec.decode(b)) if b else 0.0 for b in per_text]
    np.testing.assert_allclose(codec.maxsim(query, per_text), expected, atol=1e-5)
    assert codec.maxsim(query[:0], per_text) == [0.0] * 4
    with pytest.raises(ValueError):
        codec.decode(blob[:-1])
    with pytest.raises(ValueError):  # one damaged blob among a search's: an error, not misaligned scores
        codec.maxsim(query, [per_text[0], blob[:-1]])
    odd = StateCodec.fit(states, components=33)  # int4 codes come in pairs: one is padding
    assert odd.token_bytes == 2 + 17 and odd.coords(odd.encode(states)).shape == (len(states), 33)
    with pytest.raises(ValueError):
        StateCodec.from_bytes(codec.to_bytes()[:-4])


def _codes(codec: StateCodec, blob: bytes) -> np.ndarray:
    """The int4 codes of a blob (``-8..7``), every token's in a row."""
    packed = np.frombuffer(blob[2 * (len(blob) // codec.token_bytes) :], dtype=np.uint8)
    return np.stack([packed >> 4, packed & 15], axis=1).astype(np.int16).reshape(-1) - 8


def test_codes_use_the_coarse_step_and_finer_rows_are_brought_to_it(embedder: Embedder) -> None:
    texts = [f"{p}\n{body}" for p, body in DIFFS.items()] * 3
    states = np.concatenate(embedder.token_states(texts, content_only=True))
    codec = StateCodec.fit(states, components=48)
    blob = codec.encode(states)
    codes = _codes(codec, blob).reshape(len(states), -1)
    assert LEVELS == 3 and f"levels{LEVELS}" in STATES_RECIPE and STATES_RECIPE not in REQUANTIZABLE
    assert (np.abs(codes).max(axis=1) == LEVELS).all()  # each token's largest coordinate at +-LEVELS, none beyond
    # a row an older version wrote (codes over -7..7, the same layout) decodes as before, and comes to the
    # current step close to what encoding its token states afresh gives: the two roundings differ by a code
    # at most, in a few places; doing it twice changes nothing
    coords = np.asarray((states - codec.mean) @ codec.basis, dtype=np.float32)
    fine = codec._encode_coords(coords, 7)
    assert len(fine) == len(blob) and (np.abs(_codes(codec, fine)).reshape(len(states), -1).max(axis=1) == 7).all()
    np.testing.assert_allclose(codec.coords(fine), coords, atol=float(np.abs(coords).max()) / 7)
    coarse = codec.requantize(fine)
    differ = np.abs(_codes(codec, coarse) - _codes(codec, blob))
    assert differ.max() <= 1 and (differ == 0).mean() > 0.8
    assert codec.requantize(coarse) == coarse and codec.requantize(blob) == blob
    # the coarser step still brings the tokens back closely (cosines to the originals)
    back = codec.decode(blob)
    assert (back * states).sum(axis=1).mean() > 0.92
    # and compresses to fewer bytes than the finer one: the reason for the step
    assert len(unit_states.pack(blob)) < 0.8 * len(unit_states.pack(fine))


def test_damaged_codec_is_a_clear_error(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    codec = StateCodec.fit(rng.standard_normal((300, 16)).astype(np.float32), components=8)
    db = sqlite3.connect(tmp_path / "catalog.sqlite", isolation_level=None)
    unit_states.ensure_tables(db)
    unit_states.save_codec(db, STATES_RECIPE, codec)
    loaded = unit_states.load_codec(db, STATES_RECIPE)
    assert loaded is not None and loaded.digest == codec.digest
    assert unit_states.load_codec(db, "another recipe") is None
    for blob in (b"\x01\x02", codec.to_bytes()[:-4]):  # shorter than the header (was a numpy error), cut short
        db.execute("UPDATE state_codec SET codec=?", (blob,))
        with pytest.raises(StoreError, match=r"codec in the catalogue is damaged .*--rebuild"):
            unit_states.load_codec(db, STATES_RECIPE)


def test_stored_rows_that_cannot_be_read_back_are_left_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Each kind of damage costs its unit only (the rerank runs the model for it), and is logged once."""
    db = sqlite3.connect(tmp_path / "catalog.sqlite", isolation_level=None)
    db.execute("CREATE TABLE files (fid INTEGER PRIMARY KEY, embedded INTEGER NOT NULL)")
    unit_states.ensure_tables(db)
    width = 26
    good = bytes(range(2 * width))
    packed = unit_states.pack(good)
    base = 990_000  # units no other test has: each damaged one is logged once per process
    rows = {
        base + 1: packed,  # sound
        base + 2: good,  # an older version's raw row
        base + 3: packed[:-4] + bytes(4),  # its checksum wrong
        base + 4: good[:-1],  # raw, cut short: not a whole number of tokens
        base + 5: unit_states.pack(good[:-1]),  # compressed, likewise
        base + 6: unit_states.pack(bytes(unit_states.MAX_BYTES + 1)),  # a frame claiming more than a unit holds
        base + 7: unit_states.ZSTD_MAGIC + b"garbage",
    }
    db.executemany("INSERT INTO files(fid, embedded) VALUES (?, 1)", [(f,) for f in rows])
    db.executemany("INSERT INTO unit_states(fid, states) VALUES (?, ?)", list(rows.items()))
    with caplog.at_level("WARNING"):
        assert unit_states.get(db, list(rows), width) == {base + 1: good, base + 2: good}
        assert unit_states.get(db, list(rows), width) == {base + 1: good, base + 2: good}
    damaged = [r for r in caplog.records if "damaged" in r.getMessage()]
    assert sorted(int(r.args[0]) - base for r in damaged) == [3, 4, 5, 6, 7]  # once each, though read twice
    assert all("--rebuild" in r.getMessage() for r in damaged)
    assert sorted(f - base for f in unit_states.get(db, list(rows))) == [1, 2, 4, 5]  # no width: frames only


def _ward_by_hand(rows: np.ndarray, keep: int) -> np.ndarray:
    """Ward's clustering the slow way: merge the two clusters whose union adds least to the summed squared
    distances to the means (ties to the lowest positions) until ``keep`` are left; each cluster's unit mean, in
    the order of each cluster's first row."""
    clusters = [[i] for i in range(len(rows))]
    while len(clusters) > keep:
        costs = {}
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                na, nb = len(clusters[a]), len(clusters[b])
                gap = rows[clusters[a]].mean(axis=0) - rows[clusters[b]].mean(axis=0)
                costs[(a, b)] = na * nb / (na + nb) * float(gap @ gap)
        a, b = min(costs, key=lambda k: (costs[k], k))
        clusters[a] += clusters.pop(b)
    means = np.array([rows[c].mean(axis=0) for c in sorted(clusters, key=min)])
    return means / np.linalg.norm(means, axis=1, keepdims=True)


def test_token_pooling_is_wards_clustering() -> None:
    """The evaluation's pooled-states variant (measured, not shipped): Ward's clustering down to ceil(n / factor)
    unit rows, as the slow definition gives it, near-duplicates merged before anything else."""
    rng = np.random.default_rng(7)
    base = rng.normal(size=(6, 32))
    near = base[[0, 2, 4]] + 1e-3 * rng.normal(size=(3, 32))  # a close twin of rows 0, 2 and 4
    rows = np.concatenate([base, near])
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    pooled = pool_tokens(rows, 1.5)
    assert pooled.shape == (6, 32) and pooled.dtype == np.float32
    assert (pooled @ rows[:6].T).max(axis=0).min() > 0.999  # each twin joined its original, nothing else merged
    for seed in range(20):  # clusters of every size, against the slow definition
        x = np.random.default_rng(seed).normal(size=(13, 8))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        for factor in (1.5, 2.0, 3.0):
            np.testing.assert_allclose(pool_tokens(x, factor), _ward_by_hand(x, int(np.ceil(13 / factor))), atol=1e-6)
    assert pool_tokens(rows, 100).shape == (1, 32) and pool_tokens(rows, 1).shape == rows.shape


def test_content_only_states_drop_punctuation(embedder: Embedder) -> None:
    text = "def f(x):\n    return x.y(z) == [1, 2]"
    every = embedder.token_states([text])[0]
    content = embedder.token_states([text], content_only=True)[0]
    assert 0 < len(content) < len(every)
    vectors, states = embedder.embed_with_states([text, "retry with backoff"])
    np.testing.assert_array_equal(vectors, embedder.embed([text, "retry with backoff"]))
    np.testing.assert_array_equal(states[0], content)  # the dense pass gives the states a fresh pass would
    long = " ".join(WORDS * 4)  # past the 128-token window: counted as the window is cut
    counted = embedder.count_content_tokens([text, long, ""])
    assert counted == [len(s) for s in embedder.token_states([text, long, ""], content_only=True)]
    assert counted[0] == len(content) and 0 < counted[1] <= 128 - 2  # [CLS] and [SEP] take two places


def _embedded_history(path: Path, embedder: Embedder) -> tuple[Store, StateCodec]:
    """A 240-commit wordy history indexed with embeddings: its store and the codec its states were stored with."""
    wordy_history(path, 240)
    index_repository(path)
    assert _embed(path, embedder) == 240
    store = store_for(open_repo(path))
    codec = unit_states.load_codec(store.db, STATES_RECIPE)
    assert codec is not None
    return store, codec


def test_dense_phase_stores_states_and_rerank_reads_them(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "big"
    store, codec = _embedded_history(path, embedder)
    db = store.db
    assert store.read_manifest()["dense"]["states"] == STATES_RECIPE
    assert codec.components == COMPONENTS
    assert f"pca{COMPONENTS}" in STATES_RECIPE  # a different number of axes is a different recipe: a rebuild
    fids = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=1 ORDER BY fid")]
    blobs = unit_states.get(db, fids)
    assert sorted(blobs) == fids  # every embedded unit has its states
    rows = dict(db.execute("SELECT fid, states FROM unit_states").fetchall())
    assert all(r[:4] == ZSTD_MAGIC and unit_states.unpack(r) == blobs[f] for f, r in rows.items())  # compressed
    assert unit_states.size_bytes(db) == sum(len(r) for r in rows.values()) < sum(len(b) for b in blobs.values())
    engine = Engine(path, models=ModelConfig(dense=False, reranker="none"))
    assert engine.status()["states_bytes"] == unit_states.size_bytes(db) > 0  # `backstory status` shows it
    engine.close()

    # stored states are the codec's encoding of exactly what a fresh pass over the unit's text gives
    fresh = embedder.token_states(unit_passages(store, fids[:5], False), content_only=True)
    for fid, states in zip(fids[:5], fresh, strict=True):
        assert blobs[fid] == codec.encode(states)

    engine = _engine(path, embedder)
    query = "func_17 returns the value times 17"
    stored = engine.search(query, SearchOptions())
    assert stored["_meta"]["rerank"] == "maxsim"
    scores = {r["commit"]["sha"]: r["why"]["rerank"] for r in stored["results"]}
    assert all(isinstance(s, float) for s in scores.values())
    assert engine.search(query, SearchOptions())["results"] == stored["results"]  # deterministic

    # rows an older version stored raw read back the same
    with store.transaction() as tx:
        tx.executemany("UPDATE unit_states SET states=? WHERE fid=?", [(b, f) for f, b in blobs.items()])
    assert unit_states.get(db, fids) == blobs
    assert _engine(path, embedder).search(query, SearchOptions())["results"] == stored["results"]

    # a damaged row is scored from the model, and the search says nothing is lost: the same scores
    top_fids = [
        db.execute("SELECT fid FROM files WHERE sha=?", (r["commit"]["sha"],)).fetchone()[0] for r in stored["results"]
    ]
    packed = unit_states.pack(blobs[top_fids[0]])
    with store.transaction() as tx:
        tx.execute("UPDATE unit_states SET states=? WHERE fid=?", (packed[:-6] + b"\0" * 6, top_fids[0]))
    assert top_fids[0] not in unit_states.get(db, top_fids)
    damaged = _engine(path, embedder).search(query, SearchOptions())
    assert {r["commit"]["sha"]: r["why"]["rerank"] for r in damaged["results"]} == scores

    # without the stored rows the rerank runs the model over the same units: identical scores
    with store.transaction() as tx:
        tx.execute("DELETE FROM unit_states")
    recomputed = _engine(path, embedder).search(query, SearchOptions())
    assert {r["commit"]["sha"]: r["why"]["rerank"] for r in recomputed["results"]} == scores

    # the evaluation's float32 variant scores each candidate against its best hunk's unit, uncompressed
    engine = _engine(path, embedder)
    variant = VariantReranker(engine, VARIANTS["unit-distinct"])
    engine.rerank.scores = variant  # type: ignore[method-assign]
    got = engine.search(query, SearchOptions())
    q = embedder.token_states([query], max_tokens=128)[0]
    for r in got["results"]:
        sha, path = r["commit"]["sha"], r["hunks"][0]["path"]
        fid = db.execute("SELECT fid FROM files WHERE sha=? AND path=?", (sha, path)).fetchone()[0]
        unit = embedder.token_states(unit_passages(store, [fid], False), content_only=True)[0]
        assert r["why"]["rerank"] == pytest.approx(maxsim(q, unit), abs=1e-6)


def test_small_history_embeds_each_unit_once_and_backfills_states_later(tmp_path: Path, embedder: Embedder) -> None:
    repo = GitRepo(tmp_path / "small")
    for i, (p, body) in enumerate(DIFFS.items()):
        repo.commit(f"change {i}", {p: body})
    index_repository(repo.path)
    assert _embed(repo.path, embedder) == 3
    store = store_for(open_repo(repo.path))
    assert unit_states.load_codec(store.db, STATES_RECIPE) is None  # too few tokens to fit axes on
    assert unit_states.get(store.db, [r[0] for r in store.db.execute("SELECT fid FROM files")]) == {}
    query = "retry with exponential backoff"
    first = _engine(repo.path, embedder).search(query, SearchOptions())
    top = first["results"][0]
    assert top["why"]["rerank"] is not None and "net/retry.py" in {h["path"] for h in top["hunks"]}
    # without a codec the rerank scores the units' uncompressed states from a fresh forward pass
    q = embedder.token_states([query], max_tokens=128)[0]
    for r in first["results"]:
        fid = store.db.execute("SELECT fid FROM files WHERE sha=?", (r["commit"]["sha"],)).fetchone()[0]
        unit = embedder.token_states(unit_passages(store, [fid], False), content_only=True)[0]
        assert r["why"]["rerank"] == pytest.approx(maxsim(q, unit), abs=1e-6)

    # nothing new: nothing is embedded again, and search answers as before
    vectors_mtime = store.vectors_path.stat().st_mtime_ns
    assert _embed(repo.path, embedder) == 0
    assert store.vectors_path.stat().st_mtime_ns == vectors_mtime
    assert store.db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0] == 3
    assert _engine(repo.path, embedder).search(query, SearchOptions())["results"] == first["results"]
    repo.commit("one more", {"util/slug.py": "def slug(s):\n    return s.lower().replace(' ', '-')\n"})
    index_repository(repo.path)
    assert _embed(repo.path, embedder) == 1  # only the new unit

    # the history grows past the threshold: the codec is fitted on every unit's states, the early units'
    # included (backfilled from a forward pass, not embedded again), in a fresh build's order (newest first)
    body = 'def handler_{0}(request):\n    """{1}"""\n    return dispatch(request, {0})\n'
    docs = [" ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(30)) for i in range(150)]
    files = {f"pkg/m{i}.py": body.format(i, docs[i]) for i in range(150)}
    repo.commit("many modules", files)
    index_repository(repo.path)
    assert _embed(repo.path, embedder) == 150
    db = store_for(open_repo(repo.path)).db
    codec = unit_states.load_codec(db, STATES_RECIPE)
    assert codec is not None
    fids = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=1 ORDER BY author_time DESC, fid DESC")]
    states = embedder.token_states(unit_passages(store, fids, False), content_only=True)
    assert sum(len(s) for s in states) >= MIN_FIT_TOKENS
    assert codec.digest == StateCodec.fit(np.concatenate([s for s in states if len(s)])).digest
    blobs = unit_states.get(db, fids)
    assert len(fids) == 154 and sorted(blobs) == sorted(fids)
    assert all(blobs[f] == codec.encode(s) for f, s in zip(fids, states, strict=True))
    assert _embed(repo.path, embedder) == 0


def test_index_from_before_stored_states_is_embedded_again(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "old"
    wordy_history(path, 120)
    index_repository(path)
    _embed(path, embedder)
    store = store_for(open_repo(path))
    manifest = store.read_manifest()
    del manifest["dense"]["states"]  # what an index built before stored states carries
    store.write_manifest(manifest)
    # search still works meanwhile: the dense lane's vectors are valid and the rerank runs the model itself
    result = _engine(path, embedder).search("func_7 value", SearchOptions())
    assert "dense" in result["_meta"]["lanes"] and result["_meta"]["rerank"] == "maxsim"
    assert all(isinstance(r["why"]["rerank"], float) for r in result["results"])
    with store.write_lock():
        assert embed_pending(store, embedder) == 120
    assert store.read_manifest()["dense"]["states"] == STATES_RECIPE
    assert store.db.execute("SELECT COUNT(*) FROM unit_states").fetchone()[0] == 120


def test_states_of_an_older_step_are_reencoded_in_place_without_the_model(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An index whose rows an older version encoded at 7 levels: the next run re-encodes them at the current
    step (no unit embedded again, the vectors untouched) and compacts the catalogue; a run that fails halfway,
    or whose compaction fails, is finished by the next one; searches meanwhile read the rows as stored."""
    path = tmp_path / "older"
    store, codec = _embedded_history(path, embedder)
    db = store.db
    fids = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=1 ORDER BY fid")]
    raw = embedder.token_states(unit_passages(store, fids, False), content_only=True)
    old = {f: codec._encode_coords((s - codec.mean) @ codec.basis, 7) for f, s in zip(fids, raw, strict=True)}
    query = "func_17 returns the value times 17"
    q = embedder.token_states([query])[0]

    def as_older_version_left_it() -> None:
        with store.transaction() as tx:
            unit_states.put(tx, old.items())
            unit_states.save_codec(tx, REQUANTIZABLE[0], codec)
        manifest = store.read_manifest()
        manifest["dense"]["states"] = REQUANTIZABLE[0]
        store.write_manifest(manifest)

    def scored_as_stored() -> dict[str, Any]:
        """A search, with each result's rerank score checked against its unit's row as stored now."""
        got = _engine(path, embedder).search(query, SearchOptions())
        rows = unit_states.get(db, fids)
        for r in got["results"][:5]:
            fid = db.execute("SELECT fid FROM files WHERE sha=?", (r["commit"]["sha"],)).fetchone()[0]
            assert r["why"]["rerank"] == pytest.approx(codec.maxsim(q, [rows[fid]])[0], abs=1e-6)
        return got

    def embed() -> int:
        with store.write_lock():
            return embed_pending(store, embedder)

    as_older_version_left_it()
    vectors_before = store.vectors_path.read_bytes()
    scored_as_stored()  # before the next run: the older rows, not the model per candidate
    # a run that fails after two batches: those are re-encoded, the stamp and the codec still the older ones
    monkeypatch.setattr(unit_states, "REQUANTIZE_BATCH", 50)
    real = StateCodec.requantize
    calls = iter(range(10**6))

    def failing(self: StateCodec, blob: bytes) -> bytes:
        if next(calls) == 120:
            raise RuntimeError("killed")
        return real(self, blob)

    monkeypatch.setattr(StateCodec, "requantize", failing)
    with pytest.raises(RuntimeError):
        embed()
    monkeypatch.setattr(StateCodec, "requantize", real)
    assert store.read_manifest()["dense"]["states"] == REQUANTIZABLE[0]
    assert unit_states.codec_recipe(db) == REQUANTIZABLE[0]
    halfway = unit_states.get(db, fids)
    assert sum(halfway[f] != old[f] for f in fids) == 100  # two batches of 50 committed
    scored_as_stored()
    # the next run finishes it; its compaction fails (no room for SQLite's copy): logged, tried again later
    monkeypatch.setattr(Store, "compact", lambda self: (_ for _ in ()).throw(sqlite3.OperationalError("disk full")))
    with caplog.at_level("WARNING"):
        assert embed() == 0  # nothing embedded again
    assert "could not compact the catalogue (disk full)" in caplog.text
    assert store.vectors_path.read_bytes() == vectors_before
    assert store.read_manifest()["dense"]["states"] == STATES_RECIPE
    assert unit_states.load_codec(db, STATES_RECIPE).digest == codec.digest  # type: ignore[union-attr]
    migrated = unit_states.get(db, fids)
    assert migrated == {f: codec.requantize(b) for f, b in old.items()}
    assert store.get_state(COMPACT_PENDING) == "1"
    monkeypatch.undo()
    assert embed() == 0
    assert store.get_state(COMPACT_PENDING) == "0"
    assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    searched = scored_as_stored()

    # killed after filing the codec, before the stamp: searches read the rows, the next run writes the stamp
    manifest = store.read_manifest()
    manifest["dense"]["states"] = REQUANTIZABLE[0]
    store.write_manifest(manifest)
    assert scored_as_stored()["results"] == searched["results"]
    assert embed() == 0
    assert store.read_manifest()["dense"]["states"] == STATES_RECIPE and unit_states.get(db, fids) == migrated

    # a damaged codec of the older recipe: every unit embedded again, as for any other stamp difference
    as_older_version_left_it()
    with store.transaction() as tx:
        tx.execute("UPDATE state_codec SET codec=?", (codec.to_bytes()[:-4],))
    assert embed() == 240
    assert store.read_manifest()["dense"]["states"] == STATES_RECIPE


def test_purged_units_lose_their_states(tmp_path: Path, embedder: Embedder) -> None:
    repo = GitRepo(tmp_path / "purge")
    for i in range(120):  # enough distinct tokens for a codec (MIN_FIT_TOKENS)
        doc = " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(30))
        repo.commit(f"c{i}", {f"m{i}.py": f'def fn_{i}(arg):\n    """{doc}"""\n    return compute(arg, {i})\n'})
    index_repository(repo.path)
    _embed(repo.path, embedder)
    repo.git("reset", "-q", "--hard", "HEAD~5")
    index_repository(repo.path)
    _embed(repo.path, embedder)
    db = store_for(open_repo(repo.path)).db
    embedded = {r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=1")}
    stored = {r[0] for r in db.execute("SELECT fid FROM unit_states")}
    assert unit_states.load_codec(db, STATES_RECIPE) is not None
    assert len(embedded) == 115 and stored == embedded


def test_dense_phase_killed_leaves_states_for_every_claimed_unit(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "kill"
    wordy_history(path, 400)
    index_repository(path)
    store = store_for(open_repo(path))
    done = kill_dense_phase(path, 128)
    assert 128 <= done < 400
    with sqlite3.connect(store.db_path) as db:
        claimed = {r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=1")}
        states = {r[0] for r in db.execute("SELECT fid FROM unit_states")}
    assert claimed == states  # written in the same transaction
    _embed(path, embedder)
    db = store_for(open_repo(path)).db
    assert db.execute("SELECT COUNT(*) FROM unit_states").fetchone()[0] == 400


def test_maxsim_score_states_matches_text_scoring(embedder: Embedder) -> None:
    reranker = MaxSimReranker(embedder)
    passages = list(DIFFS.values())
    by_text = reranker.score("retry with backoff", passages)
    states = embedder.token_states(passages, max_tokens=reranker.max_tokens)
    assert reranker.score_states(reranker.query_states("retry with backoff"), states) == by_text
    assert maxsim(np.zeros((0, 4), np.float32), np.ones((3, 4), np.float32)) == 0.0


def test_a_search_reads_the_catalogue_by_key(tmp_path: Path, embedder: Embedder) -> None:
    """Every catalogue read a search makes looks rows up by key: none scans a table or walks an index of a
    column with a handful of values (``files.embedded``, ``commits.state``). Without ``ANALYZE`` statistics
    SQLite picks the same plans for these few rows as for git/git's, where such walks cost 22-69 ms a search
    (docs/large-histories.md)."""
    path = tmp_path / "plans"
    wordy_history(path, 240)  # enough tokens to fit the states' codec, so the rerank reads stored states
    index_repository(path)
    _embed(path, embedder)
    engine = _engine(path, embedder)
    query = "func_17 returns the value times 17"
    engine.search(query, SearchOptions())  # the first search counts units once per data version: not per search
    statements: list[str] = []
    db = engine.store.db
    db.set_trace_callback(statements.append)
    engine.search("value times 23", SearchOptions())
    db.set_trace_callback(None)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert any("unit_states" in s for s in selects) and any("hunks" in s for s in selects)
    for sql in selects:
        plan = [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql)]
        # a scan of the keys a statement lists itself (a VALUES table named `wanted`) or of a LIMITed subquery is
        # no walk of the catalogue
        listed = re.compile(r"SCAN (\d+ CONSTANT ROWS|wanted|\(subquery-\d+\))$")
        walks = [
            step
            for step in plan
            if (step.startswith("SCAN") and not listed.match(step)) or re.search(r"\((embedded|state)=", step)
        ]
        assert not walks, (sql, plan)
