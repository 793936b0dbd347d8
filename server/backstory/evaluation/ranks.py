"""Rank metrics shared by the ranking evaluations: Recall@1/5/10 and MRR@10 of the right answer's rank."""

from __future__ import annotations


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    out = {f"R@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)}
    out["MRR@10"] = sum(1 / r for r in ranks if r is not None and r <= 10) / n
    return {k: round(v, 4) for k, v in out.items()}
