"""Stored token states of (commit, file) units, for the MaxSim rerank: two catalogue tables.

``unit_states`` holds one row per embedded unit (``fid``) with its compressed content-token states
(:mod:`backstory.models.states`); ``state_codec`` holds the one codec (PCA basis) they are encoded with.
They live in the SQLite catalogue, not in a file beside ``vectors.usearch``, because that makes crash safety
free: the dense phase writes a batch's states rows (and, the first time, the codec) in the *same* transaction
that marks the batch's units ``embedded=1``, after the vectors file was saved. So a unit the catalogue calls
embedded has its vector on disk and, once a codec exists, its states in the catalogue; a run killed before
that transaction leaves neither claimed, and the next run redoes the batch.

Readers never need these rows: a unit without states is scored from a fresh forward pass of the same text,
encoded with the same codec, so the rerank gives the same scores either way (only slower). So a row that
cannot be read back (damaged) is logged and treated as absent, not a failed search.

A row is the codec's bytes compressed with zstd (:func:`pack`), losslessly: most int4 codes are small, so their
entropy is well under 4 bits (git/git: 413.5 MB of codec bytes stored in 213.2 MB at the current step, 0.52;
319.2 MB, 0.77, at the -7..7 step before; ~9 us a unit to compress and ~5 us to read back; higher levels gained
< 0.3 % and a trained dictionary 1.4 %: there is no repetition to find, only the codes' skew). Rows an older
version wrote raw stay readable: a raw row starts with its first token's float16 scale, which is never
negative, and the zstd magic's second byte would make it negative.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence

import zstandard as zstd

from ..models.states import StateCodec
from .packing import ZSTD_MAGIC
from .store import Store, StoreError

log = logging.getLogger(__name__)

#: rows re-encoded per transaction by :func:`requantize`
REQUANTIZE_BATCH = 4096
#: zstd's level: what it finds in a unit's codes is their skew, not repetition, so level 1 is as small as 19
LEVEL = 1
#: the most a unit's states can be (a 128-token window at far more than 98 bytes a token): a damaged frame header
#: claiming more is refused before anything is allocated for it
MAX_BYTES = 1 << 20
_local = threading.local()  # per thread: a zstd context is not thread-safe
_warned: set[int] = set()  # damaged rows already logged: a search meeting one again says nothing new

#: rows in the order they are written, found by ``fid`` through its index: keyed by ``fid`` itself (schema 14),
#: the rows went in in the dense phase's order (newest author time first), not in ``fid`` order, and each
#: out-of-order insert split a page in two: git/git's 413.5 MB of states took 550 MB (134 MB of pages unused)
DDL = """
CREATE TABLE IF NOT EXISTS unit_states (id INTEGER PRIMARY KEY, fid INTEGER NOT NULL UNIQUE, states BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS state_codec (
  id INTEGER PRIMARY KEY CHECK (id = 1), recipe TEXT NOT NULL, codec BLOB NOT NULL
);
"""


def ensure_tables(db: sqlite3.Connection) -> None:
    """Create the tables if needed (writers only; ``executescript`` must not run inside a transaction)."""
    db.executescript(DDL)


def load_codec(db: sqlite3.Connection, recipe: str) -> StateCodec | None:
    """The index's codec if it was made for ``recipe``; None before the first one is fitted (or in an
    index from before stored states, which has no table). A damaged one is a :class:`StoreError`."""
    try:
        row = db.execute("SELECT recipe, codec FROM state_codec WHERE id=1").fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None or row[0] != recipe:
        return None
    try:
        return StateCodec.from_bytes(bytes(row[1]))
    except ValueError as e:
        msg = f"the token-state codec in the catalogue is damaged ({e}); run `backstory index --rebuild`"
        raise StoreError(msg) from None


def codec_recipe(db: sqlite3.Connection) -> str | None:
    """The recipe the stored codec was made for; None without one."""
    try:
        row = db.execute("SELECT recipe FROM state_codec WHERE id=1").fetchone()
    except sqlite3.OperationalError:
        return None
    return None if row is None else str(row[0])


def save_codec(tx: sqlite3.Connection, recipe: str, codec: StateCodec) -> None:
    tx.execute("INSERT OR REPLACE INTO state_codec(id, recipe, codec) VALUES (1, ?, ?)", (recipe, codec.to_bytes()))


def pack(states: bytes) -> bytes:
    """A unit's encoded states as stored: a checksummed zstd frame."""
    compressor: zstd.ZstdCompressor | None = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = _local.compressor = zstd.ZstdCompressor(level=LEVEL, write_checksum=True)
    return compressor.compress(states)


