"""Pure functions: fusion, grouping, recency, date parsing, globs, identifier splitting."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from backstory.index.analyzer import code_text, query_terms, split_identifier
from backstory.index.text_index import glob_to_regex
from backstory.search.dense import commit_centroids, score_centroids
from backstory.search.fusion import (
    best_scores,
    collapse,
    commit_lane_scores,
    fuse,
    keyword_margin,
    lane_ranks,
    margin_weights,
    ranked,
    rrf,
    score_fusion,
    size_factor,
)
from backstory.search.recency import apply_recency, recency_factor
from backstory.search.when import BadDate, parse_when


def test_rrf_sums_reciprocal_ranks() -> None:
    scores = rrf({"a": ["x", "y"], "b": ["y", "z"]}, k=60)
    assert scores["x"] == pytest.approx(1 / 61)
    assert scores["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["z"] == pytest.approx(1 / 62)


def test_rrf_weights_and_duplicates() -> None:
    scores = rrf({"a": ["x", "x", "y"], "b": ["y"]}, k=60, weights={"a": 2.0, "b": 0.0})
    assert scores == {"x": pytest.approx(2 / 61), "y": pytest.approx(2 / 63)}


def test_collapse_keeps_first_occurrence_order() -> None:
    assert collapse([1, 2, 3, 4], lambda u: "c1" if u in (2, 4) else "c2") == ["c2", "c1"]


def test_lane_ranks() -> None:
    assert lane_ranks({"a": ["x", "y"], "b": ["y"]}) == {"x": {"a": 1}, "y": {"a": 2, "b": 1}}


def test_fuse_groups_hunks_into_commits_and_breaks_ties_by_sha() -> None:
    sha_of = {1: "bbb", 2: "bbb", 3: "aaa", 4: "ccc"}
    fused = fuse({"diff": [3, 1], "message": [1, 3]}, sha_of, tie_key=lambda u: (u,))
    assert [c.sha for c in fused] == ["aaa", "bbb"]  # equal RRF scores: sha order
    assert fused[0].lanes == {"diff": 1, "message": 2}
    many = fuse({"diff": [1, 2, 4]}, sha_of, tie_key=lambda u: (u,))
    assert many[0].sha == "bbb" and many[0].hunks == [1, 2]
    # a commit with many hits in one lane counts once per lane
    assert many[0].fused == pytest.approx(1 / 61)


def test_fuse_drops_unknown_hunks() -> None:
    fused = fuse({"diff": [9, 1]}, {1: "aaa"}, tie_key=lambda u: (u,))
    assert [c.sha for c in fused] == ["aaa"]
    assert fused[0].lanes == {"diff": 1}


def test_score_fusion_normalises_keyword_lanes_and_keeps_cosine_raw() -> None:
    scores = score_fusion(
        {"diff": {"x": 10.0, "y": 5.0}, "dense": {"y": 0.6, "z": 0.2}}, weights={"diff": 1.0, "dense": 0.5}
    )
    # x: 10/10 + 0.5 x floor 0.2; y: 5/10 + 0.5 x 0.6; z: absent from diff (0) + 0.5 x 0.2
    assert scores == {"x": pytest.approx(1.1), "y": pytest.approx(0.8), "z": pytest.approx(0.1)}
    assert score_fusion({"diff": {"x": 3.0}, "path": {"y": 1.0}}, weights={"diff": 1.0, "path": 0.0}) == {
        "x": pytest.approx(1.0)
    }


def test_score_fusion_keeps_a_confident_keyword_hit_that_rrf_would_flatten() -> None:
    sha_of = {1: "aaa", 2: "bbb", 3: "ccc", 10: "aaa", 11: "bbb", 12: "ccc"}
    rankings = {"diff": [1, 2, 3], "dense": [11, 12, 10]}
    lane_scores = {"diff": {1: 30.0, 2: 3.0, 3: 2.9}, "dense": {11: 0.52, 12: 0.50, 10: 0.49}}
    by_rrf = fuse(rankings, sha_of, tie_key=lambda u: (u,))
    by_score = fuse(rankings, sha_of, tie_key=lambda u: (u,), lane_scores=lane_scores, method="score")
    assert by_rrf[0].sha == "bbb"  # 1/61 + 1/62 beats 1/61 + 1/63
    assert [c.sha for c in by_score] == ["aaa", "bbb", "ccc"]
    assert by_score[0].lanes == {"diff": 1, "dense": 3}
    with pytest.raises(ValueError):
        fuse(rankings, sha_of, tie_key=lambda u: (u,), method="borda")


def test_keyword_margin_is_the_relative_lead_of_the_best_keyword_commit() -> None:
    assert keyword_margin({"diff": {"a": 10.0, "b": 6.0}, "dense": {"b": 0.9}}) == pytest.approx(0.4)
    # keyword lanes are summed as score fusion sums them (each / its max); the dense lane is left out
    both = {"diff": {"a": 10.0, "b": 5.0}, "message": {"b": 2.0, "a": 1.0}}
    assert keyword_margin(both) == pytest.approx((1.5 - 1.5) / 1.5)
    assert keyword_margin(both, {"diff": 1.0, "message": 0.0}) == pytest.approx(0.5)
    assert keyword_margin({"diff": {"a": 3.0}}) == 1.0
    assert keyword_margin({"diff": {}, "dense": {"a": 0.5}}) == 0.0


def test_margin_weights_scale_the_dense_lane_by_keyword_indecision() -> None:
    w = {"diff": 1.0, "dense": 0.4}
    tie = {"diff": {"a": 5.0, "b": 5.0}, "dense": {"a": 0.3, "b": 0.6}}
    assert margin_weights(tie, w, 0.4) == {"diff": 1.0, "dense": pytest.approx(0.8)}  # margin 0: twice
    assert margin_weights({"diff": {"a": 10.0, "b": 6.0}, "dense": {"a": 0.1}}, w, 0.4)["dense"] == pytest.approx(0.4)
    assert margin_weights({"diff": {"a": 10.0, "b": 1.0}, "dense": {"a": 0.1}}, w, 0.4)["dense"] == 0.0
    assert margin_weights(tie, w, 0.0) == w  # off
    assert margin_weights({"dense": {"a": 0.5}}, w, 0.4) == w  # no keyword lane: nothing to adapt to
    sha_of = {1: "a", 2: "b", 11: "a", 12: "b"}
    rankings = {"diff": [1, 2], "dense": [12, 11]}
    lane_scores = {"diff": {1: 5.0, 2: 4.9}, "dense": {12: 0.5, 11: 0.45}}
    kw = {
        "tie_key": lambda u: (u,),
        "lane_scores": lane_scores,
        "method": "score",
        "weights": {"diff": 1.0, "dense": 0.3},
    }
    fixed = fuse(rankings, sha_of, **kw)  # type: ignore[arg-type]
    adaptive = fuse(rankings, sha_of, margin_ref=0.4, **kw)  # type: ignore[arg-type]
    assert [c.sha for c in fixed] == ["a", "b"]  # 1 + 0.3 x 0.45 > 0.98 + 0.3 x 0.5
    assert [c.sha for c in adaptive] == ["b", "a"]  # a near-tie in BM25: the dense lane decides


def test_size_factor_is_one_plus_alpha_log_hunks() -> None:
    assert size_factor(1, 0.2) == 1.0 and size_factor(0, 0.2) == 1.0
    assert size_factor(148, 0.2) == pytest.approx(2.0, abs=1e-3)
    assert size_factor(500, 0.0) == 1.0


def test_commit_lane_scores_divide_the_best_hunk_by_the_size_factor() -> None:
    ranking = [(1, 8.0), (2, 6.0), (3, 5.0)]
    group = {1: "big", 2: "small", 3: "big"}.__getitem__
    assert commit_lane_scores(ranking, group) == {"big": 8.0, "small": 6.0}
    sizes = {"big": 148}  # factor ~2 at alpha 0.2; "small" is missing: one hunk
    scores = commit_lane_scores(ranking, group, sizes, 0.2)
    assert scores == {"big": pytest.approx(8.0 / (1 + 0.2 * math.log(148))), "small": 6.0}
    assert ranked(scores) == ["small", "big"]
    assert ranked({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "b", "a"]  # ties keep first-seen order


def test_fuse_size_prior_demotes_a_large_commit_in_keyword_lanes_only() -> None:
    sha_of = {1: "big", 2: "one", 3: "big", 4: "one"}
    sizes = {"big": 150, "one": 1}
    lane_scores = {"diff": {1: 10.0, 2: 9.0}, "message": {3: 5.0, 4: 4.0}}
    plain = fuse({"diff": [1, 2]}, sha_of, tie_key=lambda u: (u,), lane_scores=lane_scores, method="score")
    assert [c.sha for c in plain] == ["big", "one"]
    kw = {"tie_key": lambda u: (u,), "lane_scores": lane_scores, "commit_sizes": sizes, "size_prior": 0.2}
    prior = fuse({"diff": [1, 2]}, sha_of, method="score", **kw)  # type: ignore[arg-type]
    assert [c.sha for c in prior] == ["one", "big"]
    assert prior[0].fused == pytest.approx(1.0)  # the best commit after the prior is 1.0, as before
    assert prior[0].lanes == {"diff": 1} and prior[1].lanes == {"diff": 2}
    by_rrf = fuse({"diff": [1, 2]}, sha_of, method="rrf", **kw)  # type: ignore[arg-type]
    assert [c.sha for c in by_rrf] == ["one", "big"]  # RRF ranks follow the adjusted scores too
    message = fuse({"message": [3, 4]}, sha_of, method="score", **kw)  # type: ignore[arg-type]
    assert [c.sha for c in message] == ["big", "one"]  # one message per commit: no size prior


def test_fuse_takes_a_lanes_own_commit_scores() -> None:
    sha_of = {1: "aaa", 2: "bbb", 3: "aaa", 4: "ccc"}
    lane_scores = {"dense": {1: 0.9, 2: 0.5, 3: 0.9, 4: 0.4}}
    centroids = {"dense": {"aaa": 0.3, "bbb": 0.5}}  # "ccc" has no centroid: it gets the lowest given score
    fused = fuse(
        {"dense": [1, 3, 2, 4]}, sha_of, tie_key=lambda u: (u,), lane_scores=lane_scores, method="score",
        commit_scores=centroids,
    )  # fmt: skip
    assert [(c.sha, round(c.fused, 6)) for c in fused] == [("bbb", 0.5), ("aaa", 0.3), ("ccc", 0.3)]
    assert fused[0].lanes == {"dense": 1} and fused[1].hunks == [1, 3]


def test_centroid_scores_average_unit_file_vectors() -> None:
    vectors = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [-1.0, 0.0]], dtype=np.float32)
    rows_of = {"one": [0], "two": [0, 1], "same": [1, 2], "none": [], "cancel": [0, 3]}
    centroids = commit_centroids(rows_of, vectors)
    assert not centroids["cancel"].any() and centroids["two"].dtype == np.float32  # files that cancel out: zero
    scores = score_centroids(np.array([1.0, 0.0]), centroids)
    assert scores["one"] == pytest.approx(1.0)  # a one-file commit scores its file's cosine
    assert scores["two"] == pytest.approx(math.sqrt(0.5), abs=1e-6)  # centre (0.5, 0.5) after normalising rows
    assert scores["same"] == pytest.approx(0.0) and "none" not in scores
    assert list(scores) == sorted(scores)


def test_a_centroid_is_the_same_to_the_bit_alone_or_among_others() -> None:
    # the search keeps only recently used centroids: one computed again must not move a score
    vectors = np.random.default_rng(7).standard_normal((40, 384)).astype(np.float32)
    rows_of = {f"c{i:02d}": list(range(i, min(i + 1 + i % 5, 40))) for i in range(40)}
    together = commit_centroids(rows_of, vectors)
    for sha, rows in rows_of.items():  # alone: a matrix of its own rows only, as a cold search fetches them
        alone = commit_centroids({sha: list(range(len(rows)))}, vectors[rows])[sha]
        assert alone.tobytes() == together[sha].tobytes()


def test_best_scores_takes_each_groups_first_member() -> None:
    assert best_scores([(1, 5.0), (2, 4.0), (3, 3.0)], lambda u: u % 2) == {1: 5.0, 0: 4.0}


def test_recency_factor() -> None:
    now = 1_000_000_000.0
    assert recency_factor(int(now), now) == pytest.approx(1.05)
    assert recency_factor(int(now - 90 * 86400), now) == pytest.approx(1 + 0.05 * math.exp(-1))
    assert recency_factor(int(now + 86400), now) == pytest.approx(1.05)
    assert recency_factor(int(now), now, weight=0.0) == 1.0
    assert apply_recency(2.0, 1.05) == pytest.approx(2.1)
    assert apply_recency(-2.0, 1.05) > -2.0


def test_parse_when() -> None:
    now = dt.datetime(2024, 5, 10, tzinfo=dt.timezone.utc)
    assert parse_when("2024-05-01", now) == int(dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc).timestamp())
    assert parse_when("2024-05-01", now, end_of_day=True) == parse_when("2024-05-02", now) - 1
    assert parse_when("2024-05-01T12:00:00Z", now) == parse_when("2024-05-01T14:00:00+02:00", now)
    assert parse_when("30d", now) == int((now - dt.timedelta(days=30)).timestamp())
    assert parse_when("2w", now) == int((now - dt.timedelta(days=14)).timestamp())
    with pytest.raises(BadDate, match="cannot understand"):
        parse_when("last tuesday", now)


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("*.py", "src/a/b.py", True),
        ("*.py", "src/a/b.pyc", False),
        ("src/*.py", "src/b.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("src/**/*.py", "src/a/b.py", True),
        ("src/**/*.py", "src/b.py", True),
        ("docs/", "docs/x/y.md", True),
        ("te?t.rs", "lib/test.rs", True),
        ("./.github/workflows/*.yml", ".github/workflows/ci.yml", True),
        ("./src/b.py", "src/b.py", True),
        ("src", "src/a/b.py", True),  # a literal path is also a directory, as in git pathspecs
        ("src", "lib/src/b.py", True),
        ("src", "srcs/b.py", False),
        ("src/a", "src/a/b.py", True),
        ("src/a", "src/ab.py", False),
        ("src/*.py", "src/a.py/x", False),
    ],
)
def test_glob_to_regex(glob: str, path: str, matches: bool) -> None:
    import re

    assert bool(re.fullmatch(glob_to_regex(glob), path)) is matches


def test_identifier_splitting() -> None:
    assert split_identifier("parseHTTPResponse2") == ["parse", "HTTP", "Response", "2"]
    assert split_identifier("MAX_RETRY_COUNT") == ["MAX", "RETRY", "COUNT"]
    assert code_text("getUserName()") == "getUserName get User Name"
    terms = query_terms("Retries with getUserName")
    assert "retri" in terms and "getusernam" in terms and "user" in terms
    assert "with" not in terms


def test_versions_are_tokens_next_to_their_numbers() -> None:
    # "Bump tox from 3.23.1 to 3.24.1" must prefer the diff with "tox==3.24.1", not any 3, 24 and 1
    assert code_text("tox==3.24.1\n") == "tox 3.24.1 3 24 1"
    assert code_text("x = 1.5 + y2.0") == "x 1.5 1 5 y2 y 2 0"  # only a leading number starts a version
    terms = query_terms("Bump tox from 3.23.1 to 3.24.1")
    assert terms[:4] == ["bump", "tox", "from", "3.23.1"] and "3.24.1" in terms and "24" in terms
    assert code_text("version 2.0.") == "version 2.0 2 0"
