"""Which ordering a search's reranked candidates get, and the learned one's inputs and scores.

The engine owns one :class:`Ordering`: the learned model (:mod:`.learned`, loaded once) and the commits'
analysed text (:class:`.features.TokenCache`), so a long-lived server pays for a commit's text once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import features, learned

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    import tantivy

    from ..index.catalog import Catalog
    from .fusion import FusedCommit
    from .options import SearchOptions


class Ordering:
    def __init__(self, model_path: str | None = None) -> None:
        self.model_path = model_path  # a user's own model, for every index; None = the bundled ones
        self._models: dict[bool, learned.LinearRanker | str] = {}  # by "index has messages": model, or why not
        self.texts = features.TokenCache()

    def applies(self, opts: SearchOptions, lanes_used: list[str], reranker: str | None) -> bool:
        """Whether the learned model may order this search's candidates.

        Its weights were fitted on one pipeline's score distributions: score fusion with the default lane
        weights, the dense lane's commit centroids and the bundled model's MaxSim. With RRF, explicit lanes,
        the dense lane off, a cross-encoder or another embedding model (checked in :meth:`scores`), its inputs
        mean something else, so the blend orders instead (a user's own model is trusted with any of them).
        """
        if opts.second_stage != "learned" or reranker is None:
            return False
        if self.model_path is not None:
            return True
        return (
            reranker == "maxsim" and opts.fusion == "score" and opts.lanes is None
            and opts.dense_commits == "centroid" and "dense" in lanes_used
        )  # fmt: skip

    def model(self, messages: bool) -> learned.LinearRanker | None:
        """The model for an index with or without ``messages``, loaded once (a file fixed later needs a new
        engine, i.e. a server restart); None, with the reason kept, when it is unavailable."""
        if messages not in self._models:
            try:
                self._models[messages] = learned.load(self.model_path, messages)
            except learned.SecondStageUnavailable as e:
                self._models[messages] = str(e)
        model = self._models[messages]
        return model if isinstance(model, learned.LinearRanker) else None

    def rows(
        self,
        catalog: Catalog,
        searcher: tantivy.Searcher,
        query: str,
        top: list[FusedCommit],
        rerank: dict[str, float],
        commit_scores: Mapping[str, Mapping[str, float]],
        messages: bool,
        needed: Collection[str] = features.FEATURES,
    ) -> list[list[float]]:
        """:data:`.features.FEATURES` of each candidate, in ``top``'s order (idf from ``searcher``; the commits'
        messages only where the index holds them; ``commit_scores``: the lanes' own per-commit scores, lane ->
        sha -> score, as the first stage fused them). Only the ``needed`` ones are sure to be computed: when
        none needs hunk text, the hunks are not read and the other features are not meaningful."""
        q = features.query_info(query, lambda t: searcher.doc_freq("diff", t), searcher.num_docs)
        hunks = not set(needed) <= features.WITHOUT_HUNKS
        texts = features.gather(catalog, [c.sha for c in top], q, self.texts, messages, hunks)
        dense_scores = commit_scores.get("dense", {})
        by_message = commit_scores.get("message_dense", {}) if messages else {}
        floor = min(by_message.values(), default=0.0)  # what fusion counts for a commit outside the lane's top
        rows = []
        for c in top:
            scores = (c.fused, rerank.get(c.sha, 0.0), dense_scores.get(c.sha, 0.0))
            message_rank = c.lanes.get("message") if messages else None
            message_dense_rank = c.lanes.get("message_dense") if messages else None
            row = features.feature_row(
                q, texts[c.sha], *scores, c.lanes.get("dense"), message_rank,
                message_cosine=by_message.get(c.sha, floor), message_dense_rank=message_dense_rank,
            )  # fmt: skip
            rows.append(row)
        return rows

    def scores(
        self,
        top: list[FusedCommit],
        rows: Callable[[Collection[str]], list[list[float]]],
        embedding_model: str | None,
        meta: dict[str, Any],
        messages: bool,
    ) -> tuple[dict[str, float], dict[str, list[str]]]:
        """Candidates' learned scores (the model's linear form: only differences between candidates mean
        something) and, per candidate, the features that lifted it most above the other candidates (``rows``:
        their features, computed only if the model applies, given the names the model reads). ({}, {}) when the
        model is unavailable (with a warning in ``meta``) or was fitted on another embedding model's scores than
        ``embedding_model``'s."""
        model = self.model(messages)
        if model is None:
            meta["warnings"].append(f"{self._models[messages]}; ordering by rerank + fused score instead")
            return {}, {}
        fitted_with = model.embedding_model
        if self.model_path is None and fitted_with and embedding_model != fitted_with:
            return {}, {}
        meta["second_stage"] = "learned"
        table = rows(model.features)
        shas = [c.sha for c in top]
        return dict(zip(shas, model.linear(table), strict=True)), dict(zip(shas, deciding(model, table), strict=True))


def deciding(model: learned.LinearRanker, rows: list[list[float]], most: int = 2) -> list[list[str]]:
    """Per row, the (at most ``most``) features whose terms lifted it furthest above the candidates' average
    term: what put this commit where it is, as opposed to what every candidate had."""
    terms = [model.contributions(row) for row in rows]
    if not terms:
        return []
    means = [sum(col) / len(terms) for col in zip(*terms, strict=True)]
    out = []
    for row_terms in terms:
        lift = sorted(
            ((t - m, name) for t, m, name in zip(row_terms, means, model.features, strict=True) if t - m > 0),
            key=lambda x: (-x[0], x[1]),
        )
        out.append([name for _lift, name in lift[:most]])
    return out
