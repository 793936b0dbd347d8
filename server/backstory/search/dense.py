"""The dense lane over file units, and what every dense step of a search stands on: the models and the vectors.

Why one object holds the models: the file-unit lane, the message lane (:mod:`.message_lane`) and the rerank
(:mod:`.rerank`) share one embedder, the vector file's stamp and checks, and the query's one forward pass
(:meth:`DenseLane.last_pass`), so each of those modules asks this one instead of loading its own.

Everything model-related degrades instead of failing: a missing or corrupt model, or vectors stamped with a
different model, turns the dense lane off with a warning in ``_meta`` while the keyword lanes keep answering.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import tantivy

from ..index import vectors
from ..index.catalog import Catalog
from ..index.integrity import REINDEX
from ..index.store import Store
from ..index.text_index import filter_uids
from ..models.passages import RECIPE

if TYPE_CHECKING:
    from .options import ModelConfig

DENSE_TOP = 100
FILTER_SCAN_LIMIT = 200_000
#: Commit centroids kept between searches, least recently used dropped first (~1.7 KB each, ~7 MB at the cap).
#: Unbounded, the cache grew with every distinct search: 34 MB in a 900-request session on git/git, towards
#: ~100 MB for all 60,000 commits. A search scores ~70 commits; all of them cold cost ~5 ms against ~2 warm.
CENTROID_CACHE = 4096


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
        self._centroids_of: OrderedDict[str, np.ndarray] = OrderedDict()  # commit -> centroid, for the loaded vectors
        self._lock = threading.Lock()
        self._rr_lock = threading.Lock()
        self._last_pass: tuple[str, str, Any, Any] | None = None  # (model id, query, vector, token states) of rank()
        self._pending: tuple[str, str, Future[tuple[Any, Any]]] | None = None  # (model id, query, pass), begin_pass
        self._passes: ThreadPoolExecutor | None = None  # this engine's one thread for them (see begin_pass)
        self._trusted: set[Any] = set()  # vector files (size, mtime) verified by CRC in this process
        self._problem: tuple[Any, str | None] | None = None  # (catalogue state, vector file stat) -> problem()

    # -- models -----------------------------------------------------------------------------------------------

    def embedder(self) -> Any:
        """The shared embedder, or None with ``_embedder_error`` set (never raises)."""
        with self._lock:
            if self._embedder is None and self._embedder_error is None:
                try:
                    from ..models import SERVING_PREPACK, Embedder, resolve_model

                    # a search embeds one query at a time: the session's smaller form (see SERVING_PREPACK)
                    self._embedder = Embedder(resolve_model(self.config.model_path), prepack=SERVING_PREPACK)
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

    def reranker_error(self) -> str | None:
        """Why :meth:`reranker` returned None."""
        return self._reranker_error

    def last_pass(self, model_id: str, query: str) -> tuple[Any, Any] | None:
        """(vector, token states) of ``query`` from :meth:`rank`'s forward pass with model ``model_id``, or None:
        the message lane and the rerank of the same search reuse it instead of running the model again."""
        cached = self._last_pass
        return (cached[2], cached[3]) if cached is not None and cached[:2] == (model_id, query) else None

    def begin_pass(self, query: str) -> None:
        """Start the forward pass :meth:`rank` will need for ``query`` on another thread, when the lane will run.

        Why: onnxruntime releases the GIL, so the pass (~7 ms on git/git's 20 test queries, one core) runs
        while the keyword lanes search Tantivy on the caller's thread; :meth:`rank` then takes its result. The
        same function computes the same vector either way, so results do not change. Nothing starts while the
        lane is off (:meth:`_ready`). The thread is this lane's own: an engine's pass never waits behind another
        repository's embedder (the language server embeds small updates with it, holding its lock)."""
        self._pending = None
        emb, _stamp, _warning = self._ready()
        if emb is None:
            return
        try:
            if self._passes is None:
                self._passes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backstory-query-pass")
            self._pending = (emb.model_id, query, self._passes.submit(emb.embed_query_with_states, query))
        except RuntimeError:  # the interpreter is shutting down: rank() runs the pass itself
            self._pending = None

    def pending_pass(self, model_id: str, query: str) -> Future[tuple[Any, Any]] | None:
        """The pass :meth:`begin_pass` started for ``query`` with model ``model_id``, if it did."""
        pending = self._pending
        return pending[2] if pending is not None and pending[:2] == (model_id, query) else None

    def after_pass(self, work: Callable[[], Any]) -> Future[Any] | None:
        """Run ``work`` on the passes' thread after the pass queued before it (one thread, in order); None when
        no pass was started."""
        if self._passes is None or self._pending is None:
            return None
        try:
            return self._passes.submit(work)
        except RuntimeError:  # shutting down
            return None

    def forget_pass(self) -> None:
        """Drop a started pass no lane took (a search that failed or stopped before :meth:`rank`)."""
        self._pending = None

    def _forward(self, emb: Any, query: str) -> tuple[Any, Any]:
        """The query's (vector, token states): :meth:`begin_pass`'s if it ran for this query, else computed now."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[:2] == (emb.model_id, query):
            result: tuple[Any, Any] = pending[2].result()
            return result
        return emb.embed_query_with_states(query)  # type: ignore[no-any-return]

    def _ready(self) -> tuple[Any, dict[str, Any], str | None]:
        """(the embedder, the vectors' stamp, None) when the lane can run, else (None, stamp, why not: a warning
        for ``_meta``, or None when there is simply nothing embedded yet)."""
        stamp = self.stamp() or {}
        if not stamp:
            return None, stamp, None
        problem = self.problem()
        if problem is not None:
            return None, stamp, f"dense lane off: {problem}"
        if not self.store.vectors_path.exists():
            return None, stamp, None  # nothing embedded yet
        emb = self.embedder()
        if emb is None:
            return None, stamp, f"dense lane off: {self._embedder_error}"
        if stamp.get("model_id") != emb.model_id or stamp.get("recipe") != RECIPE:
            return (
                None,
                stamp,
                f"dense lane off: vectors were built with {stamp.get('model_id')} / {stamp.get('recipe')}, "
                f"the current model is {emb.model_id} / {RECIPE}; `backstory index` embeds them again",
            )
        return emb, stamp, None

    def reset(self) -> None:
        """Forget the open vector index (after a rebuild); models stay loaded."""
        self._index = None
        self._index_mtime = None
        self._centroids_of = OrderedDict()
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
            self._centroids_of = OrderedDict()
        return self._index

    # -- the file-unit lane -----------------------------------------------------------------------------------

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
        emb, stamp, warning = self._ready()
        if emb is None:
            return None, None, warning
        try:
            index = self._vector_index(int(stamp["dim"]))
        except Exception as e:
            return None, None, f"dense lane off: the vector file is unreadable ({e}); {REINDEX}"
        qv, states = self._forward(emb, query)
        # the rerank of this search reuses the pass, and so does the message lane
        self._last_pass = (emb.model_id, query, qv, states)
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

        Centroids do not depend on the query, so the most recently used :data:`CENTROID_CACHE` are kept until
        the vector file changes; a cold one costs a catalogue lookup and a vector fetch per file of the commit,
        and is the same to the bit whether computed alone or among others (so the cache never changes a score).
        """
        cache = self._centroids_of
        ordered = sorted(self.catalog.commits_of_units(fids))
        missing = [sha for sha in ordered if sha not in cache]
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
            fresh = commit_centroids({sha: [row_of[f] for f in fs] for sha, fs in files_of.items()}, mat)
            for sha, centre in fresh.items():
                cache[sha] = centre.copy()  # a row alone: a view would keep its whole batch's matrix alive
        held = {sha: cache[sha] for sha in ordered if sha in cache}
        for sha in held:
            cache.move_to_end(sha)
        while len(cache) > CENTROID_CACHE:
            cache.popitem(last=False)
        return score_centroids(qv, held)


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