def unpack(stored: bytes) -> bytes:
    """The codec's bytes of a stored row (raw rows, from before compression, pass through); ``ValueError`` when
    the frame is damaged."""
    if stored[:4] != ZSTD_MAGIC:
        return stored
    decompressor: zstd.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstd.ZstdDecompressor()
    try:
        size = zstd.get_frame_parameters(stored).content_size
        if size > MAX_BYTES:  # also zstd's "unknown" (2**64 - 1): this module always writes the size
            raise ValueError(f"its frame claims {size} bytes")
        return bytes(decompressor.decompress(stored))
    except (zstd.ZstdError, MemoryError) as e:
        raise ValueError(f"stored token states cannot be decompressed ({e})") from None


def put(tx: sqlite3.Connection, rows: Iterable[tuple[int, bytes]]) -> None:
    """Store each unit's encoded states (``(fid, codec bytes)``), compressed."""
    tx.executemany("INSERT OR REPLACE INTO unit_states(fid, states) VALUES (?, ?)", [(f, pack(b)) for f, b in rows])


def has_rows(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT EXISTS (SELECT 1 FROM unit_states)").fetchone()[0] == 1


def requantize(store: Store, codec: StateCodec) -> tuple[int, int]:
    """Every stored row encoded again at the codec's current step (:meth:`StateCodec.requantize`), in place, a
    transaction per :data:`REQUANTIZE_BATCH` rows: (rows rewritten, rows left as they were because they are
    damaged; reads keep leaving those out). Idempotent, so a run killed halfway is finished by the next one."""
    done = damaged = 0
    after = 0
    while True:
        rows = store.db.execute(
            "SELECT id, states FROM unit_states WHERE id > ? ORDER BY id LIMIT ?", (after, REQUANTIZE_BATCH)
        ).fetchall()
        if not rows:
            return done, damaged
        changed: list[tuple[bytes, int]] = []
        for row_id, blob in rows:
            try:
                changed.append((pack(codec.requantize(unpack(bytes(blob)))), int(row_id)))
            except ValueError:
                damaged += 1
        with store.transaction() as tx:
            tx.executemany("UPDATE unit_states SET states=? WHERE id=?", changed)
        done += len(changed)
        after = int(rows[-1][0])


def remove(tx: sqlite3.Connection, fids: Sequence[int]) -> None:
    tx.executemany("DELETE FROM unit_states WHERE fid=?", [(f,) for f in fids])


def get(db: sqlite3.Connection, fids: Sequence[int], width: int | None = None) -> dict[int, bytes]:
    """Stored states (the codec's bytes) of the embedded units among ``fids``; others are absent, and so is a
    damaged row (logged once): one that does not decompress, or, given the codec's bytes a token (``width``),
    whose length is not a whole number of tokens. The rerank runs the model for it, as for a unit not embedded
    yet, and scores it the same."""
    if not fids:
        return {}
    marks = ",".join("?" * len(fids))
    try:
        # `+embedded`: look units up by fid; on `embedded` SQLite walked every embedded unit through files_embed
        # and probed each (22 ms for 50 units on git/git; 0.5 ms by fid)
        rows = db.execute(
            f"SELECT s.fid, s.states FROM unit_states s JOIN files f ON f.fid=s.fid"
            f" WHERE s.fid IN ({marks}) AND +f.embedded=1",
            list(fids),
        ).fetchall()
    except sqlite3.OperationalError:  # an index from before stored states
        return {}
    out: dict[int, bytes] = {}
    for fid, blob in rows:
        try:
            states = unpack(bytes(blob))
            if width and len(states) % width:
                raise ValueError(f"{len(states)} bytes are not a whole number of {width}-byte tokens")
        except ValueError as e:
            if fid not in _warned and len(_warned) < 10_000:
                _warned.add(fid)
                log.warning(
                    "unit %d's stored token states are damaged (%s); the rerank runs the model for it"
                    " (`backstory index --rebuild` stores them again)", fid, e,
                )  # fmt: skip
            continue
        out[int(fid)] = states
    return out


def size_bytes(db: sqlite3.Connection) -> int:
    """Bytes of stored states as stored (compressed; payload only), for status and benchmarks."""
    try:
        return int(db.execute("SELECT COALESCE(SUM(LENGTH(states)), 0) FROM unit_states").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
