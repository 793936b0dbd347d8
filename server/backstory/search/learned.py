"""The learned second stage: a linear model over :data:`.features.FEATURES` that orders the reranked candidates.

Why a learned combination: the shipped pipeline used to order candidates by MaxSim + 0.5 x fused score, two
hand-tuned signals. The candidates' whole-commit statistics (:mod:`.features`) carry evidence neither has,
but how much each is worth is an empirical question, so the weights are fitted: a listwise softmax
(cross-entropy of the right commit among the first stage's top 20) on commit-subject queries of public
histories that neither the embedding model nor the evaluation's held-out histories include
(``tools/finetune/train_second_stage.py``; numbers in docs/benchmarks.md, "Ranking quality — eighth session").

Why linear: gradient-boosted trees ranked no better on held-out histories (same section), and it is
nineteen multiply-adds per candidate, deterministic, and each feature's weight can be read and reasoned about.
The score is the logistic of the linear form, so it is positive (the recency nudge multiplies it) and
between 0 and 1.
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

MODEL_FILE = "second_stage.json"


class SecondStageUnavailable(Exception):
    """The learned model's file is missing, unreadable or made for other features."""


@dataclass(frozen=True)
class LinearRanker:
    name: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float = 0.0
    embedding_model: str | None = None  # the model id whose MaxSim and centroid scores it was fitted on

    def score(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """logistic(sum_i w_i x (x_i - mean_i) / scale_i + bias) per row, rounded to 9 places (deterministic)."""
        out = []
        for row in rows:
            z = self.bias + math.fsum(
                w * (x - m) / s for w, x, m, s in zip(self.weights, row, self.mean, self.scale, strict=True)
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
    if features != FEATURES:
        raise SecondStageUnavailable(f"second-stage model expects features {list(features)}, not {list(FEATURES)}")
    if not len(ranker.mean) == len(ranker.scale) == len(ranker.weights) == len(FEATURES):
        raise SecondStageUnavailable("second-stage model: mean, scale and weights must each have one value per feature")
    if any(s <= 0 or not math.isfinite(s) for s in ranker.scale) or not all(
        math.isfinite(v) for v in (*ranker.mean, *ranker.weights, ranker.bias)
    ):
        raise SecondStageUnavailable("second-stage model: non-finite value or non-positive scale")
    return ranker


def load(path: str | Path | None = None) -> LinearRanker:
    """The model at ``path``, else the bundled one (``backstory/models/data/second_stage.json``)."""
    try:
        if path is not None:
            text = Path(path).read_text(encoding="utf-8")
        else:
            text = resources.files("backstory.models").joinpath("data", MODEL_FILE).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as e:
        raise SecondStageUnavailable(f"second-stage model unreadable ({e})") from None
    if not isinstance(data, dict):
        raise SecondStageUnavailable("second-stage model: not a JSON object")
    return parse(data)
