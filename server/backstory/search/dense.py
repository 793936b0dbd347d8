"""The dense lane and the second-stage reranker, both on the bundled bi-encoder (or user-provided models).

Everything model-related degrades instead of failing: a missing or corrupt model, or vectors stamped with a
different model, turns the dense lane off with a warning in ``_meta`` while the keyword lanes keep answering.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import tantivy

from ..index import message_vectors, vectors
from ..index.catalog import Catalog
from ..index.integrity import REINDEX
from ..index.store import Store
from ..index.text_index import filter_uids
from ..models.passages import RECIPE, file_passage
from ..models.states import STATES_RECIPE

if TYPE_CHECKING:
    from ..models.rerank import MaxSimReranker
    from .fusion import FusedCommit
    from .options import ModelConfig

DENSE_TOP = 100
#: Commits the message lane returns (best first by the cosine of their message's vector to the query's).
MESSAGE_TOP = 100
#: Hunks standing for a commit in the message lane (its first ones: every hunk has the same message).
MESSAGE_HUNKS = 3
FILTER_SCAN_LIMIT = 200_000
#: Units (files) of a candidate commit the MaxSim rerank reads: those of its best hunks, best first; the
#: commit scores its best unit's MaxSim. One unit matched the base rerank's quality on Flask (the best of 3:
#: +0.004 MRR@10, within noise); see docs/benchmarks.md ("Rerank from stored token states").
RERANK_UNITS = 1


class DenseLane:
    def __init__(self, store: Store, config: ModelConfig) -> None:
        self.store = store
        self.catalog = Catalog.of(store)
        self.config = config
        self._embedder: Any = None
        self._embedder_error: str | None = None
        self._reranker: Any = None
        self._reranker_error: str | None = None
        self._index: Any = None
        self._index_mtime: float | None = None
        self._centroids_of: dict[str, np.ndarray] = {}  # commit -> unit centroid, valid for the loaded vectors
        self._lock = threading.Lock()
        self._rr_lock = threading.Lock()
        self._query_states: tuple[str, str, Any] | None = None  # (model id, query, token states) of the last rank()
        self._query_vector: tuple[str, str, Any] | None = None  # (model id, query, vector) of the last rank()
        self._messages: tuple[Any, list[str], np.ndarray] | None = None  # (version, shas, unit columns)
        self._trusted: set[Any] = set()  # vector files (size, mtime) verified by CRC in this process
        self._problem: tuple[Any, str | None] | None = None  # (catalogue state, vector file stat) -> problem()

    # -- models -----------------------------------------------------------------------------------------------

    def embedder(self) -> Any:
        """The shared embedder, or None with ``_embedder_error`` set (never raises)."""
        with self._lock:
            if self._embedder is None and self._embedder_error is None:
                try:
                    from ..models import Embedder, resolve_model

                    self._embedder = Embedder(resolve_model(self.config.model_path))
                    self._embedder.embed_query("warm up")
                except Exception as e:  # ModelUnavailable and anything onnxruntime throws
                    self._embedder_error = f"embedding model unavailable: {e}"
            return self._embedder

    def reranker(self) -> Any:
        with self._rr_lock:
            if self._reranker is None and self._reranker_error is None:
                kind = self.config.reranker
                try:
                    from pathlib import Path

                    from ..models import load_reranker

                    emb = self.embedder() if kind == "maxsim" else None
                    if kind == "maxsim" and emb is None:
                        raise RuntimeError(self._embedder_error or "no embedder")
                    ce = Path(self.config.cross_encoder_dir) if self.config.cross_encoder_dir else None
                    self._reranker = load_reranker(kind, emb, ce)
                except Exception as e:
                    self._reranker_error = f"reranker unavailable: {e}"
            return self._reranker

    def reset(self) -> None:
        """Forget the open vector index (after a rebuild); models stay loaded."""
        self._index = None
        self._index_mtime = None
        self._centroids_of = {}
        self._messages = None
        self._problem = None

    # -- vectors ----------------------------------------------------------------------------------------------

    def stamp(self) -> dict[str, Any] | None:
        try:
            return self.store.read_manifest().get("dense")
        except Exception:
            return None

    def problem(self) -> str | None:
        """Why the vector file cannot serve the units the catalogue says it holds (missing, damaged), or None.
        Checked again only when the catalogue or the file changed (a ``stat`` and SQLite's data version): the
        check counts the embedded units, 10 ms on git/git's 136,013, twice per search otherwise. A copied file
        is read (CRC) once per process."""
        path = self.store.vectors_path
        key = (self.store.data_version(), self.store.vectors_stat())
        if self._problem is None or self._problem[0] != key:
            found = self.catalog.vectors_problem(path, self._trusted)
            self._problem = (key, None if found is None else str(found))
        return self._problem[1]

    def coverage(self) -> float:
        """Share of file units the dense lane can search: 0 while the vector file is missing or damaged."""
        return 0.0 if self.problem() is not None else self.catalog.dense_coverage()

    def _vector_index(self, dim: int) -> Any:
        path = self.store.vectors_path
        mtime = path.stat().st_mtime if path.exists() else None
        if self._index is None or mtime != self._index_mtime:
            self._index = vectors.load(path, dim, view=True)
            self._index_mtime = mtime
            self._centroids_of = {}
        return self._index

    def rank(
        self,
        query: str,
        searcher: tantivy.Searcher | None,
        filters: tantivy.Query | None,
        commits: str = "centroid",
    ) -> tuple[list[tuple[int, float]] | None, dict[str, float] | None, str | None]:
        """(hunk uid, its file's cosine similarity) best first, the commit scores, and a warning; (None, None,
        warning) when the lane is off.

        ``commits`` "centroid" scores each commit that has one of the top files by the cosine of its centroid
        (all its embedded files, see :func:`commit_centroids`); "best-file" returns None and the fusion takes
        each commit's best file (the previous behaviour).
        """
        stamp = self.stamp()
        if not stamp:
            return None, None, None
        problem = self.problem()
        if problem is not None:
            return None, None, f"dense lane off: {problem}"
        if not self.store.vectors_path.exists():
            return None, None, None  # nothing embedded yet
        emb = self.embedder()
        if emb is None:
            return None, None, f"dense lane off: {self._embedder_error}"
        if stamp.get("model_id") != emb.model_id or stamp.get("recipe") != RECIPE:
            return (
                None,
                None,
                (
                    f"dense lane off: vectors were built with {stamp.get('model_id')} / {stamp.get('recipe')}, "
                    f"the current model is {emb.model_id} / {RECIPE}; `backstory index` embeds them again"
                ),
            )
        try:
            index = self._vector_index(int(stamp["dim"]))
        except Exception as e:
            return None, None, f"dense lane off: the vector file is unreadable ({e}); {REINDEX}"
        qv, states = emb.embed_query_with_states(query)
        self._query_states = (emb.model_id, query, states)  # the rerank of this search reuses the pass
        self._query_vector = (emb.model_id, query, qv)  # and so does the message lane
        if filters is not None and searcher is not None:
            uids = filter_uids(searcher, filters, FILTER_SCAN_LIMIT)
            fids = sorted({r["fid"] for r in self.catalog.hunk_places(uids).values()})
            hits = vectors.exact_search(index, fids, qv, DENSE_TOP)
        else:
            hits = vectors.search(index, qv, DENSE_TOP)
        fids = [fid for fid, _sim in hits]
        sim_of = dict(hits)
        by_fid = self.catalog.hunks_of_units(fids)
        hits_out = [(u, sim_of[fid]) for fid in fids for u in by_fid.get(fid, [])]
        commit_scores = self._centroids(index, qv, fids) if commits == "centroid" and fids else None
        return hits_out, commit_scores, None

    def _centroids(self, index: Any, qv: Any, fids: list[int]) -> dict[str, float]:
        """Centroid cosine of every commit owning one of ``fids``, over all of its embedded files.

        Centroids do not depend on the query, so they are cached until the vector file changes; a cold one
        costs a catalogue lookup and a vector fetch per file of the commit.
        """
        ordered = sorted(self.catalog.commits_of_units(fids))
        missing = [sha for sha in ordered if sha not in self._centroids_of]
        files_of: dict[str, list[int]] = {}
        units = self.catalog.embedded_units_of(missing)
        present = index.contains(np.asarray([fid for _sha, fid in units], dtype=np.uint64)) if units else []
        for (sha, fid), here in zip(units, present, strict=True):
            if here:
                files_of.setdefault(sha, []).append(fid)
        keys = [fid for sha in missing for fid in files_of.get(sha, [])]
        if keys:
            mat = np.asarray(index.get(np.asarray(keys, dtype=np.uint64)), dtype=np.float32)
            row_of = {fid: i for i, fid in enumerate(keys)}
            self._centroids_of.update(
                commit_centroids({sha: [row_of[f] for f in fs] for sha, fs in files_of.items()}, mat)
            )
        return score_centroids(qv, {sha: self._centroids_of[sha] for sha in ordered if sha in self._centroids_of})

    def rank_messages(
        self, query: str, searcher: tantivy.Searcher | None, filters: tantivy.Query | None
    ) -> tuple[list[tuple[int, float]] | None, dict[str, float] | None]:
        """The ``message_dense`` lane: commits by the cosine of their message's vector (subject + body,
        :mod:`backstory.index.message_vectors`) to the query's, as (hunk uid, cosine) — each commit's first
        :data:`MESSAGE_HUNKS` hunks (those the filters let through, with filters) — and the commit scores.
        (None, None) when there are no message vectors (a message-blind index, or the dense phase has not
        made them yet) or the dense lane is off; the dense lane's warning covers a missing model.

        The query's vector is the one :meth:`rank` computed for this query (no second forward pass).
        """
        stamp = self.stamp()
        if not stamp or self.problem() is not None:
            return None, None
        emb = self.embedder()
        if emb is None or stamp.get("model_id") != emb.model_id:
            return None, None
        shas, columns = self._message_matrix(int(stamp["dim"]))
        if not shas:
            return None, None
        cached = self._query_vector
        qv = cached[2] if cached is not None and cached[:2] == (emb.model_id, query) else emb.embed_query(query)
        allowed: dict[str, list[int]] | None = None
        if filters is not None and searcher is not None:
            allowed = {}
            uids = filter_uids(searcher, filters, FILTER_SCAN_LIMIT)
            for uid, row in sorted(self.catalog.hunk_places(uids).items()):
                allowed.setdefault(row["sha"], []).append(uid)
        top = top_by_cosine(qv, shas, columns, MESSAGE_TOP, None if allowed is None else set(allowed))
        if allowed is not None:
            hunks_of = {sha: allowed[sha][:MESSAGE_HUNKS] for sha, _s in top}
        else:
            hunks_of = self.catalog.first_hunks_of([sha for sha, _s in top], MESSAGE_HUNKS)
        return commit_hunks(top, hunks_of), dict(top)

    def _message_matrix(self, dim: int) -> tuple[list[str], np.ndarray]:
        """Every indexed commit's message vector (as :func:`unit_columns`), read once per state of the table (its
        row count and largest rowid). The table is only looked at when the catalogue changed (SQLite's data
        version): its count reads 60,000 rows on git/git (9 ms a search), while indexing batches that leave it
        alone must not re-read the matrix either."""
        db_version = self.store.data_version()
        cached = self._messages
        if cached is not None and cached[0][0] == db_version:
            return cached[1], cached[2]
        version = message_vectors.version(self.store.db)
        if version is None:
            return [], np.zeros((dim, 0), dtype=np.float32)
        if cached is None or cached[0][1] != version:
            shas, matrix = message_vectors.read_all(self.store.db, dim)
            cached = ((db_version, version), shas, unit_columns(matrix))
        self._messages = ((db_version, version), cached[1], cached[2])
        return cached[1], cached[2]

    # -- rerank -----------------------------------------------------------------------------------------------

    def rerank(
        self, query: str, top: list[FusedCommit], commits: dict[str, Any], no_messages: bool
    ) -> tuple[dict[str, float], str | None, str | None]:
        if self.config.reranker == "none":
            return {}, None, None
        rr = self.reranker()
        if rr is None:
            return {}, None, self._reranker_error
        uids = [u for c in top for u in c.hunks]
        if rr.name == "maxsim" and hasattr(rr, "score_states"):
            return self._rerank_units(query, top, self.catalog.hunk_places(uids), rr, no_messages), rr.name, None
        rows = self.catalog.hunk_rows(uids)
        scores = rr.score(query, commit_passages(top, rows, commits, no_messages))
        return {c.sha: float(s) for c, s in zip(top, scores, strict=True)}, rr.name, None

    def _rerank_units(
        self, query: str, top: list[FusedCommit], rows: dict[int, Any], rr: MaxSimReranker, no_messages: bool
    ) -> dict[str, float]:
        """MaxSim of each candidate commit against its best hunks' units (the dense recipe's text), read from
        the stored token states; units without stored states (the dense phase has not reached them, or the
        index predates stored states) are run through the model now and encoded with the same codec, so
        they score exactly as if they had been stored."""
        units = {c.sha: list(dict.fromkeys(rows[u]["fid"] for u in c.hunks if u in rows))[:RERANK_UNITS] for c in top}
        fids = sorted({f for fs in units.values() for f in fs})
        emb = rr.embedder
        stamp = self.stamp() or {}
        stored = stamp.get("states") == STATES_RECIPE and stamp.get("model_id") == emb.model_id
        codec = self.catalog.state_codec(STATES_RECIPE) if stored else None
        blobs = self.catalog.unit_states(fids) if codec is not None else {}
        missing = [f for f in fids if f not in blobs]
        fresh = emb.token_states(self.catalog.unit_passages(missing, no_messages), content_only=True) if missing else []
        states: dict[int, np.ndarray] = dict(zip(missing, fresh, strict=True))
        cached = self._query_states
        if cached is not None and cached[:2] == (emb.model_id, query) and rr.max_tokens == emb.max_tokens:
            query_states = cached[2]
        else:
            query_states = rr.query_states(query)
        pairs = [(c.sha, f) for c in top for f in units[c.sha]]
        if codec is not None:  # fresh states go through the codec too, so they score as if they had been stored
            blobs.update((f, codec.encode(s)) for f, s in states.items())
            scores = codec.maxsim(query_states, [blobs[f] for _sha, f in pairs])
        else:
            scores = rr.score_states(query_states, [states[f] for _sha, f in pairs])
        out = {c.sha: 0.0 for c in top}
        best: dict[str, float] = {}
        for (sha, _f), score in zip(pairs, scores, strict=True):
            best[sha] = max(score, best.get(sha, score))
        out.update(best)
        return out


def commit_centroids(rows_of: dict[str, list[int]], vectors: np.ndarray) -> dict[str, np.ndarray]:
    """Per commit, the unit-length mean of its files' L2-normalised vectors (``rows_of``: commit -> rows of
    ``vectors``); a commit without rows is left out, one whose files cancel out gets the zero vector.

    Why a centroid and not the best file: one file of a large commit that happens to be near the query says
    little about the commit, while the centroid is near the query only when the commit as a whole is; on the
    message-blind evaluation the dense lane alone rose 15 % / 11 % (itsdangerous / Flask, docs/benchmarks.md).
    A one-file commit scores its file's cosine.
    """
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    shas = [sha for sha in sorted(rows_of) if rows_of[sha]]
    if not shas:
        return {}
    counts = np.asarray([len(rows_of[sha]) for sha in shas])
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    # all commits at once (one commit at a time cost ~4 ms a search on git/git): sums of each commit's rows
    sums = np.add.reduceat(unit[np.concatenate([rows_of[sha] for sha in shas])], starts, axis=0)
    centres = sums / counts.astype(unit.dtype)[:, None]
    norms = np.linalg.norm(centres, axis=1, keepdims=True)
    centres = np.where(norms > 1e-12, centres / np.maximum(norms, 1e-12), 0.0).astype(unit.dtype)
    return dict(zip(shas, centres, strict=True))


def score_centroids(query: np.ndarray, centroids: dict[str, np.ndarray]) -> dict[str, float]:
    """Cosine of ``query`` with each unit centroid, rounded to 6 places (deterministic), in commit order."""
    if not centroids:
        return {}
    shas = sorted(centroids)
    q = query / max(float(np.linalg.norm(query)), 1e-12)
    sims = np.stack([centroids[sha] for sha in shas]) @ q.astype(np.float32)
    return {sha: round(float(s), 6) for sha, s in zip(shas, sims.tolist(), strict=True)}


def top_by_cosine(
    query: np.ndarray, keys: list[str], columns: np.ndarray, count: int, allowed: set[str] | None = None
) -> list[tuple[str, float]]:
    """The ``count`` keys whose columns of ``columns`` (unit length: :func:`unit_columns`) are nearest ``query``
    by cosine, best first, as (key, cosine rounded to 6 places); ties by key, so the order is deterministic.
    ``allowed`` limits the keys. Vectorised: only the best ``count`` (and keys tied with the last) reach Python,
    so git/git's 60,642 messages cost ~3 ms."""
    if not keys or count <= 0:
        return []
    rows = np.arange(len(keys)) if allowed is None else np.flatnonzero([k in allowed for k in keys])
    if not len(rows):
        return []
    sub = columns if allowed is None else columns[:, rows]
    q = (query / max(float(np.linalg.norm(query)), 1e-12)).astype(np.float32)
    sims = np.round(q @ sub, 6)
    if len(sims) > count:  # the best ``count`` and every row tied with the last of them
        floor = np.partition(sims, len(sims) - count)[len(sims) - count]
        kept = np.flatnonzero(sims >= floor)
    else:
        kept = np.arange(len(sims))
    scored = [(keys[int(rows[i])], float(sims[i])) for i in kept.tolist()]
    scored.sort(key=lambda t: (-t[1], t[0]))
    return scored[:count]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with each row scaled to unit length (zero rows stay zero)."""
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def unit_columns(matrix: np.ndarray) -> np.ndarray:
    """:func:`unit_rows` of ``matrix``, transposed and contiguous: a query's cosines then read it in one pass
    down its rows (60,642 x 384 float32 on this machine: 2.9 ms, against 8.0 ms for the rows times the query,
    the same numbers to six places)."""
    return np.ascontiguousarray(unit_rows(matrix).T)


def commit_hunks(ranked: list[tuple[str, float]], hunks_of: dict[str, list[int]]) -> list[tuple[int, float]]:
    """A commit-level ranking as a lane's hunk ranking: each commit's hunks (``hunks_of``) with its score, in
    the commits' order; commits without hunks are left out."""
    return [(uid, score) for sha, score in ranked for uid in hunks_of.get(sha, [])]


def commit_passages(
    top: list[FusedCommit], rows: dict[int, Any], commits: dict[str, Any], no_messages: bool
) -> list[str]:
    """What a text reranker reads for each candidate: its best hunks (the ones the lanes matched, best first)
    as one passage: their paths, symbols, the subject (unless message-blind) and changed lines."""
    passages = []
    for c in top:
        hunks = [rows[u] for u in c.hunks if u in rows]
        subject = None if no_messages else commits[c.sha]["subject"]
        paths = " ".join(dict.fromkeys(h["path"] for h in hunks))
        symbols = [s[0] for h in hunks for s in _symbols(h)]
        passages.append(file_passage(paths, symbols, subject, [h["excerpt"] for h in hunks]))
    return passages


def _symbols(row: Any) -> list[list[Any]]:
    return list(json.loads(row["symbols"]))
