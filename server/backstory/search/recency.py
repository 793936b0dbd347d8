"""The recency nudge: newer prior art wins ties, but age never buries a strong match.

factor = 1 + weight x exp(-age_days / half_life); weight 0.05 and 90 days by default, so the largest possible
boost is 5%. It multiplies the fused or blended score, or (learned ordering) the calibrated probability.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

DEFAULT_WEIGHT = 0.05
DEFAULT_SCALE_DAYS = 90.0


def recency_factor(
    commit_time: int, now: float, weight: float = DEFAULT_WEIGHT, scale_days: float = DEFAULT_SCALE_DAYS
) -> float:
    """Multiplier >= 1 for a commit made at ``commit_time`` (Unix seconds); future dates count as age 0."""
    age_days = max(0.0, (now - commit_time) / 86400.0)
    return 1.0 + weight * math.exp(-age_days / scale_days)


def apply_recency(score: float, factor: float) -> float:
    """Multiplying a negative score by a boost would punish it; shift such scores onto the positive side."""
    return score * factor if score >= 0 else score / factor


def calibrated(linear: Mapping[str, float], factors: Mapping[str, float]) -> dict[str, float]:
    """The probability that each candidate is the commit asked for: a softmax over one query's candidates of
    the learned model's linear score plus ln(recency factor), rounded to 9 places.

    Why: the learned model was fitted listwise (softmax cross-entropy over the candidates), so this is the
    quantity it was trained to predict, it spreads over the candidates instead of saturating, and adding
    ln(factor) multiplies a candidate's probability by its recency factor (at most 1 + weight): recency can
    only reorder candidates whose probabilities are within that factor of each other (a band of equal
    relevance), never lift a clearly weaker match over a stronger one.
    """
    keys = sorted(linear)
    if not keys:
        return {}
    shifted = [linear[k] + math.log(factors.get(k, 1.0)) for k in keys]
    top = max(shifted)
    weights = [math.exp(v - top) for v in shifted]
    total = math.fsum(weights)
    return {k: round(w / total, 9) for k, w in zip(keys, weights, strict=True)}
