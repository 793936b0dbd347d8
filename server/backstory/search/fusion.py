"""Fusion of lane rankings and grouping of hunks into commits — pure functions, unit-tested.

Two ways to fuse commits, both after collapsing each lane's hunks to commits (a commit's rank and score in a
lane are its best hunk's, so a commit with many matching hunks is not counted many times by one lane):

* Reciprocal Rank Fusion (Cormack et al., 2009) needs no calibration between lanes, but it flattens a lane's
  confidence: a BM25 hit far ahead of the rest and a near-tie both become 1/(k+1) vs 1/(k+2).
* Score fusion (the default, chosen on a message-blind evaluation, docs/benchmarks.md) keeps it: each keyword
  lane's BM25 is divided by that lane's best score for the query (so 1.0 is "as good as this lane gets"), the
  dense lane contributes its raw cosine similarity (already on a fixed scale), and commits absent from a lane
  get 0 there (the dense lane: its lowest returned similarity). The weighted sum ranks the commits.

Two commit-level adjustments (chosen on the message-blind evaluation, docs/benchmarks.md "Commit-level
aggregation"):

* A **size prior** on keyword lanes: a commit's best-hunk BM25 is divided by ``1 + alpha x ln(hunks in the
  commit)``. A commit's lane score is its best hunk's, so a commit with 200 hunks gets 200 draws at a high
  score for every query; the prior is commit-level length normalisation (BM25 normalises inside a hunk only).
* Per-commit lane scores may be given directly (``commit_scores``): the dense lane passes the cosine of the
  commit's centroid (mean of its file vectors) instead of its best file's.

Hunks inside a commit are always ordered by hunk-level RRF.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
RRF_K = 60
FUSION_METHODS = ("score", "rrf")  # the first is the default
RAW_SCORE_LANES = frozenset({"dense", "message_dense"})  # lanes whose scores are comparable across queries (cosine)
# lanes whose hunks hold different text (many hunks = many draws); every hunk of a commit has the same message
SIZED_LANES = frozenset({"diff", "path", "symbol"})
SIZE_PRIOR = 0.2  # alpha of the commit-size prior; 0 turns it off (tuned: 0.1-0.3, best 0.2 on both repos)
#: Keyword margin at which the dense lane keeps its nominal weight (see :func:`margin_weights`); 0 turns the
#: adaptation off. Tuned on the message-blind evaluation (0.3-0.6 alike on Flask; docs/benchmarks.md).
MARGIN_REF = 0.4


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


def score_fusion(
    scores: Mapping[str, Mapping[K, float]],
    weights: Mapping[str, float] | None = None,
    raw: frozenset[str] = RAW_SCORE_LANES,
) -> dict[K, float]:
    """sum over lanes of weight x normalised score: BM25-like lanes / their maximum, ``raw`` lanes as they are
    (a missing item gets the lane's minimum there); lanes at weight 0 are ignored."""
    out: dict[K, float] = {}
    lanes = [(lane, sc) for lane, sc in scores.items() if sc and (1.0 if weights is None else weights.get(lane, 1.0))]
    items = {item for _lane, sc in lanes for item in sc}
    for lane, sc in lanes:
        w = 1.0 if weights is None else weights.get(lane, 1.0)
        if lane in raw:
            floor = min(sc.values())
            for item in items:
                out[item] = out.get(item, 0.0) + w * sc.get(item, floor)
        else:
            top = max(sc.values()) or 1.0
            for item in items:
                out[item] = out.get(item, 0.0) + w * sc.get(item, 0.0) / top
    return out


def keyword_margin(scores: Mapping[str, Mapping[K, float]], weights: Mapping[str, float] | None = None) -> float:
    """How far the keyword lanes' best commit is ahead of the second: ``(s1 - s2) / s1`` of the weighted sum
    of the keyword lanes' max-normalised scores (as :func:`score_fusion` adds them); 1.0 with a single
    candidate, 0.0 when the keyword lanes found nothing."""
    fused = score_fusion({lane: sc for lane, sc in scores.items() if lane not in RAW_SCORE_LANES}, weights)
    top = sorted(fused.values(), reverse=True)[:2]
    if not top or top[0] <= 0:
        return 0.0
    return 1.0 if len(top) == 1 else max(0.0, (top[0] - top[1]) / top[0])


def margin_weights(
    scores: Mapping[str, Mapping[K, float]], weights: Mapping[str, float] | None, ref: float = MARGIN_REF
) -> dict[str, float]:
    """Lane weights with the dense lane's scaled by how undecided the keyword lanes are for this query.

    The factor is ``1 + (ref - margin) / ref`` clipped to [0, 2] (``margin``: :func:`keyword_margin`): a
    keyword ranking whose best commit is far ahead (margin >= 2 x ref) is not second-guessed by the dense lane
    (weight 0), a near-tie (margin 0) lets the dense lane count twice its weight, and ``margin = ref`` keeps
    the nominal weight. Why: one fixed
    dense weight is a bet on how good the keyword lane is in general, but its confidence varies by query;
    when BM25 cannot separate its top commits, those are the queries where its order is noise and the dense
    lane's (weaker on average) order is the better tie-break. Measured on the message-blind evaluation:
    Flask fused + rerank +0.017 MRR@10, itsdangerous -0.002 (docs/benchmarks.md).
    """
    out = {lane: 1.0 for lane in scores} if weights is None else dict(weights)
    dense = [lane for lane in scores if lane in RAW_SCORE_LANES and scores[lane] and out.get(lane, 1.0)]
    if ref <= 0 or not dense or not any(sc for lane, sc in scores.items() if lane not in RAW_SCORE_LANES):
        return out
    factor = min(2.0, max(0.0, 1.0 + (ref - keyword_margin(scores, weights)) / ref))
    for lane in dense:
        out[lane] = out.get(lane, 1.0) * factor
    return out


def size_factor(n_hunks: int, alpha: float = SIZE_PRIOR) -> float:
    """The divisor of a keyword lane's commit score: ``1 + alpha x ln(n_hunks)`` (1.0 for one hunk or fewer)."""
    return 1.0 + alpha * math.log(n_hunks) if alpha > 0 and n_hunks > 1 else 1.0


def commit_lane_scores(
    ranking: Sequence[tuple[K, float]],
    group_of: Callable[[K], str],
    sizes: Mapping[str, int] | None = None,
    alpha: float = 0.0,
) -> dict[str, float]:
    """Per commit, its best hunk's score divided by its :func:`size_factor` (commits missing from ``sizes``
    count as one hunk). Insertion order is the ranking's first-seen order."""
    best = best_scores(ranking, group_of)
    if not sizes or alpha <= 0:
        return {str(c): s for c, s in best.items()}
    return {str(c): s / size_factor(sizes.get(str(c), 1), alpha) for c, s in best.items()}


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Keys by score, best first; equal scores keep their first-seen order (Python's sort is stable)."""
    return sorted(scores, key=lambda c: -round(scores[c], 9))


def best_scores(ranking: Sequence[tuple[K, float]], group_of: Callable[[K], Hashable]) -> dict[Hashable, float]:
    """Per group, the score of its first (best-ranked) member."""
    out: dict[Hashable, float] = {}
    for item, score in ranking:
        out.setdefault(group_of(item), score)
    return out


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
    lane_scores: Mapping[str, Mapping[int, float]] | None = None,
    method: str = "rrf",
    commit_sizes: Mapping[str, int] | None = None,
    size_prior: float = 0.0,
    commit_scores: Mapping[str, Mapping[str, float]] | None = None,
    margin_ref: float = 0.0,
) -> list[FusedCommit]:
    """Fuse per-lane hunk rankings into a commit ranking, each commit with its best hunks.

    ``method`` "rrf" fuses ranks; "score" fuses ``lane_scores`` (hunk uid -> lane score, for every ranked
    hunk) as :func:`score_fusion` does. A lane's commit score is its best hunk's, divided for keyword lanes by
    the commit-size prior in :data:`SIZED_LANES` (``commit_sizes``: sha -> hunks, ``size_prior``: alpha; see
    :func:`size_factor`),
    unless ``commit_scores`` gives that lane's per-commit scores outright (only commits with a ranked hunk in
    the lane count). With score fusion and ``margin_ref`` > 0 the dense lane's weight follows the keyword
    lanes' margin (:func:`margin_weights`). Each lane's commit ranking (for RRF and the "why") follows those
    scores. Ties are broken by commit sha, and hunks by ``tie_key`` (path, position), so the output is
    deterministic. Hunks whose commit is unknown to ``sha_of`` (stale or unreachable) are dropped before ranking.
    """
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion method {method!r}; expected one of {', '.join(FUSION_METHODS)}")
    rankings = {lane: [u for u in r if u in sha_of] for lane, r in hunk_rankings.items()}
    commit_rankings: dict[str, list[str]] = {}
    per_commit: dict[str, dict[str, float]] = {}
    for lane, r in rankings.items():
        given = (commit_scores or {}).get(lane)
        if lane_scores is None and given is None:
            commit_rankings[lane] = [str(c) for c in collapse(r, sha_of.__getitem__)]
            continue
        if given is not None:
            order = collapse(r, sha_of.__getitem__)
            floor = min(given.values(), default=0.0)
            sc = {str(c): given.get(str(c), floor) for c in order}
        else:
            scores = (lane_scores or {}).get(lane, {})
            alpha = size_prior if lane in SIZED_LANES else 0.0
            sc = commit_lane_scores([(u, scores.get(u, 0.0)) for u in r], sha_of.__getitem__, commit_sizes, alpha)
        per_commit[lane] = sc
        commit_rankings[lane] = ranked(sc)
    by_score = method == "score"
    if by_score:
        lane_weights = margin_weights(per_commit, weights, margin_ref) if margin_ref > 0 else weights
        commit_score = score_fusion(per_commit, lane_weights)
    else:
        commit_score = rrf(commit_rankings, k, weights)
    commit_lanes = lane_ranks(commit_rankings)
    hunk_scores = rrf(rankings, k, weights)
    hunk_lanes = lane_ranks(rankings)
    by_commit: dict[str, list[int]] = {}
    for uid in hunk_scores:
        by_commit.setdefault(sha_of[uid], []).append(uid)
    out: list[FusedCommit] = []
    for sha, score in commit_score.items():
        uids = by_commit.get(sha, [])
        if len(uids) > 1:  # most commits have one ranked hunk: no key to compute (the tie key reads a row)
            uids = sorted(uids, key=lambda u: (-hunk_scores[u], tie_key(u)))
        uids = uids[:hunks_per_commit]
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
