"""One vector per commit message (subject + body), for the ``message_dense`` lane: a catalogue table.

Why: users ask questions in their own words, and a commit message is written in words, so a question is often
closest in meaning to the message rather than to any file of the change (the file units embed the subject with
each file's diff, where the code dominates). On the natural-question development set the message vectors alone
ranked as well as the whole file-unit dense lane (docs/ranking-natural-questions.md).

Why in the catalogue and not in a second usearch file: a row holds the vector *and* says the commit is done, so
crash safety is free (a batch's rows are one transaction; a killed run leaves whole rows or none, and the next
run embeds the rest), a purged commit's row is deleted with SQL (until then the lane may score it, but its
commit has no hunks left to show), and there is no second file to stamp, check and repair. There is one vector
per commit, not per file, so the search side reads them all (int8 codes and a scale, 388 bytes each at 384
dimensions: 0.8 MB for 2,000 commits; float16 until the seventeenth pass of docs/large-histories.md, which ranked
the same to four places) and scores them exactly, once per index state
(:class:`backstory.search.message_lane.MessageLane` caches the codes, :func:`read_directions`); a history of
100,000 commits would be 39 MB, where an HNSW file would pay.

Only an index with messages has rows; the vectors belong to the model the file units were embedded with (the
manifest's ``dense`` stamp: :func:`backstory.index.dense_build.restamp` clears this table with the units), and to
:data:`RECIPE`, kept in the catalogue's ``state`` table: a change of recipe clears the table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from .store import COMPACT_PENDING, bump_counter

DDL = "CREATE TABLE IF NOT EXISTS message_vectors (sha TEXT PRIMARY KEY, vec BLOB NOT NULL);"
RECIPE_KEY = "message_vectors_recipe"
#: The text embedded per commit: subject, a newline and the body, cut at :data:`MAX_CHARS` characters (the model
#: reads its token window of it anyway; the cut bounds the tokenizer's work on huge bodies).
RECIPE = "subject+body/2000/i8"
#: The recipe before: the same text and model, float16 rows; :func:`check_recipe` re-encodes them in place.
RECODABLE = "subject+body/2000/f16"
RECODE_CHUNK = 4096
#: A counter in ``state`` every writer bumps when it deletes or rewrites rows (not when it only adds them): with
#: the row count and largest rowid it tells a reader holding the vectors whether reading the added rows alone
#: is enough (SQLite hands a deleted top row's rowid out again, so the count and rowid alone cannot tell).
GENERATION_KEY = "message_vectors_generation"
MAX_CHARS = 2000


def ensure_tables(db: sqlite3.Connection) -> None:
    """Create the table if needed (writers only; ``executescript`` must not run inside a transaction)."""
    db.executescript(DDL)


def message_text(subject: str, body: str) -> str:
    """What is embedded for a commit: its subject and body, bounded (:data:`RECIPE`)."""
    text = f"{subject}\n{body}".strip() if body.strip() else subject.strip()
    return text[:MAX_CHARS]


def encode(vector: np.ndarray) -> bytes:
    """A row: the float32 scale (the largest coordinate / 127), then the int8 codes, 388 bytes at 384
    dimensions (float16 took 768). The lane compares directions only (cosines), which the scale leaves alone."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    scale = np.float32(max(float(np.abs(v).max(initial=0.0)), 1e-30) / 127.0)
    codes = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
    return scale.astype("<f4").tobytes() + codes.tobytes()


