"""The recency nudge: newer prior art wins ties, but age never buries a strong match.

final = score x (1 + weight x exp(-age_days / half_life)); weight 0.05 and 90 days by default, so the largest
possible boost is 5%.
"""

from __future__ import annotations

import math

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
