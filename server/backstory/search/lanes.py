"""The first stage: every wanted lane searched on one snapshot of the index, and their rankings fused into commits.

Why one module for the lanes together: each lane ranks hunks its own way (BM25 over a Tantivy field, cosine of
file units, cosine of commit messages), but they must see the same snapshot, the same filters and the same
scope, and fusion needs them all at once; the keyword lanes also read the staging index of a long run's
symbols phase beside the main one. The lanes' own modules (:mod:`.dense`, :mod:`.message_lane`,
:mod:`backstory.index.text_index`) know nothing of each other; this is where they meet.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

import tantivy

from ..index import message_index
from ..index.catalog import Catalog
from ..index.store import StoreError
from ..index.text_index import LANE_TOP, Filters, filter_query, filter_uids, merge_rankings, search_lane, shas_query
from .fusion import FusedCommit, fuse
from .options import TEXT_LANES, Cancelled, SearchCancelled, SearchOptions

#: said when an index with messages has no message index to read (the next indexing run builds it)
MESSAGES_UNAVAILABLE = (
    "the message lane's index is missing or damaged, so commit messages are not searched; the next "
    "`backstory index` builds it again"
)
#: hunks read at most to find which of a filtered search's message hits' hunks pass the filters
FILTERED_HUNKS = 20_000

if TYPE_CHECKING:
    from .dense import DenseLane
    from .message_lane import MessageLane


class Lanes:
    def __init__(self, catalog: Catalog, dense: DenseLane, messages: MessageLane) -> None:
        self.catalog = catalog
        self.dense = dense
        self.messages = messages

    def rankings(
        self,
        query: str,
        opts: SearchOptions,
        meta: dict[str, Any],
        index: tantivy.Index,
        staging: tantivy.Index | None,
        no_messages: bool,
        messages: tantivy.Index | None = None,
    ) -> tuple[dict[str, list[tuple[int, float]]], dict[str, dict[str, float]]]:
        """Each wanted lane's (hunk uid, lane score), best first, and lanes' own per-commit scores (the dense
        lane's commit centroids, the message lane's message cosines) where they have them; ``index``: the
        Tantivy index as the search opened it (checked and reloaded), ``staging``: the symbols phase's staging
        index while there is one; ``no_messages``: the index holds no messages (no message lanes);
        ``messages``: the message lane's per-commit index (`index.message_index`), None when there is none to
        read."""
        searcher = index.searcher()
        fq = filter_query(index.schema, opts.filters) if opts.filters.active() else None
        rankings: dict[str, list[tuple[int, float]]] = {}
        commit_scores: dict[str, dict[str, float]] = {}
        staged = staging.searcher() if staging is not None else None
        models = self.dense.config.dense
        if opts.wants("dense") and models:
            self.dense.begin_pass(query)  # runs while the keyword lanes search
            if fq is None and opts.wants("message_dense") and not no_messages:
                self.messages.begin(query)  # and so do the message cosines, after it
        try:
            for lane in TEXT_LANES:
                if not opts.wants(lane) or (lane == "message" and no_messages):
                    continue
                if lane == "message":
                    hunk_indexes = [searcher] + ([staged] if staged is not None else [])
                    ranking = None
                    if messages is not None:
                        try:
                            ranking = self._message_lane(messages, query, opts.filters, hunk_indexes, fq)
                        except StoreError:  # derived data, being built again under us or damaged
                            pass
                    if ranking is None:
                        meta["warnings"].append(MESSAGES_UNAVAILABLE)
                    else:
                        rankings[lane] = ranking
                    continue
                rankings[lane] = search_lane(index, searcher, lane, query, fq)
                if staging is not None and staged is not None:
                    rankings[lane] = merge_rankings(rankings[lane], search_lane(staging, staged, lane, query, fq))
            if opts.wants("dense") and models:
                dense, by_commit, warning = self.dense.rank(
                    query, searcher if fq is not None else None, fq, commits=opts.dense_commits
                )
                if warning:
                    meta["warnings"].append(warning)
                if dense is not None:
                    rankings["dense"] = dense
                if by_commit:
                    commit_scores["dense"] = by_commit
            if opts.wants("message_dense") and models and not no_messages:
                hits, by_message = self.messages.rank(query, searcher if fq is not None else None, fq)
                if hits and by_message:
                    rankings["message_dense"] = hits
                    commit_scores["message_dense"] = by_message
            return rankings, commit_scores
        finally:  # a started pass or cosines no lane took (a lane raised) must not wait for a later search
            self.dense.forget_pass()
            self.messages.forget()

    def _message_lane(
        self,
        messages: tantivy.Index,
        query: str,
        filters: Filters,
        hunk_indexes: list[tantivy.Searcher],
        fq: tantivy.Query | None,
    ) -> list[tuple[int, float]]:
        """The message lane: commits by the BM25 of their message, each standing for its hunks
        (:func:`commit_lane`). With filters, the commits are those the filters let through (the message index
        holds what they read, per commit) and each stands for those of its hunks that pass them (``fq``, the
        filters over the hunks), found in ``hunk_indexes`` (the main index and a long run's staging index)."""
        found = messages.searcher()
        if fq is None:
            return commit_lane(message_index.search(messages, found, query))
        hits = message_index.search(messages, found, query, LANE_TOP, filter_query(messages.schema, filters))
        firsts = self.catalog.hunk_places([h.uid for h in hits])
        hits = [h for h in hits if h.uid in firsts]  # a commit purged meanwhile: dropped
        if not hits:
            return []
        of_hits = shas_query(firsts[h.uid]["sha"] for h in hits)
        passing = tantivy.Query.boolean_query([(tantivy.Occur.Must, of_hits), (tantivy.Occur.Must, fq)])
        uids = self._passing(hunk_indexes, passing)
        if len(uids) >= FILTERED_HUNKS:  # some hit commits' hunks may be cut: each commit's own, best first
            uids = set()
            for h in hits:
                both = [(tantivy.Occur.Must, shas_query([firsts[h.uid]["sha"]])), (tantivy.Occur.Must, fq)]
                uids |= self._passing(hunk_indexes, tantivy.Query.boolean_query(both))
        # a commit's hunk ids are one run from its first: each passing hunk is the hit's that starts last before it
        starts = sorted(h.uid for h in hits)
        owned: dict[int, list[int]] = {}
        for uid in sorted(uids):
            at = bisect.bisect_right(starts, uid) - 1
            if at >= 0:
                owned.setdefault(starts[at], []).append(uid)
        return [(uid, h.score) for h in hits for uid in owned.get(h.uid, [])][:LANE_TOP]

    @staticmethod
    def _passing(hunk_indexes: list[tantivy.Searcher], query: tantivy.Query) -> set[int]:
        """The hunks ``query`` finds in the hunk indexes (a hunk the symbols phase is moving can be in both)."""
        return {u for searcher in hunk_indexes for u in filter_uids(searcher, query, FILTERED_HUNKS)}

    def fused(
        self,
        query: str,
        opts: SearchOptions,
        allowed: set[str] | None,
        meta: dict[str, Any],
        cancelled: Cancelled | None,
        index: tantivy.Index,
        staging: tantivy.Index | None,
        no_messages: bool,
        messages: tantivy.Index | None = None,
    ) -> tuple[list[FusedCommit], list[str], dict[str, dict[str, float]]]:
        """The lanes' rankings (:meth:`rankings`) fused into commits of ``allowed`` (None: any), best first; the
        lanes that ranked; and the lanes' own per-commit scores (the learned second stage reads them)."""
        scored, commit_scores = self.rankings(query, opts, meta, index, staging, no_messages, messages)
        if cancelled and cancelled():
            raise SearchCancelled
        rankings = {lane: [u for u, _s in r] for lane, r in scored.items()}
        uids = sorted({u for r in rankings.values() for u in r})
        rows = self.catalog.hunk_places(uids)
        sha_of = {u: r["sha"] for u, r in rows.items() if allowed is None or r["sha"] in allowed}
        sizes = self.catalog.hunk_counts(sorted(set(sha_of.values()))) if opts.size_prior > 0 else None
        fused = fuse(
            rankings,
            sha_of,
            tie_key=lambda u: (rows[u]["path"], rows[u]["idx"]),
            k=opts.rrf_k,
            weights={lane: opts.weights.get(lane, 1.0) or 1.0 for lane in rankings} if opts.lanes else opts.weights,
            hunks_per_commit=opts.hunks_per_commit,
            lane_scores={lane: dict(r) for lane, r in scored.items()},
            method=opts.fusion,
            commit_sizes=sizes,
            size_prior=opts.size_prior,
            commit_scores=commit_scores,
            margin_ref=opts.margin_ref,
        )
        return fused, list(rankings), commit_scores


def commit_lane(hits: list[message_index.MessageHit], limit: int = LANE_TOP) -> list[tuple[int, float]]:
    """Commits ranked by their message as the message lane's ranking of hunks: each commit's hunks with its
    score, in the commits' order, cut at ``limit`` hunks (the shape the lane had when every hunk carried its
    commit's message). Measured against giving each commit only its first three hunks (a deeper lane: 100
    commits), this kept the development set's ranking where the deeper lane lost a little without a refit
    (docs/large-histories.md)."""
    out = [(uid, hit.score) for hit in hits for uid in hit.hunk_uids()]
    return out[:limit]
