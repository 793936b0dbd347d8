"""Which ordering a search's reranked candidates get, and the learned one's inputs and scores.

The engine owns one :class:`SecondStage`: the learned model (:mod:`.learned`, loaded once) and the commits'
analysed text (:class:`.features.TokenCache`), so a long-lived server pays for a commit's text once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import features, learned

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    import tantivy

    from .engine import SearchOptions
    from .fusion import FusedCommit


class SecondStage:
    def __init__(self, model_path: str | None = None) -> None:
        self.model_path = model_path  # a user's own model; None = the bundled one
        self._model: learned.LinearRanker | str | None = None  # the model, or why it is unavailable
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

    def model(self) -> learned.LinearRanker | None:
        """The model, loaded once (a file fixed later needs a new engine, i.e. a server restart); None, with
        the reason kept, when it is unavailable."""
        if self._model is None:
            try:
                self._model = learned.load(self.model_path)
            except learned.SecondStageUnavailable as e:
                self._model = str(e)
        return self._model if isinstance(self._model, learned.LinearRanker) else None

    def rows(
        self,
        db: sqlite3.Connection,
        searcher: tantivy.Searcher,
        query: str,
        top: list[FusedCommit],
        rerank: dict[str, float],
        dense_scores: dict[str, float],
    ) -> list[list[float]]:
        """:data:`.features.FEATURES` of each candidate, in ``top``'s order (idf from ``searcher``)."""
        q = features.query_info(query, lambda t: searcher.doc_freq("diff", t), searcher.num_docs)
        texts = features.gather(db, [c.sha for c in top], q, self.texts)
        return [
            features.feature_row(
                q, texts[c.sha], c.fused, rerank.get(c.sha, 0.0), dense_scores.get(c.sha, 0.0), c.lanes.get("dense")
            )
            for c in top
        ]

    def scores(
        self,
        top: list[FusedCommit],
        rows: Callable[[], list[list[float]]],
        embedding_model: str | None,
        meta: dict[str, Any],
    ) -> dict[str, float]:
        """Candidates' learned scores (``rows``: their features, computed only if the model applies); {} when
        the model is unavailable (with a warning in ``meta``) or was fitted on another embedding model's scores
        than ``embedding_model``'s."""
        model = self.model()
        if model is None:
            meta["warnings"].append(f"{self._model}; ordering by rerank + fused score instead")
            return {}
        fitted_with = model.embedding_model
        if self.model_path is None and fitted_with and embedding_model != fitted_with:
            return {}
        meta["second_stage"] = "learned"
        return dict(zip((c.sha for c in top), model.score(rows()), strict=True))
