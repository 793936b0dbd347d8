"""What a search is asked to do: its options and the models it runs with.

Its own module so that the pipeline's stages (``lanes.py``, ``second_stage.py``) and its callers (features, the
CLI, the language server) can name these types without importing the engine that runs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..index.text_index import Filters
from .fusion import FUSION_METHODS, MARGIN_REF, RRF_K, SIZE_PRIOR
from .recency import DEFAULT_WEIGHT

TEXT_LANES = ("diff", "message", "path", "symbol")
# Lane weights, chosen on a message-blind evaluation (docs/benchmarks.md): the path and symbol lanes alone rank
# poorly for natural-language queries and, fused at any weight, pushed good diff-lane hits down, so by default
# they only inform the diff lane (as boosted fields) and stay available as explicit lanes. With score fusion
# (the default) keyword lanes count 1.0 at their best hit and the dense lane its cosine x 1.0 (x the keyword
# margin's factor). 1.0 since the fifth session: 0.43 was tuned when the dense lane scored a commit by its best
# file; with commit centroids, the recipe-3 model and the margin factor, 0.8-1.3 ranked best on 400 held-apart
# queries in each of five repositories (fused + rerank mean MRR@10 0.393 -> 0.399).
# The message lane (message_dense, indexes with messages only) counts its cosine x 3.0: on the natural-question
# development set fused + rerank MRR@10 (mean of six) was 0.549 / 0.560 / 0.562 / 0.559 / 0.569 / 0.564 / 0.565 at
# weights 0 / 0.5 / 1 / 2 / 3 / 4 / 6 (docs/ranking-natural-questions.md).
DEFAULT_WEIGHTS = {"diff": 1.0, "message": 1.0, "dense": 1.0, "message_dense": 3.0, "symbol": 0.0, "path": 0.0}
DEFAULT_FUSION = FUSION_METHODS[0]
DENSE_COMMIT_SCORES = ("centroid", "best-file")  # the first is the default (see search/dense.py)
SECOND_STAGES = ("learned", "blend")  # the first is the default
Cancelled = Callable[[], bool]
#: Characters of a query that are searched. The model reads 128 tokens (~500 characters) of it and the keyword
#: lanes find a commit from far fewer words than this; past it the cost grows faster than the text (the second
#: stage matches every identifier of the query in every candidate: a 164 KB query took 17.7 s and held up
#: hovers, 4,000 characters take ~0.25 s).
MAX_QUERY_CHARS = 4000
_SURROGATE = re.compile("[\ud800-\udfff]")


def bounded_query(query: str) -> tuple[str, str | None]:
    """The part of ``query`` that is searched (cut at a word boundary before :data:`MAX_QUERY_CHARS`) and, when
    it was cut, the warning that says so. An unpaired surrogate (a command-line argument's non-UTF-8 byte) is
    searched as U+FFFD: the tokenizers take text only."""
    query = _SURROGATE.sub("\ufffd", query)
    if len(query) <= MAX_QUERY_CHARS:
        return query, None
    cut = query[:MAX_QUERY_CHARS]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > MAX_QUERY_CHARS // 2:
        cut = cut[:space]
    return cut, f"the query was cut to its first {len(cut):,} characters (of {len(query):,}): only they are searched"


class SearchCancelled(Exception):
    """The caller cancelled the search between stages."""


@dataclass
class SearchOptions:
    k: int = 10
    filters: Filters = field(default_factory=Filters)
    rerank: bool = True
    rerank_top: int = 20  # top 30 measured no better (MRR .273 vs .269 on 100 queries) and 40% slower
    # the dense lane's top commits that fused ranked below rerank_top join the reranked candidates (0 = none);
    # leave-one-history-out: 0 1.100x, 5 1.113x, 10 1.116x, 20 1.114x (docs/benchmarks.md); 5-30 are level, 10 is cheap
    dense_pool: int = 10
    message_pool: int = 0  # likewise for the message lane's (message_dense) top commits
    recency_weight: float = DEFAULT_WEIGHT
    hunks_per_commit: int = 3
    branch: str | None = None  # search this revision's history instead of HEAD's (a branch, tag, sha)
    all_branches: bool = False  # search every branch the index holds (`backstory index --all-branches`)
    lanes: tuple[str, ...] | None = None  # None = every lane with a non-zero weight
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    # 0: rerank score replaces the fused score; w > 0: rerank + w x fused score. 0.5 since the size prior and the
    # dense centroid (1.0 before; 0.4-0.5 ranked best on both tuning repositories, docs/benchmarks.md)
    rerank_blend: float = 0.5
    fusion: str = DEFAULT_FUSION  # "score" (normalised BM25 + cosine) or "rrf"
    rrf_k: int = RRF_K
    size_prior: float = SIZE_PRIOR  # keyword lanes: commit score / (1 + alpha x ln hunks); 0 = off
    dense_commits: str = DENSE_COMMIT_SCORES[0]  # dense lane's commit score: "centroid" or "best-file"
    # score fusion: dense weight x clip(1 + (ref - keyword margin) / ref, 0, 2); 0 = a fixed dense weight
    margin_ref: float = MARGIN_REF
    # how reranked candidates are ordered: "learned" (the linear model of search/learned.py over the rerank score,
    # the fused score and whole-commit features) or "blend" (rerank + rerank_blend x fused, before the 8th session)
    second_stage: str = SECOND_STAGES[0]
    hide_reverted: bool = False  # leave out commits whose last fate was a revert (index/relations.py)

    def wants(self, lane: str) -> bool:
        if self.lanes is not None:
            return lane in self.lanes
        return self.weights.get(lane, 1.0) > 0


@dataclass
class ModelConfig:
    model_path: str | None = None
    reranker: str = "maxsim"  # maxsim | cross-encoder | none
    cross_encoder_dir: str | None = None
    dense: bool = True
    second_stage_path: str | None = None  # a learned second-stage model other than the bundled one
