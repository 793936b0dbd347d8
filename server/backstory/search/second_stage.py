"""The second stage: which fused commits are candidates, their rerank, and the order they end in.

Why its own module: after fusion, a search takes the best few dozen commits (and those the dense lanes ranked
high but fusion left lower), has the reranker score them (:mod:`.rerank`), orders them by the learned model
(:mod:`.ordering`) or by the blend of rerank and fused score, and nudges near-ties by recency
(:mod:`.recency`); each step needs the previous one's scores, and the result's ``why`` shows them all, so they
are assembled here into one :class:`Ranked`, which :func:`.results.search_results` turns into results.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import tantivy

from ..index.catalog import Catalog
from .fusion import FusedCommit
from .options import Cancelled, SearchCancelled, SearchOptions
from .recency import apply_recency, calibrated, recency_factor

if TYPE_CHECKING:
    from .dense import DenseLane
    from .ordering import Ordering
    from .rerank import Rerank


def blend(top: list[FusedCommit], rerank: dict[str, float], weight: float) -> dict[str, float]:
    """Final pre-recency scores: the rerank score itself, or rerank + ``weight`` x fused score.

    MaxSim scores of a query's candidates sit in a narrow band (about 0.4-0.7), so used alone they throw away
    the first stage's confidence; on the message-blind evaluation the sum ranked better (docs/benchmarks.md).
    """
    if weight <= 0:
        return dict(rerank)
    return {c.sha: rerank[c.sha] + weight * c.fused for c in top if c.sha in rerank}


def candidates(fused: list[FusedCommit], opts: SearchOptions) -> list[FusedCommit]:
    """The commits the second stage orders: the fused top max(``k``, ``rerank_top``) (top ``k`` without a
    rerank) and, with a rerank, any commit the dense lane ranked in its top ``dense_pool`` that fusion left
    further down.

    Why: score fusion weighs the dense lane against keyword lanes that are often confident and wrong, so a
    commit the dense lane ranks high can fall out of the fused top 20 the second stage sees, although the
    second stage reads the dense rank itself.
    """
    n = max(opts.k, opts.rerank_top) if opts.rerank else opts.k
    top = fused[:n]
    if opts.rerank and (opts.dense_pool > 0 or opts.message_pool > 0):
        top += [c for c in fused[n:] if _pooled(c, opts)]
    return top


def _pooled(c: FusedCommit, opts: SearchOptions) -> bool:
    dense = c.lanes.get("dense", opts.dense_pool + 1) <= opts.dense_pool
    return dense or c.lanes.get("message_dense", opts.message_pool + 1) <= opts.message_pool


@dataclass
class Ranked:
    """The candidates in their final order and what decided it (each result's ``why``)."""

    top: list[FusedCommit]  # the candidates, in fused order
    commits: dict[str, Any]  # sha -> catalogue row of each candidate
    final: list[tuple[float, str, float]]  # (score, sha, recency factor), best first
    factors: dict[str, float]  # sha -> recency factor
    rerank: dict[str, float]  # sha -> rerank score ({} without a rerank)
    learned: dict[str, float]  # sha -> learned score ({} when the blend ordered)
    decided: dict[str, list[str]]  # sha -> the features that lifted it most (learned ordering only)


class SecondStage:
    def __init__(self, catalog: Catalog, dense: DenseLane, rerank: Rerank, ordering: Ordering) -> None:
        self.catalog = catalog
        self.dense = dense
        self.rerank = rerank
        self.ordering = ordering

    def rank(
        self,
        query: str,
        fused: list[FusedCommit],
        lanes_used: list[str],
        commit_scores: dict[str, dict[str, float]],
        opts: SearchOptions,
        meta: dict[str, Any],
        cancelled: Cancelled | None,
        searcher: tantivy.Searcher,
        no_messages: bool,
    ) -> Ranked:
        """The :func:`candidates` of ``fused``, reranked and ordered (learned, else blend, else fused score) with
        the recency nudge; ``searcher``: the snapshot the lanes searched (the learned features' idf)."""
        top = candidates(fused, opts)
        commits = self.catalog.commit_rows([c.sha for c in top])
        scores = {c.sha: c.fused for c in top}
        rerank_scores: dict[str, float] = {}
        learned_scores: dict[str, float] = {}
        decided: dict[str, list[str]] = {}
        if opts.rerank and top:
            if cancelled and cancelled():
                raise SearchCancelled
            rerank_scores, name, warning = self.rerank.scores(query, top, commits, no_messages)
            meta["rerank"] = name
            if warning:
                meta["warnings"].append(warning)
            if not rerank_scores:  # fused order then: the extra candidates would skip commits fused ranked higher
                top = candidates(fused, replace(opts, dense_pool=0))
            else:
                scores = blend(top, rerank_scores, opts.rerank_blend)
                meta["second_stage"] = "blend"
                if self.ordering.applies(opts, lanes_used, name):
                    learned_scores, decided = self._learned(
                        query, top, rerank_scores, commit_scores, meta, searcher, no_messages
                    )
        now = time.time()
        factors = {c.sha: recency_factor(commits[c.sha]["author_time"], now, opts.recency_weight) for c in top}
        if learned_scores:  # a probability over the candidates; recency reorders only near-equal ones
            probability = calibrated(learned_scores, factors)
            final = [(probability[c.sha], c.sha, factors[c.sha]) for c in top]
        else:
            final = [(apply_recency(scores[c.sha], factors[c.sha]), c.sha, factors[c.sha]) for c in top]
        final.sort(key=lambda t: (-round(t[0], 9), t[1]))
        return Ranked(top, commits, final, factors, rerank_scores, learned_scores, decided)

    def _learned(
        self,
        query: str,
        top: list[FusedCommit],
        rerank: dict[str, float],
        commit_scores: Mapping[str, Mapping[str, float]],
        meta: dict[str, Any],
        searcher: tantivy.Searcher,
        no_messages: bool,
    ) -> tuple[dict[str, float], dict[str, list[str]]]:
        emb = self.dense.embedder()
        model_id = emb.model_id if emb is not None else None
        messages = not no_messages

        def rows(needed: Collection[str]) -> list[list[float]]:
            return self.ordering.rows(self.catalog, searcher, query, top, rerank, commit_scores, messages, needed)

        return self.ordering.scores(top, rows, model_id, meta, messages=messages)
