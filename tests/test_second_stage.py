"""The learned second stage: its features (pure arithmetic, and gathered from a real catalogue) and its model
file (the bundled one, and every way a user-provided one can be wrong)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from backstory.history.repo import open_repo
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.catalog import Catalog
from backstory.search import features, learned
from backstory.search.engine import Engine
from backstory.search.features import FEATURES, CommitText, QueryInfo, feature_row
from backstory.search.options import ModelConfig
from gitrepo import GitRepo

HELD_OUT = {"jinja", "commander.js", "bat"}  # docs/benchmarks.md reports these as never trained on


def f(row: list[float], name: str) -> float:
    return row[FEATURES.index(name)]


def test_identifiers_are_the_query_words_that_look_like_code() -> None:
    got = features.identifiers("Fix TracebackFrameProxy.set_next() on Python 3.7 for `make_attrgetter`, camelCase")
    assert got == ("TracebackFrameProxy.set_next", "3.7", "make_attrgetter", "camelCase")
    assert features.identifiers("Clarified the loop docs") == ()


def test_identifiers_match_verbatim_not_inside_longer_names_or_numbers() -> None:
    assert features.verbatim("set_next", "frame.set_next(tb)") and features.verbatim("3.7", "python_requires >= 3.7")
    assert not features.verbatim("set_next", "reset_next()") and not features.verbatim("set_next", "set_next_frame")
    assert not features.verbatim("3.7", "13.7") and not features.verbatim("3.7", "3.70")
    assert not features.verbatim("3.7", "3.7.1")
    assert features.verbatim("LRUCache.copy", "self.LRUCache.copy()") and features.verbatim("a.b", "end a.b.")


def test_token_cache_keeps_the_most_recently_used(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    shas = [repo.commit(f"c{i}", {f"f{i}.py": f"v{i} = {i}\n"}) for i in range(3)]
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    db = Catalog.of(store_for(open_repo(repo.path)))
    cache = features.TokenCache(size=2)
    first = cache.get(db, shas[0])
    cache.get(db, shas[1])
    assert cache.get(db, shas[0]) is first  # a hit, and now the most recent
    cache.get(db, shas[2])  # evicts shas[1], the least recently used
    assert len(cache) == 2 and cache.get(db, shas[0]) is first
    q = features.query_info("v0 value", lambda t: 1, 10)
    assert features.gather(db, shas, q, cache) == features.gather(db, shas, q)  # the cache never changes results
    cache.clear()
    assert len(cache) == 0
    features.gather(db, shas[:2], q, cache)  # an empty cache is filled too
    assert len(cache) == 2


def test_bm25_of_one_document() -> None:
    # one occurrence in a document of average length scores exactly the idf
    assert features.bm25({"retry": 1}, {"retry": 2.0}, int(features.BM25_AVG_LEN)) == pytest.approx(2.0)
    # saturation: ten occurrences score less than ten times one; a longer document scores less
    assert features.bm25({"retry": 10}, {"retry": 2.0}, 200) < 10 * 2.0
    assert features.bm25({"retry": 1}, {"retry": 2.0}, 2000) < features.bm25({"retry": 1}, {"retry": 2.0}, 20)
    assert features.bm25({"retry": 0}, {"retry": 2.0}, 20) == 0.0


def test_feature_row_arithmetic() -> None:
    q = QueryInfo(
        terms=("retri", "backoff"), all_terms=("add", "retri", "backoff"),
        idf={"add": 0.1, "retri": 3.0, "backoff": 1.0}, identifiers=("time.sleep", "3.7"),
    )  # fmt: skip
    ct = CommitText(n_hunks=3, files=["net/retry.py", "CHANGES.rst"])
    ct.tf["add"] = {"retri": 2}
    ct.tf["rem"] = {"backoff": 1}
    ct.length = {"add": 8, "rem": 2}
    ct.seen = {"retri", "backoff"}
    ct.seen_names = {"retri"}
    ct.identifiers = {"time.sleep"}
    row = feature_row(q, ct, fused=1.5, maxsim=0.6, centroid=0.4, dense_rank=1)
    assert len(row) == len(FEATURES)
    assert (f(row, "fused"), f(row, "maxsim"), f(row, "centroid")) == (1.5, 0.6, 0.4)
    assert f(row, "log_hunks") == pytest.approx(math.log(4)) and f(row, "log_files") == pytest.approx(math.log(3))
    assert f(row, "cover") == 1.0 and f(row, "cover_names") == pytest.approx(0.75)
    assert f(row, "cover_removed") == pytest.approx(0.25)
    assert f(row, "docs_share") == 0.5 and f(row, "docs_only") == 0.0
    assert f(row, "dense_rank") == 0.5
    assert f(row, "identifiers") == 0.5
    assert f(row, "log_changed") == pytest.approx(math.log(11)) and f(row, "added_share") == pytest.approx(9 / 12)
    assert f(row, "bm25_changed") > 0
    absent = feature_row(q, CommitText(n_hunks=1, files=["docs/a.md"]), 0.0, 0.0, 0.0, None)
    assert f(absent, "dense_rank") == 0.0 and f(absent, "docs_only") == 1.0 and f(absent, "cover") == 0.0
    # no intent in this query: the products are zero whatever the commit did
    assert all(f(row, name) == 0.0 for name in ("add_x_added", "remove_x_removed", "docs_x_docs", "tests_x_tests"))


def test_query_intent_meets_what_the_commit_did() -> None:
    def q(text: str) -> QueryInfo:
        return features.query_info(text, lambda t: 1, 10)

    assert (q("Add retry to the client").intent, q("Removed the old parser").intent) == ("add", "remove")
    assert q("Fix the docs typo").intent == "fix" and q("Fix the docs typo").about_docs
    assert q("Update the parser").intent is None
    assert [q(s).intent for s in ("Fix: typo", "fixed a crash", "prefix the keys")] == ["fix", "fix", None]
    assert q("more tests for the lexer").about_tests and not q("more tests for the lexer").about_docs
    ct = CommitText(n_hunks=2, files=["tests/test_a.py", "README.md"])
    ct.length = {"add": 9, "rem": 1}
    added = f(feature_row(q("Add a cache"), ct, 0, 0, 0, None), "add_x_added")
    assert added == pytest.approx(10 / 12) and added == f(feature_row(q("x"), ct, 0, 0, 0, None), "added_share")
    assert f(feature_row(q("Remove a cache"), ct, 0, 0, 0, None), "remove_x_removed") == pytest.approx(2 / 12)
    assert f(feature_row(q("Update the README docs"), ct, 0, 0, 0, None), "docs_x_docs") == 0.5
    assert f(feature_row(q("Test the cache"), ct, 0, 0, 0, None), "tests_x_tests") == 0.5
    fix, other = feature_row(q("fixed a crash"), ct, 0.7, 0, 0, None), feature_row(q("crash"), ct, 0.7, 0, 0, None)
    assert (f(fix, "fix_x_changed"), f(fix, "fix_x_fused")) == (pytest.approx(math.log1p(10)), 0.7)
    assert f(other, "fix_x_changed") == f(other, "fix_x_fused") == 0.0


def test_gather_counts_query_terms_by_line_kind_in_a_real_catalogue(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {"jobs/poll.py": "import time\n\ndef poll(job):\n    return job.result()\n"})
    sha = repo.commit(
        "Back off",
        {"jobs/poll.py": "import time\n\ndef poll(job):\n    time.sleep(1)\n    return job.result()\n"},
    )
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    store = store_for(open_repo(repo.path))
    q = features.query_info("use time.sleep in poll", lambda t: 1, 10)
    assert q.identifiers == ("time.sleep",)
    ct = features.gather(Catalog.of(store), [sha], q)[sha]
    assert ct.n_hunks == 1 and ct.files == ["jobs/poll.py"]
    assert ct.tf["add"].get("sleep") == 1 and not ct.tf["rem"]
    assert "poll" in ct.seen and "poll" not in ct.tf["add"]  # the def line is context
    assert "poll" in ct.seen_names  # the path and the touched symbol
    assert ct.identifiers == {"time.sleep"}
    assert ct.length["add"] > 0 and ct.length["rem"] == 0


def test_linear_ranker_scores_the_logistic_of_standardised_features() -> None:
    n = len(FEATURES)
    ranker = learned.LinearRanker("t", FEATURES, (1.0,) * n, (2.0,) * n, (1.0,) + (0.0,) * (n - 1), bias=0.5)
    rows = [[1.0] * n, [3.0] + [9.0] * (n - 1), [-1e9] + [0.0] * (n - 1)]
    got = ranker.score(rows)
    assert got[0] == pytest.approx(1 / (1 + math.exp(-0.5)))
    assert got[1] == pytest.approx(1 / (1 + math.exp(-1.5)))
    assert 0.0 <= got[2] < 1e-20  # clipped, no overflow
    assert learned.parse(ranker.to_json()) == ranker


@pytest.mark.parametrize("messages", [False, True])
def test_bundled_models_load_and_were_not_trained_on_the_held_out_histories(messages: bool) -> None:
    model = learned.load(messages=messages)
    name = learned.MODEL_FILES[messages]
    data = json.loads((Path(learned.__file__).parents[1] / "models" / "data" / name).read_text())
    assert data["trained_on"] and not HELD_OUT & set(data["trained_on"]) and data["messages"] is messages
    assert model.weights[model.features.index("maxsim")] > 0 and model.weights[model.features.index("fused")] > 0
    # a message-blind index has no message features to learn from; with messages they are what matters most
    assert ("cover_message" in model.features) is messages


def test_a_model_reads_its_own_subset_of_the_features_in_its_own_order() -> None:
    ranker = learned.LinearRanker("t", ("maxsim", "fused"), (0.0, 0.0), (1.0, 1.0), (2.0, 1.0))
    row = [0.0] * len(FEATURES)
    row[FEATURES.index("fused")], row[FEATURES.index("maxsim")] = 0.5, 0.25
    assert ranker.score([row]) == [pytest.approx(1 / (1 + math.exp(-1.0)))]  # 2 x 0.25 + 1 x 0.5
    assert learned.parse(ranker.to_json()) == ranker


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "unreadable"),
        ("not json", "unreadable"),
        ("[1, 2]", "not a JSON object"),
        ('{"name": "x"}', "malformed"),
        ("UNKNOWN", "expects features"),
        ("TWICE", "expects features"),
        ("ZERO_SCALE", "non-positive scale"),
        ("NAN_WEIGHT", "non-finite"),
        ("SHORT", "one value per feature"),
    ],
)
def test_a_broken_model_file_says_what_is_wrong(tmp_path: Path, content: str | None, message: str) -> None:
    good = learned.load().to_json()
    n = len(good["features"])
    variants = {
        "UNKNOWN": {**good, "features": ["fused", "vibes", *good["features"][2:]]},
        "TWICE": {**good, "features": ["fused", "fused", *good["features"][2:]]},
        "ZERO_SCALE": {**good, "scale": [0.0] * n},
        "NAN_WEIGHT": {**good, "weights": [float("nan")] * n},
        "SHORT": {**good, "mean": [0.0] * (n - 1)},
    }
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(json.dumps(variants[content]) if content in variants else content)
    with pytest.raises(learned.SecondStageUnavailable, match=message):
        learned.load(path)


def test_a_rebuild_forgets_the_engines_cached_commit_text(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    sha = repo.commit("Start", {"a.py": "x = 1\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    with Engine(repo.path, models=ModelConfig(dense=False, reranker="none")) as engine:
        engine.freshness()
        engine.ordering.texts.get(engine.catalog, sha)
        engine.freshness()  # same index: kept
        assert len(engine.ordering.texts) == 1
        index_repository(repo.path, options=BuildOptions(no_messages=True), rebuild=True)
        engine.freshness()  # another generation: excerpts may differ now
        assert len(engine.ordering.texts) == 0


@pytest.mark.parametrize("no_messages", [True, False])
def test_message_features_only_where_the_index_holds_messages(tmp_path: Path, no_messages: bool) -> None:
    """A message-blind index must not learn from messages through the second stage either; with messages, the
    message lane's rank and the query's coverage of the subject and body are features."""
    from backstory.search.fusion import FusedCommit

    repo = GitRepo(tmp_path / "r")
    sha = repo.commit("Retry flaky uploads with exponential backoff", {"net.py": "def send(x):\n    return x\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=no_messages))
    with Engine(repo.path, models=ModelConfig(dense=False, reranker="none")) as engine:
        top = [FusedCommit(sha, 1.0, {"diff": 1, "message": 2, "message_dense": 3})]  # even if message ranks reached it
        (row,) = engine.candidate_features("retry uploads with backoff", top, {}, {"message_dense": {sha: 0.42}})
    if no_messages:
        assert all(f(row, name) == 0.0 for name in features.MESSAGE_FEATURES)
    else:
        assert f(row, "message_rank") == pytest.approx(1 / 3) and f(row, "cover_message") == 1.0
        assert f(row, "message_cosine") == 0.42 and f(row, "message_dense_rank") == 0.25
        assert 0.5 < f(row, "subject_match") < 1.0  # the subject's "flaky" and "exponential" are not in the query


def test_message_cosine_is_the_lanes_floor_outside_its_top_and_zero_without_the_lane(tmp_path: Path) -> None:
    """A candidate the message lane did not return counts its lowest cosine, as fusion does; without the lane (no
    message vectors yet) every candidate has 0."""
    from backstory.search.fusion import FusedCommit

    repo = GitRepo(tmp_path / "r")
    a = repo.commit("Retry uploads with backoff", {"net.py": "def send(x):\n    return retry(x)\n"})
    b = repo.commit("Parse headers lazily", {"http.py": "def headers(raw):\n    return dict(raw)\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=False))
    with Engine(repo.path, models=ModelConfig(dense=False, reranker="none")) as engine:
        top = [FusedCommit(a, 1.2, {"diff": 1, "message_dense": 1}), FusedCommit(b, 0.7, {"diff": 2})]
        lane = {"message_dense": {a: 0.61, "0" * 40: 0.18}, "dense": {b: 0.3}}
        rows = engine.candidate_features("retry the upload", top, {}, lane, needed=features.WITHOUT_HUNKS)
        without = engine.candidate_features("retry the upload", top, {}, {"dense": {b: 0.3}})
    assert [f(r, "message_cosine") for r in rows] == [0.61, 0.18]
    assert [f(r, "message_dense_rank") for r in rows] == [0.5, 0.0]
    assert [f(r, "centroid") for r in rows] == [0.0, 0.3]  # the dense lane's own scores still reach "centroid"
    assert [f(r, "message_cosine") for r in without] == [0.0, 0.0]


def test_the_message_blind_model_reads_no_message_feature_and_scores_by_name() -> None:
    """Features are appended to FEATURES as they are added; a model maps its own by name, so the message-blind
    model reads the same columns whatever comes after them (its scores cannot move when FEATURES grows)."""
    model = learned.load(messages=False)
    assert not set(model.features) & set(features.MESSAGE_FEATURES)
    row = [float(i) for i in range(len(FEATURES))]
    extended = [*row, 123.0]  # a longer row: only the named columns are read
    assert model.linear([row]) == model.linear([extended])


def test_message_cover_weighs_terms_by_idf_and_counts_change_verbs() -> None:
    idf = {"add": 1.0, "retri": 2.0, "backoff": 1.0}
    q = QueryInfo(terms=("retri",), all_terms=("add", "retri", "backoff"), idf=idf, identifiers=())
    ct = CommitText(n_hunks=1, files=["a.py"], seen_message={"add", "retri"})
    assert f(feature_row(q, ct, 0, 0, 0, None, message_rank=1), "cover_message") == pytest.approx(0.75)
    assert f(feature_row(q, ct, 0, 0, 0, None, message_rank=1), "message_rank") == 0.5
    assert f(feature_row(q, ct, 0, 0, 0, None), "message_rank") == 0.0
    lane = feature_row(q, ct, 0, 0, 0, None, message_cosine=0.37, message_dense_rank=4)
    assert (f(lane, "message_cosine"), f(lane, "message_dense_rank")) == (0.37, 0.2)
    assert (
        f(feature_row(q, ct, 0, 0, 0, None), "message_cosine")
        == f(feature_row(q, ct, 0, 0, 0, None), "message_dense_rank")
        == 0.0
    )


def test_subject_match_is_the_share_of_terms_the_query_and_the_subject_have_in_common() -> None:
    """1 for a query that is the subject (a pull-request title copied from a commit), less for a subject with
    other words or a query with words the subject lacks, 0 without a subject (message-blind: none is read)."""
    idf = {"fix": 1.0, "retri": 2.0, "upload": 1.0}
    q = QueryInfo(terms=("retri", "upload"), all_terms=("fix", "retri", "upload"), idf=idf, identifiers=())

    def match(subject: set[str]) -> float:
        return f(
            feature_row(q, CommitText(n_hunks=1, files=["a.py"], subject=frozenset(subject)), 0, 0, 0, None),
            "subject_match",
        )

    assert match({"fix", "retri", "upload"}) == 1.0
    assert match({"fix", "retri", "upload", "backoff"}) == 0.75
    assert match({"retri", "upload"}) == pytest.approx(2 / 3)
    assert match(set()) == 0.0


def test_a_model_reading_no_hunk_features_gets_the_same_scores_without_reading_hunks(tmp_path: Path) -> None:
    """A model that reads scores, ranks and the message only skips the hunks in its rows (the costly part) — and
    must score exactly as from full rows. (The with-messages model read only these until it was refitted on
    natural questions: it reads hunk features now, as the message-blind one does.)"""
    from backstory.search.fusion import FusedCommit

    repo = GitRepo(tmp_path / "r")
    a = repo.commit("Retry uploads with backoff", {"net.py": "def send(x):\n    return retry(x)\n"})
    b = repo.commit("Parse headers lazily", {"http.py": "def headers(raw):\n    return dict(raw)\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=False))
    names = tuple(sorted(features.WITHOUT_HUNKS))
    n = len(names)
    model = learned.LinearRanker("light", names, (0.0,) * n, (1.0,) * n, tuple(0.1 * (i + 1) for i in range(n)))
    with Engine(repo.path, models=ModelConfig(dense=False, reranker="none")) as engine:
        top = [FusedCommit(a, 1.2, {"diff": 1, "message": 1}), FusedCommit(b, 0.7, {"diff": 2})]
        rerank = {a: 0.6, b: 0.3}
        full = engine.candidate_features("retry the upload", top, rerank, {})
        assert len(engine.ordering.texts) == 2
        engine.ordering.texts.clear()
        light = engine.candidate_features("retry the upload", top, rerank, {}, needed=model.features)
        assert len(engine.ordering.texts) == 0  # no hunks read, nothing cached
        # every feature said to need no hunks comes out the same without them (a "fix" query sets the fix ones)
        fix_full = engine.candidate_features("fix the upload retry", top, rerank, {})
        fix_light = engine.candidate_features("fix the upload retry", top, rerank, {}, needed=features.WITHOUT_HUNKS)
        for name in features.WITHOUT_HUNKS:
            assert [f(r, name) for r in fix_light] == [f(r, name) for r in fix_full], name
        assert f(fix_full[0], "fix_x_fused") == 1.2 and f(fix_full[0], "fix_x_changed") > 0
    assert model.score(light) == model.score(full)
    assert f(full[0], "log_files") > 0 and f(light[0], "log_files") == 0.0  # hunk statistics: not computed
    assert f(light[0], "cover_message") > 0 and f(light[1], "cover_message") == 0.0


def test_candidates_add_the_dense_lanes_top_commits_that_fusion_left_below_the_top() -> None:
    from backstory.search.fusion import FusedCommit
    from backstory.search.options import SearchOptions
    from backstory.search.second_stage import candidates

    dense_rank = {3: 1, 25: 2, 30: 9, 31: 11, 35: 10}  # fused position -> dense lane rank
    fused = [FusedCommit(f"c{i:02d}", 1 - i / 100, {"dense": r} if (r := dense_rank.get(i)) else {}) for i in range(50)]
    got = [c.sha for c in candidates(fused, SearchOptions(rerank_top=20, dense_pool=10))]
    assert got == [f"c{i:02d}" for i in range(20)] + ["c25", "c30", "c35"]  # fused order; rank 11 is not in the top 10
    assert len(candidates(fused, SearchOptions(rerank_top=20, dense_pool=0))) == 20
    # k above rerank_top: the fused top k, then the dense extras below it
    assert [c.sha for c in candidates(fused, SearchOptions(k=30, rerank_top=20))][30:] == ["c30", "c35"]
    assert [c.sha for c in candidates(fused, SearchOptions(k=5, rerank=False))] == [f"c{i:02d}" for i in range(5)]
