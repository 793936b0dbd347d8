"""The ``message_dense`` lane: commits ranked by the cosine of their message's vector to the query's.

Why a lane of its own beside the file-unit lane (:mod:`.dense`): a question is often closest in meaning to a
commit's message rather than to any file of the change (:mod:`backstory.index.message_vectors`). The vectors
are one per commit and few, so they are scored exactly from their int8 codes read once per index state
(:class:`Directions`), not through an HNSW file; the model, the stamp and the query's vector come from the
:class:`~.dense.DenseLane`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np
import tantivy

from ..index import message_vectors
from ..index.text_index import filter_uids
from .dense import FILTER_SCAN_LIMIT

if TYPE_CHECKING:
    from .dense import DenseLane

#: Commits the message lane returns (best first by the cosine of their message's vector to the query's).
MESSAGE_TOP = 100
#: Hunks standing for a commit in the message lane (its first ones: every hunk has the same message).
MESSAGE_HUNKS = 3


class MessageLane:
    def __init__(self, dense: DenseLane) -> None:
        self.dense = dense
        self.store = dense.store
        self.catalog = dense.catalog
        self._messages: tuple[Any, list[str], Directions] | None = None  # (version, shas, their vectors)
        self._pending: tuple[str, Directions, Future[list[tuple[str, float]]]] | None = None  # see begin()

    def reset(self) -> None:
        """Forget the message matrix (after a rebuild)."""
        self._messages = None
        self._pending = None

    def begin(self, query: str) -> None:
        """Start the query's message cosines (an unfiltered search's) beside the keyword lanes, right after its
        forward pass (:meth:`.DenseLane.begin_pass`) on the same thread: numpy releases the GIL, and the cosines
        with git/git's 60,642 messages are ~3-5 ms. The matrix is read here, on the caller's thread (SQLite);
        :meth:`rank` takes the result only for the same query and matrix, so nothing changes but the wait."""
        self._pending = None
        emb = self.dense.embedder()
        forward = self.dense.pending_pass(emb.model_id, query) if emb is not None else None
        stamp = self.dense.stamp()
        if forward is None or not stamp:
            return
        shas, vectors = self._message_matrix(int(stamp["dim"]))
        if shas:
            work = self.dense.after_pass(lambda: top_by_cosine(forward.result()[0], shas, vectors, MESSAGE_TOP))
            if work is not None:
                self._pending = (query, vectors, work)

    def forget(self) -> None:
        """Drop cosines started for a search that no lane took (it failed or stopped first)."""
        self._pending = None

    def _top(self, query: str, qv: np.ndarray, shas: list[str], vectors: Directions) -> list[tuple[str, float]]:
        """:func:`top_by_cosine` of an unfiltered search: :meth:`begin`'s when it ran for this query and matrix
        (and did not fail: then they are computed here, as they would have been)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == query and pending[1] is vectors and pending[2].exception() is None:
            started: list[tuple[str, float]] = pending[2].result()
            return started
        return top_by_cosine(qv, shas, vectors, MESSAGE_TOP)

    def rank(
        self, query: str, searcher: tantivy.Searcher | None, filters: tantivy.Query | None
    ) -> tuple[list[tuple[int, float]] | None, dict[str, float] | None]:
        """The ``message_dense`` lane: commits by the cosine of their message's vector (subject + body,
        :mod:`backstory.index.message_vectors`) to the query's, as (hunk uid, cosine) — each commit's first
        :data:`MESSAGE_HUNKS` hunks (those the filters let through, with filters) — and the commit scores.
        (None, None) when there are no message vectors (a message-blind index, or the dense phase has not
        made them yet) or the dense lane is off; the dense lane's warning covers a missing model.

        The query's vector is the one :meth:`.DenseLane.rank` computed for this query (no second forward pass).
        """
        stamp = self.dense.stamp()
        if not stamp or self.dense.problem() is not None:
            return None, None
        emb = self.dense.embedder()
        if emb is None or stamp.get("model_id") != emb.model_id:
            return None, None
        shas, vectors = self._message_matrix(int(stamp["dim"]))
        if not shas:
            return None, None
        cached = self.dense.last_pass(emb.model_id, query)
        qv = cached[0] if cached is not None else emb.embed_query(query)
        allowed: dict[str, list[int]] | None = None
        if filters is not None and searcher is not None:
            allowed = {}
            uids = filter_uids(searcher, filters, FILTER_SCAN_LIMIT)
            for uid, row in sorted(self.catalog.hunk_places(uids).items()):
                allowed.setdefault(row["sha"], []).append(uid)
        if allowed is None:
            top = self._top(query, qv, shas, vectors)
        else:
            top = top_by_cosine(qv, shas, vectors, MESSAGE_TOP, set(allowed))
        if allowed is not None:
            hunks_of = {sha: allowed[sha][:MESSAGE_HUNKS] for sha, _s in top}
        else:
            hunks_of = self.catalog.first_hunks_of([sha for sha, _s in top], MESSAGE_HUNKS)
        return commit_hunks(top, hunks_of), dict(top)

    def _message_matrix(self, dim: int) -> tuple[list[str], Directions]:
        """Every indexed commit's message vector (:class:`Directions`), read once per state of the table
        (:func:`message_vectors.version`). The table is only looked at when the catalogue changed (SQLite's data
        version): its count reads 60,000 rows on git/git (9 ms a search), while indexing batches that leave it
        alone must not re-read the matrix either. While the dense phase only adds rows (a batch every second or
        so), only the new rows are read and merged in (:func:`grown`): reading git/git's whole table took
        160-230 ms. The version and the rows are read in one snapshot, so they agree."""
        db_version = self.store.data_version()
        cached = self._messages
        if cached is not None and cached[0][0] == db_version:
            return cached[1], cached[2]
        with self.store.read_snapshot() as db:
            version = message_vectors.version(db)
            if version is None:
                return [], Directions(np.zeros((0, dim), dtype=np.int8))
            if cached is None or cached[0][1] != version:
                old = cached
                cached = self._messages = self._pending = None  # the old vectors go before the new are read
                merged = None
                if old is not None and old[2].rows.dtype == np.int8 and message_vectors.only_added(old[0][1], version):
                    new_shas, new_rows = message_vectors.read_directions(db, dim, after=old[0][1][1])
                    if version[0] == old[0][1][0] + len(new_shas) and new_rows.dtype == np.int8:
                        merged = grown(old[1], old[2], new_shas, new_rows)
                del old
                if merged is None:
                    shas, rows = message_vectors.read_directions(db, dim)
                    merged = shas, Directions(rows)
                cached = ((db_version, version), *merged)
        self._messages = ((db_version, version), cached[1], cached[2])
        return cached[1], cached[2]


