"""The message lane (``message_dense``): one vector per commit message, made in the dense phase, ranked by cosine.

Pure parts (ranking by cosine, the lane's hunks, the stored form) and a real repository, with the bundled model.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from backstory.history.repo import open_repo
from backstory.index import message_vectors
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.dense_build import embed_messages, embed_pending
from backstory.index.store import COMPACT_PENDING
from backstory.models import Embedder, resolve_model
from backstory.search.engine import Engine
from backstory.search.message_lane import Directions, commit_hunks, grown, top_by_cosine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo

pytestmark = pytest.mark.timeout(300)

QUERY = "stop the progress bar from flickering"


def test_top_by_cosine_orders_by_cosine_then_key() -> None:
    keys = ["c", "a", "b", "d", "e"]
    vectors = Directions(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [1.0, 1.0], [0.0, 0.0]], dtype=np.float32))
    ranked = top_by_cosine(np.array([2.0, 0.0]), keys, vectors, 3)
    assert [k for k, _s in ranked] == ["b", "c", "d"]  # b and c tie at 1.0: by key
    assert ranked[0][1] == 1.0 and ranked[2][1] == pytest.approx(0.707107)
    assert [k for k, _s in top_by_cosine(np.array([1.0, 0.0]), keys, vectors, 5, allowed={"a", "d"})] == ["d", "a"]
    assert [k for k, _s in top_by_cosine(np.array([1.0, 0.0]), keys, vectors, 2)] == ["b", "c"]  # the tie kept whole
    assert top_by_cosine(np.array([1.0, 0.0]), [], Directions(np.zeros((0, 2), dtype=np.int8)), 5) == []
    assert top_by_cosine(np.array([1.0, 0.0]), keys, vectors, 5, allowed=set()) == []
    assert top_by_cosine(np.array([0.0, 1.0]), keys, vectors, 5)[-1] == ("e", 0.0)  # a zero row: cosine 0


def test_cosines_from_int8_codes_are_those_of_the_stored_vectors(monkeypatch) -> None:
    """The lane keeps the int8 codes (a quarter of float32 vectors' memory) and scores them a chunk at a time; the
    cosines are those of the decoded vectors, whatever the chunking, and only the chunk is ever widened."""
    rng = np.random.default_rng(11)
    many = rng.normal(size=(53, 384)).astype(np.float32)
    rows = [message_vectors.encode(x) for x in many]
    decoded = message_vectors.decode(rows, 384)
    unit = decoded / np.linalg.norm(decoded, axis=1, keepdims=True)
    query = rng.normal(size=384).astype(np.float32)
    q = query / np.linalg.norm(query)
    monkeypatch.setattr(Directions, "CHUNK", 8)  # several chunks and a short last one
    vectors = Directions(message_vectors._directions(rows, 384))
    assert vectors.rows.dtype == np.int8 and vectors.rows.nbytes == 53 * 384
    np.testing.assert_allclose(vectors.cosines(q), unit @ q, atol=2e-6)
    subset = np.array([3, 17, 40])
    np.testing.assert_allclose(vectors.cosines(q, subset), (unit @ q)[subset], atol=2e-6)
    keys = [f"{i:02d}" for i in range(53)]
    want = sorted(((k, round(float(c), 6)) for k, c in zip(keys, unit @ q, strict=True)), key=lambda t: (-t[1], t[0]))
    got = top_by_cosine(query, keys, vectors, 10)
    assert [k for k, _s in got] == [k for k, _s in want[:10]]
    assert max(abs(a[1] - b[1]) for a, b in zip(got, want, strict=False)) <= 2e-6
    # float16 rows of the recipe before, among int8 ones: float32 vectors, the same directions
    mixed = [many[0].astype(np.float16).tobytes(), *rows[1:]]
    widened = Directions(message_vectors._directions(mixed, 384))
    assert widened.rows.dtype == np.float32
    np.testing.assert_allclose(widened.cosines(q)[1:], unit[1:] @ q, atol=2e-6)


def test_commit_hunks_spreads_a_commit_score_over_its_hunks() -> None:
    ranked = [("x", 0.9), ("y", 0.5), ("z", 0.4)]
    assert commit_hunks(ranked, {"x": [3, 1], "z": [7]}) == [(3, 0.9), (1, 0.9), (7, 0.4)]


def test_stored_form_round_trips_and_text_is_bounded() -> None:
    v = np.array([0.25, -0.5, 0.125], dtype=np.float32)
    row = message_vectors.encode(v)
    assert len(row) == 4 + 3  # a float32 scale and an int8 code a dimension
    back = message_vectors.decode([row] * 2, 3)
    np.testing.assert_allclose(back, [v, v], atol=0.5 / 254 + 1e-7)  # within half a step of the largest / 127
    assert back[0][1] == -0.5  # the largest coordinate is exact
    rng = np.random.default_rng(3)
    many = rng.normal(size=(50, 384)).astype(np.float32)
    decoded = message_vectors.decode([message_vectors.encode(x) for x in many], 384)
    cosines = (decoded * many).sum(axis=1) / np.linalg.norm(decoded, axis=1) / np.linalg.norm(many, axis=1)
    assert cosines.min() > 0.9999  # what the lane compares
    assert not message_vectors.decode([message_vectors.encode(np.zeros(3))], 3).any()
    with pytest.raises(ValueError):
        message_vectors.decode([row], 4)
    # float16 rows of the recipe before read as before, beside new ones, until the next dense run replaces them
    half = np.array([0.1, 0.2, -0.3, 0.4, 0.0, -0.1], dtype=np.float16)
    mixed = message_vectors.decode([half.tobytes(), message_vectors.encode(half.astype(np.float32))], 6)
    assert (mixed[0] == half.astype(np.float32)).all() and np.allclose(mixed[1], mixed[0], atol=0.4 / 254 + 1e-6)
    with pytest.raises(ValueError):
        message_vectors.decode([row, b"12345"], 3)
    assert message_vectors.message_text("Subject", "") == "Subject"
    assert message_vectors.message_text("Subject", "Body\n") == "Subject\nBody"
    assert len(message_vectors.message_text("s", "x" * 10_000)) == message_vectors.MAX_CHARS


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(resolve_model(None, cache_dir=tmp_path_factory.mktemp("models")))


def _history(path: Path) -> tuple[GitRepo, dict[str, str]]:
    """The wanted commit's message says what the query means in other words; its diff shares none of them."""
    repo = GitRepo(path)
    shas = {
        "docs": repo.commit("Document the install steps", {"README.md": "# tool\n\npip install tool\n"}),
        "csv": repo.commit(
            "Write reports as CSV files",
            {"report/csv.py": "import csv\n\ndef write_rows(fh, rows):\n    csv.writer(fh).writerows(rows)\n"},
        ),
        "wanted": repo.commit(
            "Redraw the status indicator less often so it no longer blinks on slow terminals",
            {"ui/draw.py": "INTERVAL = 0.25\n\ndef tick(screen, state):\n    screen.paint(state)\n"},
        ),
        "dates": repo.commit(
            "Parse ISO dates in the config loader",
            {"config/dates.py": "def iso(d):\n    return d.strftime('%Y-%m-%d')\n"},
        ),
        "auth": repo.commit(
            "Refuse expired tokens at login", {"auth/login.py": "def check(token, now):\n    return token.exp > now\n"}
        ),
    }
    return repo, shas


def _index(repo: GitRepo, embedder: Embedder, no_messages: bool) -> Engine:
    index_repository(repo.path, options=BuildOptions(no_messages=no_messages))
    store = store_for(open_repo(repo.path))
    with store.write_lock():
        embed_pending(store, embedder)
    engine = Engine(repo.path, models=ModelConfig())
    engine.dense._embedder = embedder
    return engine


def test_a_commit_found_only_by_its_message_meaning_ranks_through_the_message_lane(tmp_path, embedder) -> None:
    repo, shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    rows = engine.store.db.execute("SELECT COUNT(*) FROM message_vectors").fetchone()[0]
    assert rows == len(shas)

    alone = engine.search(QUERY, SearchOptions(lanes=("message_dense",), rerank=False))
    assert alone["_meta"]["lanes"] == ["message_dense"]
    assert alone["results"][0]["commit"]["sha"] == shas["wanted"]

    keyword = engine.search(QUERY, SearchOptions(lanes=("diff", "message"), rerank=False))
    assert shas["wanted"] not in [r["commit"]["sha"] for r in keyword["results"]]  # no shared word to find it by

    full = engine.search(QUERY)
    assert "message_dense" in full["_meta"]["lanes"]
    top = full["results"][0]
    assert top["commit"]["sha"] == shas["wanted"]
    assert top["why"]["lanes"]["message_dense"] == 1
    engine.close()


def test_message_cosines_started_beside_the_keyword_lanes_are_those_of_the_query(tmp_path, embedder) -> None:
    """A search starts the message cosines with the query's pass (`MessageLane.begin`); the lane takes them only
    for the same query and matrix, computes them itself when they failed, and ranks as when it computes them."""
    repo, _shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    dense, messages = engine.dense, engine.messages
    dense.rank(QUERY, None, None)
    in_place = messages.rank(QUERY, None, None)
    assert in_place[0]
    dense.begin_pass(QUERY)
    messages.begin(QUERY)
    assert messages._pending is not None and messages._pending[2].result() == list(in_place[1].items())
    dense.rank(QUERY, None, None)
    assert messages.rank(QUERY, None, None) == in_place and messages._pending is None
    # what the lane takes is the started work itself (a marker stands in for it), for its query only
    columns = messages._message_matrix(384)[1]
    marker: Future = Future()
    marker.set_result([])
    for pending, taken in (((QUERY, columns, marker), True), (("another query", columns, marker), False)):
        messages._pending = pending
        hits, _scores = messages.rank(QUERY, None, None)
        assert (hits == []) is taken and messages._pending is None
    failed: Future = Future()
    failed.set_exception(RuntimeError("the early pass failed"))
    messages._pending = (QUERY, columns, failed)
    assert messages.rank(QUERY, None, None) == in_place
    full = engine.search(QUERY)
    assert "message_dense" in full["_meta"]["lanes"] and messages._pending is None
    engine.close()


def test_message_vectors_are_made_once_and_only_with_messages(tmp_path, embedder) -> None:
    repo, shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    store = engine.store
    with store.write_lock():
        assert embed_messages(store, embedder) == 0  # all done: nothing again
    repo.commit("Speed up the cache lookups", {"cache.py": "CACHE = {}\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=False))
    with store.write_lock():
        embed_pending(store, embedder)  # the dense phase embeds the new commit's message too
    assert store.db.execute("SELECT COUNT(*) FROM message_vectors").fetchone()[0] == len(shas) + 1
    engine.close()

    blind = _index(_history(tmp_path / "b")[0], embedder, no_messages=True)
    db = sqlite3.connect(blind.store.db_path)
    try:
        count = db.execute("SELECT COUNT(*) FROM message_vectors").fetchone()[0]
    except sqlite3.OperationalError:
        count = 0
    assert count == 0
    result = blind.search(QUERY)
    assert "message_dense" not in result["_meta"]["lanes"]
    blind.close()


def test_a_model_change_or_a_purged_commit_drops_message_vectors(tmp_path, embedder) -> None:
    from backstory.index.dense_build import restamp

    repo, shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    store = engine.store
    count = "SELECT COUNT(*) FROM message_vectors"
    with store.transaction() as tx:  # as if a rewrite left this commit unreachable and the run purged it
        tx.execute("UPDATE commits SET state='pending' WHERE sha=?", (shas["docs"],))
    with store.write_lock():
        assert embed_messages(store, embedder) == 0
    assert store.db.execute(count).fetchone()[0] == len(shas) - 1
    manifest = store.read_manifest()
    manifest["dense"] = {**manifest["dense"], "model_id": "another-model"}
    store.write_manifest(manifest)
    with store.write_lock():
        restamp(store, embedder)
    assert store.db.execute(count).fetchone()[0] == 0
    engine.close()


def test_grown_merges_new_rows_where_a_sorted_read_puts_them() -> None:
    old_keys, new_keys = ["b", "d", "f"], ["a", "c", "e", "g"]
    old = Directions(np.array([[2, 0], [4, 0], [6, 0]], dtype=np.int8))
    new = np.array([[1, 0], [3, 0], [5, 0], [7, 0]], dtype=np.int8)
    keys, merged = grown(old_keys, old, new_keys, new)
    assert (
        keys == list("abcdefg") and merged.rows.dtype == np.int8 and merged.rows[:, 0].tolist() == [1, 2, 3, 4, 5, 6, 7]
    )
    np.testing.assert_array_equal(merged.inverse_norms, Directions(merged.rows).inverse_norms)  # carried, not redone
    keys, merged = grown(old_keys, old, ["c"], np.array([[0.5, 0.25]], dtype=np.float32))  # a float16-era row
    assert keys == ["b", "c", "d", "f"] and merged.rows.dtype == np.float32 and merged.rows[1].tolist() == [0.5, 0.25]
    np.testing.assert_allclose(merged.inverse_norms, Directions(merged.rows).inverse_norms)
    assert grown(old_keys, old, [], np.zeros((0, 2), dtype=np.int8)) == (old_keys, old)


def test_rows_added_by_the_dense_phase_are_read_alone_and_merged_as_a_whole_read_would(
    tmp_path, embedder, monkeypatch
) -> None:
    """While the dense phase adds message vectors (a batch every second or so on a long history), a search reads
    only the new rows and merges them in sha order: the lane's matrix is the one a whole read gives. Rows deleted
    (a purge) or replaced are read whole again."""
    repo, shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    store, lane = engine.store, engine.messages
    reads: list[int] = []
    real = message_vectors.read_directions

    def counted(db, dim, after=0):
        reads.append(after)
        return real(db, dim, after)

    monkeypatch.setattr(message_vectors, "read_directions", counted)

    def whole() -> tuple[list[str], np.ndarray]:
        found, rows = real(store.db, 384)
        return found, rows

    def held() -> tuple[list[str], np.ndarray]:
        found, vectors = lane._message_matrix(384)
        return found, vectors.rows

    first = held()
    assert reads == [0] and first[0] == sorted(shas.values())
    for i, subject in enumerate(["Cache parsed templates between renders", "Add a retry budget to the HTTP client"]):
        repo.commit(subject, {f"extra/m{i}.py": f"def f{i}():\n    return {i}\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=False))
    with store.write_lock():
        assert embed_messages(store, embedder) == 2
    before_max = store.db.execute("SELECT MAX(rowid) FROM message_vectors").fetchone()[0] - 2
    reads.clear()
    grown_shas, grown_rows = held()
    assert reads == [before_max]  # only the rows after the ones held
    want_shas, want_rows = whole()
    assert grown_shas == want_shas and len(want_shas) == len(shas) + 2
    np.testing.assert_array_equal(grown_rows, want_rows)
    assert engine.search(QUERY)["results"][0]["commit"]["sha"] == shas["wanted"]
    with store.transaction() as tx:  # a purge deletes rows: read whole again
        tx.execute("DELETE FROM message_vectors WHERE sha=?", (shas["docs"],))
    reads.clear()
    assert held()[0] == whole()[0] and reads[-1] == 0 and shas["docs"] not in held()[0]
    engine.close()


def test_the_held_vectors_are_always_those_a_whole_read_gives(tmp_path, embedder, monkeypatch) -> None:
    """Through the real writers: SQLite hands a deleted top row's rowid out again (an amended commit's vector
    takes its predecessor's), a table cleared and refilled past its old size, a row replaced, rows re-encoded in
    place, a batch committed between the version and the rows read: after each, the lane holds what a whole
    read gives, each sha once."""
    repo, _shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    store, lane = engine.store, engine.messages
    db = store.db
    other = sqlite3.connect(store.db_path, isolation_level=None)  # another writer, as the indexer is

    def check() -> None:
        held, vectors = lane._message_matrix(384)
        want, rows = message_vectors.read_directions(db, 384)
        assert held == want and len(set(held)) == len(held)
        np.testing.assert_array_equal(vectors.rows, rows)
        np.testing.assert_array_equal(vectors.inverse_norms, Directions(rows).inverse_norms)

    def vec(seed: int) -> bytes:
        return message_vectors.encode(np.random.default_rng(seed).normal(size=384).astype(np.float32))

    check()
    top = db.execute("SELECT sha FROM message_vectors ORDER BY rowid DESC LIMIT 1").fetchone()[0]
    with store.transaction() as tx:  # the amend: the top commit purged, its successor's vector stored
        tx.execute("UPDATE commits SET state='pending' WHERE sha=?", (top,))
        message_vectors.purge_orphans(tx)
        message_vectors.put(tx, [("f" * 40, vec(1))])
    check()
    with store.transaction() as tx:  # the top row deleted, two added: the count grows by one
        tx.execute("UPDATE commits SET state='pending' WHERE sha=?", ("f" * 40,))
        message_vectors.purge_orphans(tx)
        message_vectors.put(tx, [("e" * 40, vec(2)), ("d" * 40, vec(3))])
    check()
    with store.transaction() as tx:  # a row replaced
        message_vectors.put(tx, [("e" * 40, vec(4))])
    check()
    with store.transaction() as tx:  # cleared (a new model) and refilled past its old size
        message_vectors.clear(tx)
        message_vectors.put(tx, [(f"{i:040x}", vec(10 + i)) for i in range(12)])
    check()
    with store.transaction() as tx:  # only added: read alone
        message_vectors.put(tx, [("c" * 40, vec(30))])
    reads: list[int] = []
    real = message_vectors.read_directions
    monkeypatch.setattr(
        message_vectors, "read_directions", lambda d, n, after=0: reads.append(after) or real(d, n, after)
    )
    check()
    assert reads[0] > 0
    versions = message_vectors.version

    def racing(d):  # a batch commits right after the version is read
        found = versions(d)
        other.execute("INSERT INTO message_vectors(sha, vec) VALUES (?, ?)", ("b" * 40, vec(31)))
        return found

    monkeypatch.setattr(message_vectors, "version", racing)
    with store.transaction() as tx:
        message_vectors.put(tx, [("a" * 40, vec(32))])
    lane._message_matrix(384)
    monkeypatch.setattr(message_vectors, "version", versions)
    check()  # the row committed mid-read is read once, not twice
    engine.close()
    other.close()


def test_float16_rows_of_the_recipe_before_are_reencoded_in_place(tmp_path, embedder, monkeypatch) -> None:
    """An index whose message vectors an older version stored as float16: searches read them meanwhile, and the
    next dense run re-encodes them in place (no message embedded again) and compacts the catalogue; rows of an
    unknown recipe are dropped and embedded again."""
    repo, shas = _history(tmp_path / "r")
    engine = _index(repo, embedder, no_messages=False)
    store = engine.store
    rows = store.db.execute("SELECT sha, vec FROM message_vectors ORDER BY sha").fetchall()
    assert rows and all(len(r[1]) == 4 + 384 for r in rows)
    fresh = message_vectors.decode([bytes(r[1]) for r in rows], 384)
    older = {sha: v.astype(np.float16).tobytes() for (sha, _b), v in zip(rows, fresh, strict=True)}
    with store.transaction() as tx:
        tx.executemany("UPDATE message_vectors SET vec=? WHERE sha=?", [(b, s) for s, b in older.items()])
        store.set_state(tx, message_vectors.RECIPE_KEY, message_vectors.RECODABLE)
    engine.close()
    engine = Engine(repo.path, models=ModelConfig())
    engine.dense._embedder = embedder
    store = engine.store  # the engine reopens its catalogue connection when it first searches
    meanwhile = engine.search(QUERY)
    assert "message_dense" in meanwhile["_meta"]["lanes"] and meanwhile["results"][0]["commit"]["sha"] == shas["wanted"]
    monkeypatch.setattr(message_vectors, "RECODE_CHUNK", 2)  # several chunks, as on a long history
    keys, read = message_vectors.read_directions(store.db, 384)  # float16 rows: read as float32 vectors meanwhile
    assert keys == sorted(older) and read.dtype == np.float32
    np.testing.assert_array_equal(read, [np.frombuffer(older[k], dtype="<f2") for k in keys])
    with store.write_lock():
        assert embed_messages(store, embedder) == 0  # re-encoded, not embedded again
    after = dict(store.db.execute("SELECT sha, vec FROM message_vectors").fetchall())
    want = {s: message_vectors.encode(np.frombuffer(b, dtype="<f2").astype(np.float32)) for s, b in older.items()}
    assert after == want
    held = engine.messages._message_matrix(384)[1].rows  # the lane read the float16 rows: it reads them again
    assert held.dtype == np.int8 and (held == message_vectors.read_directions(store.db, 384)[1]).all()
    keys, read = message_vectors.read_directions(store.db, 384)  # int8 codes now, read two rows at a time
    assert keys == sorted(older) and read.dtype == np.int8
    np.testing.assert_array_equal(read, [np.frombuffer(after[k][4:], dtype=np.int8) for k in keys])
    assert store.get_state(message_vectors.RECIPE_KEY) == message_vectors.RECIPE
    assert store.get_state(COMPACT_PENDING) == "0"  # compacted
    assert engine.search(QUERY)["results"][0]["commit"]["sha"] == shas["wanted"]
    # an unknown recipe: dropped and embedded again
    with store.transaction() as tx:
        store.set_state(tx, message_vectors.RECIPE_KEY, "subject/500/f32")
    with store.write_lock():
        assert embed_messages(store, embedder) == len(shas)
    engine.close()