def decode(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """float32 ``[len(blobs), dim]`` from stored rows: :func:`encode`'s, or the float16 rows of the recipe
    before (``2 * dim`` bytes), which searches keep reading until the next dense run replaces them; a row of
    another size is a :class:`ValueError`."""
    out = np.zeros((len(blobs), dim), dtype=np.float32)
    if not blobs:
        return out
    sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    coded = np.flatnonzero(sizes == 4 + dim)
    halves = np.flatnonzero(sizes == 2 * dim) if dim != 4 else coded[:0]  # at 4 dimensions the sizes would agree
    if len(coded) + len(halves) != len(blobs):
        raise ValueError(f"message vectors are not {dim}-dimensional")
    if len(coded):
        rows = np.frombuffer(b"".join(blobs[int(i)] for i in coded), dtype=np.uint8).reshape(len(coded), 4 + dim)
        scales = np.ascontiguousarray(rows[:, :4]).view("<f4").astype(np.float32)
        out[coded] = rows[:, 4:].view(np.int8).astype(np.float32) * scales
    if len(halves):
        out[halves] = np.frombuffer(b"".join(blobs[int(i)] for i in halves), dtype="<f2").reshape(len(halves), dim)
    return out


def check_recipe(db: sqlite3.Connection) -> None:
    """Record :data:`RECIPE`: rows of :data:`RECODABLE` (float16) are re-encoded in place, in one transaction
    (git/git's 60,642 in seconds, against ~3 minutes to embed them again), rows of any other recipe (or from
    before one was recorded) dropped; either way a compaction is marked pending when there were rows."""
    row = db.execute("SELECT value FROM state WHERE key=?", (RECIPE_KEY,)).fetchone()
    if row is not None and row[0] == RECIPE:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        had_rows = db.execute("SELECT EXISTS (SELECT 1 FROM message_vectors)").fetchone()[0] == 1
        if not (row is not None and row[0] == RECODABLE and _recode_float16(db)):
            db.execute("DELETE FROM message_vectors")
        if had_rows:
            db.execute("INSERT OR REPLACE INTO state(key, value) VALUES (?, '1')", (COMPACT_PENDING,))
            bump_counter(db, GENERATION_KEY)
        db.execute("INSERT OR REPLACE INTO state(key, value) VALUES (?, ?)", (RECIPE_KEY, RECIPE))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _recode_float16(tx: sqlite3.Connection) -> bool:
    """Re-encode every float16 row in place, :data:`RECODE_CHUNK` rows at a time (inside the caller's
    transaction, so memory stays bounded on any history); False, leaving the work half done for the caller to
    drop, at a row that is not a float16 row of the first one's dimension."""
    after, dim = 0, 0
    while rows := tx.execute(
        "SELECT rowid, vec FROM message_vectors WHERE rowid > ? ORDER BY rowid LIMIT ?", (after, RECODE_CHUNK)
    ).fetchall():
        dim = dim or len(rows[0][1]) // 2
        if dim == 4 or any(len(r[1]) != 2 * dim for r in rows):  # at 4 dimensions an int8 row has the same size
            return False
        vectors = decode([bytes(r[1]) for r in rows], dim)
        tx.executemany(
            "UPDATE message_vectors SET vec=? WHERE rowid=?",
            [(encode(v), r[0]) for r, v in zip(rows, vectors, strict=True)],
        )
        after = int(rows[-1][0])
    return True


def clear(tx: sqlite3.Connection) -> None:
    """Drop every message vector (inside the caller's transaction); an index without the table has none."""
    try:
        tx.execute("DELETE FROM message_vectors")
    except sqlite3.OperationalError:
        return
    bump_counter(tx, GENERATION_KEY)


def purge_orphans(tx: sqlite3.Connection) -> int:
    """Delete the rows of commits that are no longer indexed (purged branches, rewritten history)."""
    cur = tx.execute("DELETE FROM message_vectors WHERE sha NOT IN (SELECT sha FROM commits WHERE state='indexed')")
    if cur.rowcount:
        bump_counter(tx, GENERATION_KEY)
    return int(cur.rowcount or 0)


def pending(db: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(sha, subject, body) of the indexed non-merge commits with hunks that have no vector yet, newest first."""
    return [
        (r[0], r[1], r[2])
        for r in db.execute(
            "SELECT c.sha, c.subject, c.body FROM commits c LEFT JOIN message_vectors m ON m.sha=c.sha"
            " WHERE c.state='indexed' AND c.is_merge=0 AND c.n_hunks>0 AND m.sha IS NULL"
            " ORDER BY c.author_time DESC, c.sha"
        )
    ]


def put(tx: sqlite3.Connection, rows: Iterable[tuple[str, bytes]]) -> None:
    """Store each commit's vector (inside the caller's transaction); one that replaces a stored row counts as a
    rewrite (:data:`GENERATION_KEY`)."""
    rows = list(rows)
    for i in range(0, len(rows), 500):
        shas = [sha for sha, _vec in rows[i : i + 500]]
        sql = f"SELECT EXISTS (SELECT 1 FROM message_vectors WHERE sha IN ({','.join('?' * len(shas))}))"
        if tx.execute(sql, shas).fetchone()[0]:
            bump_counter(tx, GENERATION_KEY)
            break
    tx.executemany("INSERT OR REPLACE INTO message_vectors(sha, vec) VALUES (?, ?)", rows)


def version(db: sqlite3.Connection) -> tuple[int, int, str] | None:
    """(row count, largest rowid, rewrites: :data:`GENERATION_KEY`), read in one statement: changes whenever
    rows are added, deleted or rewritten; None without the table. :func:`only_added` says whether rows were
    only added between two of them."""
    try:
        row = db.execute(
            "SELECT COUNT(*), COALESCE(MAX(rowid), 0), (SELECT value FROM state WHERE key=?) FROM message_vectors",
            (GENERATION_KEY,),
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    return int(row[0]), int(row[1]), str(row[2] or "0")


def only_added(before: tuple[int, int, str], now: tuple[int, int, str]) -> bool:
    """Whether the table of ``now`` may be the one of ``before`` with rows added after its largest rowid (no row
    deleted or rewritten since); the reader confirms it with the count of the rows it then reads."""
    return before[2] == now[2] and now[0] > before[0] and now[1] > before[1]


def read_directions(db: sqlite3.Connection, dim: int, after: int = 0) -> tuple[list[str], np.ndarray]:
    """The message vectors of the rows after rowid ``after`` (all by default) as directions: (shas sorted,
    ``[n, dim]`` rows in that order). The rows are the stored int8 codes without their scales (the lane
    compares directions only, and a scale does not turn one): 23 MB for git/git's 60,645 commits, where float32
    vectors took 93 MB of the language server's heap. While an older index still holds float16 rows (until its
    next dense run re-encodes them) the rows are float32 vectors. Read :data:`RECODE_CHUNK` rows at a time, so
    the blobs of a whole history are never in memory at once.

    Every row is read, a purged commit's too until the dense phase deletes it (:func:`purge_orphans`): what is
    read is then the table's contents alone, which :func:`version` tracks (a commit's state changing does not
    change it), and a purged commit has no hunks left for the lane to show."""
    try:
        cursor = db.execute("SELECT sha, vec FROM message_vectors WHERE rowid > ? ORDER BY sha", (after,))
    except sqlite3.OperationalError:  # an index from before message vectors
        return [], np.zeros((0, dim), dtype=np.int8)
    shas: list[str] = []
    parts: list[np.ndarray] = []
    while rows := cursor.fetchmany(RECODE_CHUNK):
        shas.extend(r[0] for r in rows)
        parts.append(_directions([bytes(r[1]) for r in rows], dim))
    return shas, _stack(parts, dim)


def _stack(parts: Sequence[np.ndarray], dim: int) -> np.ndarray:
    """:func:`read_directions`' parts as one ``[n, dim]`` array: int8 when they all are, else float32."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return np.zeros((0, dim), dtype=np.int8)
    kind = np.int8 if all(p.dtype == np.int8 for p in parts) else np.float32
    return np.concatenate([p.astype(kind, copy=False) for p in parts])


def _directions(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """:func:`read_directions`' rows of ``blobs``: the int8 codes when every row is one of :func:`encode`'s, else
    float32 vectors (:func:`decode`: float16 rows among them; a row of another size is a ValueError)."""
    if {len(b) for b in blobs} == {4 + dim}:
        rows = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), 4 + dim)
        return np.ascontiguousarray(rows[:, 4:]).view(np.int8)
    return decode(blobs, dim) if blobs else np.zeros((0, dim), dtype=np.int8)


def size_bytes(db: sqlite3.Connection) -> int:
    try:
        return int(db.execute("SELECT COALESCE(SUM(LENGTH(vec)), 0) FROM message_vectors").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