def grown(shas: list[str], held: Directions, new_shas: list[str], new_rows: np.ndarray) -> tuple[list[str], Directions]:
    """``shas``/``held`` (sorted by sha) with the added ones (sorted too) merged in, in the order a whole read
    gives: the layout, and so every float the cosines round, does not depend on when a server read the table.
    Each new row goes in by bisection, its inverse length beside it (git/git: 256 rows into 60,645 in a few
    milliseconds; only the new rows' lengths are computed)."""
    if not new_shas:
        return shas, held
    added = Directions(new_rows)
    kind = np.int8 if held.rows.dtype == new_rows.dtype == np.int8 else np.float32
    at = [bisect.bisect_left(shas, key) for key in new_shas]
    merged: list[str] = []
    start = 0
    for position, key in zip(at, new_shas, strict=True):
        merged += shas[start:position]
        merged.append(key)
        start = position
    merged += shas[start:]
    rows = np.insert(held.rows.astype(kind, copy=False), at, new_rows.astype(kind, copy=False), axis=0)
    return merged, Directions(rows, np.insert(held.inverse_norms, at, added.inverse_norms))


class Directions:
    """Vectors held for their directions: ``rows`` (``[n, dim]``, int8 codes or float32) and each row's inverse
    length, so a query's cosines are the rows times the query, scaled. Why not float32 unit vectors: on git/git
    they were 93 MB of the language server's heap for 60,645 commits, the codes are 23 MB; the codes are widened
    to float32 :data:`CHUNK` rows at a time (the top 100 in 2.5 ms a query there, against 1.9 ms from float32
    columns)."""

    CHUNK = 2048

    def __init__(self, rows: np.ndarray, inverse_norms: np.ndarray | None = None) -> None:
        """``inverse_norms``: the rows' inverse lengths when known (:func:`grown`), else computed here."""
        self.rows = rows
        if inverse_norms is None:
            norms = np.zeros(len(rows), dtype=np.float32)
            for i, chunk in self._chunks():
                norms[i : i + len(chunk)] = np.linalg.norm(chunk, axis=1)
            inverse_norms = np.where(norms > 0, 1.0 / np.maximum(norms, 1e-30), 0.0).astype(np.float32)
        self.inverse_norms = inverse_norms

    def _chunks(self, rows: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float32 rows) of ``rows`` (default all), :data:`CHUNK` rows at a time."""
        rows = self.rows if rows is None else rows
        for i in range(0, len(rows), self.CHUNK):
            yield i, rows[i : i + self.CHUNK].astype(np.float32)

    def cosines(self, unit_query: np.ndarray, subset: np.ndarray | None = None) -> np.ndarray:
        """float32 cosines of ``unit_query`` (unit length) with every row, or with the rows ``subset`` lists."""
        rows = self.rows if subset is None else self.rows[subset]
        out = np.empty(len(rows), dtype=np.float32)
        for i, chunk in self._chunks(rows):
            np.dot(chunk, unit_query, out=out[i : i + len(chunk)])
        return out * (self.inverse_norms if subset is None else self.inverse_norms[subset])


def top_by_cosine(
    query: np.ndarray, keys: list[str], vectors: Directions, count: int, allowed: set[str] | None = None
) -> list[tuple[str, float]]:
    """The ``count`` keys whose vectors are nearest ``query`` by cosine, best first, as (key, cosine rounded to 6
    places); ties by key, so the order is deterministic. ``allowed`` limits the keys. Vectorised: only the best
    ``count`` (and keys tied with the last) reach Python, so git/git's 60,642 messages cost ~3 ms."""
    if not keys or count <= 0:
        return []
    rows = np.arange(len(keys)) if allowed is None else np.flatnonzero([k in allowed for k in keys])
    if not len(rows):
        return []
    q = (query / max(float(np.linalg.norm(query)), 1e-12)).astype(np.float32)
    sims = np.round(vectors.cosines(q, None if allowed is None else rows), 6)
    if len(sims) > count:  # the best ``count`` and every row tied with the last of them
        floor = np.partition(sims, len(sims) - count)[len(sims) - count]
        kept = np.flatnonzero(sims >= floor)
    else:
        kept = np.arange(len(sims))
    scored = [(keys[int(rows[i])], float(sims[i])) for i in kept.tolist()]
    scored.sort(key=lambda t: (-t[1], t[0]))
    return scored[:count]


def commit_hunks(ranked: list[tuple[str, float]], hunks_of: dict[str, list[int]]) -> list[tuple[int, float]]:
    """A commit-level ranking as a lane's hunk ranking: each commit's hunks (``hunks_of``) with its score, in
    the commits' order; commits without hunks are left out."""
    return [(uid, score) for sha, score in ranked for uid in hunks_of.get(sha, [])]
