"""The learned second stage: a linear model over :data:`.features.FEATURES` that orders the reranked candidates.

Why a learned combination: the shipped pipeline used to order candidates by MaxSim + 0.5 x fused score, two
hand-tuned signals. The candidates' whole-commit statistics (:mod:`.features`) carry evidence neither has,
but how much each is worth is an empirical question, so the weights are fitted: a listwise softmax
(cross-entropy of the right commit among the candidates, :func:`.second_stage.candidates`) on commit-subject
queries of public histories that neither the embedding model nor the evaluation's held-out histories include
(``tools/finetune/train_second_stage.py``; numbers in docs/benchmarks.md, "Ranking quality — eighth session").

Why linear: gradient-boosted trees ranked no better on held-out histories (same section), and it is
a few multiply-adds per candidate, deterministic, and each feature's weight can be read and reasoned about.
The score is the logistic of the linear form, so it is positive (the recency nudge multiplies it) and
between 0 and 1.

Why two models (:data:`MODEL_FILES`): with messages indexed, the message lane decides most subject-like
queries and the fused score means something else, so a message-blind model ordered worse than the blend
there; each kind of index gets weights fitted on its own kind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .features import FEATURES

#: One model per kind of index: with messages the message lane dominates the fused score and the commit's message
#: is a feature, so the weights that suit a message-blind index do not suit one with messages (docs/benchmarks.md).
MODEL_FILES = {False: "second_stage.json", True: "second_stage_messages.json"}  # keyed by "the index has messages"


class SecondStageUnavailable(Exception):
    """The learned model's file is missing, unreadable or made for other features."""


@dataclass(frozen=True)
class LinearRanker:
    name: str
    features: tuple[str, ...]  # the :data:`FEATURES` it reads, in its weights' order (any subset)
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float = 0.0
    embedding_model: str | None = None  # the model id whose MaxSim and centroid scores it was fitted on

    def linear(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """The linear form sum_i w_i x (x_i - mean_i) / scale_i + bias per row, rounded to 9 places.

        Why the engine orders by this and not by :meth:`score`: the model was fitted listwise (a softmax over one
        query's candidates), so only differences of the linear form mean anything, and its logistic saturates
        (most good candidates score 0.99999...), which left the recency nudge to decide their order."""
        return [round(self.bias + math.fsum(self.contributions(row)), 9) for row in rows]

    def contributions(self, row: Sequence[float]) -> list[float]:
        """Each of the model's features' term w_i x (x_i - mean_i) / scale_i for one row of all FEATURES."""
        columns = [FEATURES.index(f) for f in self.features]
        return [w * (row[c] - m) / s for w, c, m, s in zip(self.weights, columns, self.mean, self.scale, strict=True)]

    def score(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """logistic(sum_i w_i x (x_i - mean_i) / scale_i + bias) per row of all :data:`FEATURES`, over the model's
        own features, rounded to 9 places (deterministic)."""
        columns = [FEATURES.index(f) for f in self.features]
        out = []
        for row in rows:
            z = self.bias + math.fsum(
                w * (row[c] - m) / s for w, c, m, s in zip(self.weights, columns, self.mean, self.scale, strict=True)
            )
            out.append(round(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))), 9))
        return out

    def to_json(self, **extra: Any) -> dict[str, Any]:
        return {
            "name": self.name, "features": list(self.features), "mean": list(self.mean), "scale": list(self.scale),
            "weights": list(self.weights), "bias": self.bias, "embedding_model": self.embedding_model, **extra,
        }  # fmt: skip


def parse(data: dict[str, Any]) -> LinearRanker:
    """A ranker from its JSON form; raises :class:`SecondStageUnavailable` with the reason when it does not fit."""
    try:
        features = tuple(str(f) for f in data["features"])
        ranker = LinearRanker(
            name=str(data["name"]),
            features=features,
            mean=tuple(float(v) for v in data["mean"]),
            scale=tuple(float(v) for v in data["scale"]),
            weights=tuple(float(v) for v in data["weights"]),
            bias=float(data.get("bias", 0.0)),
            embedding_model=str(data["embedding_model"]) if data.get("embedding_model") else None,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SecondStageUnavailable(f"malformed second-stage model ({e!r})") from None
    unknown = [f for f in features if f not in FEATURES]
    if unknown or len(set(features)) != len(features) or not features:
        raise SecondStageUnavailable(f"second-stage model expects features {list(features)}; known: {list(FEATURES)}")
    if not len(ranker.mean) == len(ranker.scale) == len(ranker.weights) == len(features):
        raise SecondStageUnavailable("second-stage model: mean, scale and weights must each have one value per feature")
    if any(s <= 0 or not math.isfinite(s) for s in ranker.scale) or not all(
        math.isfinite(v) for v in (*ranker.mean, *ranker.weights, ranker.bias)
    ):
        raise SecondStageUnavailable("second-stage model: non-finite value or non-positive scale")
    return ranker


def load(path: str | Path | None = None, messages: bool = False) -> LinearRanker:
    """The model at ``path``, else the bundled one for an index with or without ``messages``
    (``backstory/models/data/``, :data:`MODEL_FILES`)."""
    try:
        if path is not None:
            text = Path(path).read_text(encoding="utf-8")
        else:
            bundled = resources.files("backstory.models").joinpath("data", MODEL_FILES[messages])
            text = bundled.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as e:
        raise SecondStageUnavailable(f"second-stage model unreadable ({e})") from None
    if not isinstance(data, dict):
        raise SecondStageUnavailable("second-stage model: not a JSON object")
    return parse(data)
