"""Reciprocal Rank Fusion and grouping of hunks into commits — pure functions, unit-tested.

RRF (Cormack et al., 2009) needs no score calibration between lanes, which matters because BM25 scores of
different fields and cosine similarities live on unrelated scales. Hunks are collapsed to commits per lane
(a commit's rank in a lane is the rank of its best hunk there) before fusing, so a commit with many matching
hunks is not counted many times by one lane.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
RRF_K = 60


def rrf(
    rankings: Mapping[str, Sequence[K]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> dict[K, float]:
    """score(d) = sum over lanes of weight / (k + rank(d)), ranks 1-based; duplicates keep their first rank."""
    scores: dict[K, float] = {}
    for lane, ranking in rankings.items():
        w = 1.0 if weights is None else weights.get(lane, 1.0)
        if w == 0:
            continue
        seen: set[K] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores


def collapse(ranking: Sequence[K], group_of: Callable[[K], Hashable]) -> list[Hashable]:
    """Groups in order of their first (best-ranked) member."""
    out: dict[Hashable, None] = {}
    for item in ranking:
        out.setdefault(group_of(item), None)
    return list(out)


def lane_ranks(rankings: Mapping[str, Sequence[K]]) -> dict[K, dict[str, int]]:
    """For every item, its 1-based rank in each lane it appears in (the "why it matched")."""
    out: dict[K, dict[str, int]] = {}
    for lane, ranking in rankings.items():
        for rank, item in enumerate(ranking, start=1):
            out.setdefault(item, {}).setdefault(lane, rank)
    return out


@dataclass
class FusedCommit:
    sha: str
    fused: float
    lanes: dict[str, int]
    hunks: list[int] = field(default_factory=list)  # best first
    hunk_lanes: dict[int, dict[str, int]] = field(default_factory=dict)


def fuse(
    hunk_rankings: Mapping[str, Sequence[int]],
    sha_of: Mapping[int, str],
    tie_key: Callable[[int], tuple[object, ...]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
    hunks_per_commit: int = 3,
) -> list[FusedCommit]:
    """Fuse per-lane hunk rankings into a commit ranking, each commit with its best hunks.

    Ties are broken by commit sha, and hunks by ``tie_key`` (path, position), so the output is deterministic.
    Hunks whose commit is unknown to ``sha_of`` (stale or unreachable) are dropped before ranking.
    """
    rankings = {lane: [u for u in r if u in sha_of] for lane, r in hunk_rankings.items()}
    commit_rankings = {lane: collapse(r, sha_of.__getitem__) for lane, r in rankings.items()}
    commit_scores = rrf(commit_rankings, k, weights)
    commit_lanes = lane_ranks(commit_rankings)
    hunk_scores = rrf(rankings, k, weights)
    hunk_lanes = lane_ranks(rankings)
    by_commit: dict[str, list[int]] = {}
    for uid in hunk_scores:
        by_commit.setdefault(sha_of[uid], []).append(uid)
    out: list[FusedCommit] = []
    for sha, score in commit_scores.items():
        assert isinstance(sha, str)
        uids = sorted(by_commit.get(sha, []), key=lambda u: (-hunk_scores[u], tie_key(u)))[:hunks_per_commit]
        out.append(
            FusedCommit(
                sha=sha,
                fused=score,
                lanes=dict(commit_lanes.get(sha, {})),
                hunks=uids,
                hunk_lanes={u: hunk_lanes[u] for u in uids},
            )
        )
    out.sort(key=lambda c: (-round(c.fused, 12), c.sha))
    return out
