"""Evaluation-only MaxSim rerank variants: swap one factor of the stored-state rerank at a time.

The shipped rerank scores a candidate commit by MaxSim against the stored token states of its best hunk's
(commit, file) unit: the dense recipe's text, distinct content tokens only, projected on PCA axes (96 when this
was written, 192 since), int4.
The rerank computed from the model (the commit's best hunks as text, every token, float32) ranked better.
Each variant here recomputes states with the model and changes exactly one of: the passage text, the token
selection, the projection, the quantization (and its step), the tokens' pooling; so
``python -m backstory.evaluation.evaluate`` can tell which one costs.
Nothing here runs outside the evaluation (forward passes per candidate: ~20x slower than the stored path).
``rr:NAME`` configurations of the evaluation order by the rerank blended with the fused score, ``rrl:NAME`` by
the learned second stage, as the shipped search does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..index.dense_build import unit_passages
from ..models.passages import file_passage
from ..models.states import LEVELS, StateCodec, _product, maxsim

if TYPE_CHECKING:
    from ..search.engine import Engine
    from ..search.fusion import FusedCommit


@dataclass(frozen=True)
class Variant:
    """``text``: "unit" (the best hunk's file unit) or "hunks" (the commit's best hunks, as the base rerank);
    ``tokens``: "all" or "distinct" (distinct content tokens); ``codec``: "none" (float32 states),
    "pcaN" (projection on N axes, float32), "pcaN-int4" / "pcaN-int8" (stored codecs); ``pool``: the tokens
    clustered down to ``ceil(n / pool)`` before the codec (:func:`pool_tokens`; 1 keeps them all); ``levels``:
    the int4 codes' range, ``-levels..levels`` (7, as every codec before the seventeenth pass; the shipped
    one since is :data:`~backstory.models.states.LEVELS`)."""

    text: str = "unit"
    tokens: str = "distinct"
    codec: str = "none"
    pool: float = 1.0
    levels: int = 7


VARIANTS = {
    "hunks-all": Variant("hunks", "all", "none"),
    "hunks-distinct": Variant("hunks", "distinct", "none"),
    "hunks-pca96-int4": Variant("hunks", "distinct", "pca96-int4"),
    "unit-all": Variant("unit", "all", "none"),
    "unit-distinct": Variant("unit", "distinct", "none"),
    "unit-pca96": Variant("unit", "distinct", "pca96"),
    "unit-pca96-int4": Variant("unit", "distinct", "pca96-int4"),
    "unit-pca96-int8": Variant("unit", "distinct", "pca96-int8"),
    "unit-pca128-int4": Variant("unit", "distinct", "pca128-int4"),
    "unit-pca192-int4": Variant("unit", "distinct", "pca192-int4"),
    "unit-pca192": Variant("unit", "distinct", "pca192"),
    "unit-pca256-int4": Variant("unit", "distinct", "pca256-int4"),
    "unit-pca192-int4-pool1.5": Variant("unit", "distinct", "pca192-int4", 1.5),
    "unit-pca192-int4-pool2": Variant("unit", "distinct", "pca192-int4", 2.0),
    "unit-pca192-int4-pool3": Variant("unit", "distinct", "pca192-int4", 3.0),
    "unit-pca192-int4-L5": Variant("unit", "distinct", "pca192-int4", levels=5),
    "unit-pca192-int4-L4": Variant("unit", "distinct", "pca192-int4", levels=4),
    "unit-pca192-int4-L3": Variant("unit", "distinct", "pca192-int4", levels=LEVELS),  # the shipped codec
    "unit-pca192-int4-L2": Variant("unit", "distinct", "pca192-int4", levels=2),
}


def pool_tokens(states: np.ndarray, factor: float) -> np.ndarray:
    """``states`` (``[n, dim]`` unit rows) clustered down to ``ceil(n / factor)`` rows: Ward's agglomerative
    clustering (the closest pair by Ward's criterion merged first, ties to the lowest positions, so the same
    rows give the same clusters), each cluster's mean re-normalised, in the order of each cluster's first row.

    Token pooling as proposed for ColBERT indexes (Clavie et al., 2024: half the vectors for ~no loss there).
    Measured here as a way to halve the stored states (seventeenth pass, docs/large-histories.md): it costs
    natural questions over an index with messages 2.6 % at a factor of 2, so it is not shipped.
    """
    x = np.asarray(states, dtype=np.float64)
    n = len(x)
    keep = max(1, int(np.ceil(n / factor)))
    if n <= keep:
        return np.asarray(states, dtype=np.float32)
    sums = x.copy()
    sizes = np.ones(n)
    sq = (x * x).sum(axis=1)
    # Ward's cost of merging two singletons is half their squared distance; Lance-Williams updates the rest
    cost = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0) / 2.0
    np.fill_diagonal(cost, np.inf)
    alive = np.ones(n, dtype=bool)
    for _ in range(n - keep):
        a, b = sorted(divmod(int(np.argmin(cost)), n))
        na, nb = sizes[a], sizes[b]
        merged = ((na + sizes) * cost[a] + (nb + sizes) * cost[b] - sizes * cost[a, b]) / (na + nb + sizes)
        cost[a, :] = merged
        cost[:, a] = merged
        cost[a, a] = np.inf
        cost[b, :] = np.inf
        cost[:, b] = np.inf
        sums[a] += sums[b]
        sizes[a] = na + nb
        alive[b] = False
    pooled = sums[alive]
    return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


class VariantReranker:
    """Replaces ``engine.rerank.scores`` for one variant (same signature and return value)."""

    def __init__(self, engine: Engine, variant: Variant) -> None:
        self.engine = engine
        self.variant = variant
        self._codec: StateCodec | None = None
        self._cache: dict[Any, np.ndarray] = {}

    def codec(self) -> StateCodec:
        """A codec fitted like the dense phase fits one: the first units in embedding order (newest first),
        up to 20,000 distinct content tokens, with this variant's number of axes."""
        if self._codec is None:
            axes = int(self.variant.codec.split("-")[0][3:])
            db = self.engine.store.db
            sql = "SELECT fid FROM files WHERE embedded=1 ORDER BY author_time DESC, fid DESC"
            fids = [r[0] for r in db.execute(sql)]
            emb = self.engine.dense.embedder()
            no_messages = self.engine._no_messages()
            got: list[np.ndarray] = []
            for start in range(0, len(fids), 64):
                got.extend(emb.token_states(unit_passages(self.engine.store, fids[start : start + 64], no_messages),
                                            max_tokens=128, content_only=True))  # fmt: skip
                if sum(len(s) for s in got) >= 20_000:
                    break
            self._codec = StateCodec.fit(np.concatenate([s for s in got if len(s)]), components=axes)
        return self._codec

    def _states(self, key: Any, text: str) -> np.ndarray:
        if key not in self._cache:
            emb = self.engine.dense.embedder()
            states = emb.token_states([text], max_tokens=128, content_only=self.variant.tokens == "distinct")[0]
            self._cache[key] = self._compress(states)
        return self._cache[key]

    def _compress(self, states: np.ndarray) -> np.ndarray:
        spec = self.variant.codec
        if self.variant.pool > 1 and len(states):
            states = pool_tokens(states, self.variant.pool)
        if spec == "none" or len(states) == 0:
            return states
        codec = self.codec()
        if spec.endswith("-int4"):  # the int4 codes at the variant's step
            return codec.decode(codec._encode_coords(_product(states - codec.mean, codec.basis), self.variant.levels))
        coords = (states - codec.mean) @ codec.basis
        if spec.endswith("-int8"):
            scale = np.maximum(np.abs(coords).max(axis=1, keepdims=True) / 127.0, 1e-8)
            coords = np.rint(coords / scale) * scale
        recon = coords @ codec.basis.T + codec.mean
        return (recon / np.maximum(np.linalg.norm(recon, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def __call__(
        self, query: str, top: list[FusedCommit], commits: dict[str, Any], no_messages: bool
    ) -> tuple[dict[str, float], str | None, str | None]:
        rows = self.engine.catalog.hunk_rows([u for c in top for u in c.hunks])
        emb = self.engine.dense.embedder()
        query_states = emb.token_states([query], max_tokens=128)[0]
        out: dict[str, float] = {}
        for c in top:
            hunks = [rows[u] for u in c.hunks if u in rows]
            if not hunks:
                out[c.sha] = 0.0
                continue
            if self.variant.text == "unit":
                fid = int(hunks[0]["fid"])
                key: Any = ("unit", fid)
                text = unit_passages(self.engine.store, [fid], no_messages)[0]
            else:
                key = ("hunks", tuple(c.hunks))
                subject = None if no_messages else commits[c.sha]["subject"]
                paths = " ".join(dict.fromkeys(h["path"] for h in hunks))
                symbols = [s[0] for h in hunks for s in json.loads(h["symbols"])]
                text = file_passage(paths, symbols, subject, [h["excerpt"] for h in hunks])
            out[c.sha] = maxsim(query_states, self._states(key, text))
        return out, "maxsim", None
