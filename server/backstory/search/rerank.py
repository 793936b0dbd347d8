"""The rerank: each fused candidate commit scored against the query by the reranker model.

Why its own stage: the lanes score hunks or files, each in its own way, and fusion only weighs their ranks
and scores; the reranker reads the query against the candidate's own text, once per candidate, for the few
dozen commits fusion kept. MaxSim (the default) reads the token states the dense phase stored for each file
unit, so a search runs the model over the query alone; a text reranker (a cross-encoder) reads a passage per
candidate (:func:`commit_passages`). The model comes from the :class:`~.dense.DenseLane`, which degrades when
it is missing: the search then keeps the fused order.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..models.passages import file_passage
from ..models.states import REQUANTIZABLE, STATES_RECIPE

if TYPE_CHECKING:
    from ..models.rerank import MaxSimReranker
    from .dense import DenseLane
    from .fusion import FusedCommit

#: Units (files) of a candidate commit the MaxSim rerank reads: those of its best hunks, best first; the
#: commit scores its best unit's MaxSim. One unit matched the base rerank's quality on Flask (the best of 3:
#: +0.004 MRR@10, within noise); see docs/benchmarks.md ("Rerank from stored token states").
RERANK_UNITS = 1


class Rerank:
    def __init__(self, dense: DenseLane) -> None:
        self.dense = dense
        self.catalog = dense.catalog

    def scores(
        self, query: str, top: list[FusedCommit], commits: dict[str, Any], no_messages: bool
    ) -> tuple[dict[str, float], str | None, str | None]:
        """(sha -> rerank score of each of ``top``, the reranker's name, a warning); ({}, None, None) with the
        rerank turned off, ({}, None, why) when its model is unavailable."""
        if self.dense.config.reranker == "none":
            return {}, None, None
        rr = self.dense.reranker()
        if rr is None:
            return {}, None, self.dense.reranker_error()
        uids = [u for c in top for u in c.hunks]
        if rr.name == "maxsim" and hasattr(rr, "score_states"):
            return self._units(query, top, self.catalog.hunk_places(uids), rr, no_messages), rr.name, None
        rows = self.catalog.hunk_rows(uids)
        scores = rr.score(query, commit_passages(top, rows, commits, no_messages))
        return {c.sha: float(s) for c, s in zip(top, scores, strict=True)}, rr.name, None

    def _units(
        self, query: str, top: list[FusedCommit], rows: dict[int, Any], rr: MaxSimReranker, no_messages: bool
    ) -> dict[str, float]:
        """MaxSim of each candidate commit against its best hunks' units (the dense recipe's text), read from
        the stored token states; units without stored states (the dense phase has not reached them, or the
        index predates stored states) are run through the model now and encoded with the same codec, so
        they score exactly as if they had been stored."""
        units = {c.sha: list(dict.fromkeys(rows[u]["fid"] for u in c.hunks if u in rows))[:RERANK_UNITS] for c in top}
        fids = sorted({f for fs in units.values() for f in fs})
        emb = rr.embedder
        stamp = self.dense.stamp() or {}
        recipe = str(stamp.get("states"))
        # rows of an older step read as they are until the next dense run re-encodes them (they decode alike);
        # that run files the codec under the current recipe a moment before the stamp says so
        stored = recipe in (STATES_RECIPE, *REQUANTIZABLE) and stamp.get("model_id") == emb.model_id
        codec = self.catalog.state_codec(recipe) if stored else None
        if codec is None and stored and recipe != STATES_RECIPE:
            codec = self.catalog.state_codec(STATES_RECIPE)
        blobs = self.catalog.unit_states(fids, codec.token_bytes) if codec is not None else {}
        missing = [f for f in fids if f not in blobs]
        fresh = emb.token_states(self.catalog.unit_passages(missing, no_messages), content_only=True) if missing else []
        states: dict[int, np.ndarray] = dict(zip(missing, fresh, strict=True))
        cached = self.dense.last_pass(emb.model_id, query)  # this search's forward pass, if it read as many tokens
        query_states = cached[1] if cached is not None and rr.max_tokens == emb.max_tokens else rr.query_states(query)
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
