"""The final score: a calibrated probability over the candidates, recency only within a band of equal relevance,
identical changes shown once, and a warning for a query with nothing to match."""

from __future__ import annotations

import math
from pathlib import Path

from backstory.index.build import index_repository
from backstory.search import learned
from backstory.search.engine import Engine
from backstory.search.features import FEATURES
from backstory.search.options import ModelConfig, SearchOptions
from backstory.search.ordering import deciding
from backstory.search.recency import calibrated, recency_factor
from backstory.search.results import collapse_twins
from gitrepo import GitRepo

NO_MODELS = ModelConfig(dense=False, reranker="none")


def test_calibrated_is_a_softmax_that_recency_multiplies() -> None:
    p = calibrated({"a": 2.0, "b": 0.0, "c": -1.0}, {"a": 1.0, "b": 1.0, "c": 1.0})
    assert math.isclose(sum(p.values()), 1.0, abs_tol=1e-8)
    assert p["a"] > p["b"] > p["c"] > 0
    assert math.isclose(p["a"] / p["b"], math.exp(2.0), rel_tol=1e-6)
    boosted = calibrated({"a": 2.0, "b": 0.0}, {"a": 1.0, "b": 1.05})
    assert math.isclose(boosted["b"] / boosted["a"], 1.05 * math.exp(-2.0), rel_tol=1e-6)


def test_recency_reorders_only_a_band_of_equal_relevance() -> None:
    old, new = 0, 10 * 86400
    now = new + 86400
    f_old, f_new = recency_factor(old, now), recency_factor(new, now)
    assert f_new > f_old
    # equal relevance: the newer commit wins
    tie = calibrated({"old": 3.0, "new": 3.0}, {"old": f_old, "new": f_new})
    assert tie["new"] > tie["old"]
    # a clearly better old match stays ahead, however saturated a logistic of these scores would be
    clear = calibrated({"old": 12.0, "new": 11.0}, {"old": f_old, "new": f_new})
    assert clear["old"] > clear["new"]
    assert 1 / (1 + math.exp(-12.0)) * f_old < 1 / (1 + math.exp(-11.0)) * f_new  # what the old order did


def test_deciding_names_the_features_that_lifted_a_candidate() -> None:
    n = len(FEATURES)
    weights = tuple(2.0 if f in ("maxsim", "fused") else 0.0 for f in FEATURES)
    model = learned.LinearRanker("t", FEATURES, (0.0,) * n, (1.0,) * n, weights)
    i, j = FEATURES.index("maxsim"), FEATURES.index("fused")
    rows = [[0.0] * n for _ in range(3)]
    rows[0][i] = 1.0  # lifted by MaxSim
    rows[1][j] = 1.0  # lifted by the fused score
    out = deciding(model, rows)
    assert out[0] == ["maxsim"] and out[1] == ["fused"] and out[2] == []
    assert model.linear(rows) == [2.0, 2.0, 0.0]


def test_collapse_twins_keeps_the_best_ranked_and_lists_the_others() -> None:
    order = ["a", "b", "c", "d", "e"]
    sig = {"a": "x", "b": "y", "c": "x", "d": "x"}  # e has no indexed hunks: never a twin
    assert collapse_twins(order, sig) == [("a", ["c", "d"]), ("b", []), ("e", [])]


def test_a_cherry_pick_is_shown_once_with_its_twin(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {"net.py": "def fetch(url):\n    return get(url)\n", "README": "x\n"})
    repo.git("checkout", "-q", "-b", "release")
    repo.commit("Unrelated release note", {"README": "release\n"})
    repo.git("checkout", "-q", "main")
    fix = repo.commit(
        "Retry fetch on connection reset",
        {"net.py": "def fetch(url):\n    for _ in range(3):\n        try:\n            return get(url)\n"
         "        except ConnectionResetError:\n            pass\n"},
    )  # fmt: skip
    repo.git("checkout", "-q", "release")
    repo.git("cherry-pick", "-x", fix)
    pick = repo.git("rev-parse", "HEAD").strip()
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge release", "release")
    index_repository(repo.path)
    with Engine(repo.path, models=NO_MODELS) as engine:
        hits = engine.search("retry fetch when the connection is reset", SearchOptions(rerank=False))["results"]
    shas = [h["commit"]["sha"] for h in hits]
    assert len({fix, pick} & set(shas)) == 1, "the twins are one hit"
    top = hits[0]
    assert {top["commit"]["sha"], *(t["sha"] for t in top["twins"])} == {fix, pick}


def test_change_signatures_read_only_commits_of_a_shared_shape(tmp_path: Path) -> None:
    """Digests are equal for the same change; a commit whose paths and hunk counts no other shares gets none
    (it cannot have a twin), and one of the same shape with other lines gets a different one."""
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {"a.py": "x = 1\n", "b.py": "y = 1\n"})
    fix = repo.commit("Change a", {"a.py": "x = 2\n"})
    repo.commit("Take it back", {"a.py": "x = 1\n"})
    picked = repo.commit("Change a once more", {"a.py": "x = 2\n"})
    other = repo.commit("Change a again", {"a.py": "x = 3\n"})
    alone = repo.commit("Change b", {"b.py": "y = 2\n"})
    index_repository(repo.path)
    with Engine(repo.path, models=NO_MODELS) as engine:
        sig = engine.catalog.change_signatures([fix, picked, other, alone, "0" * 40])
    assert set(sig) == {fix, picked, other}
    assert sig[fix] == sig[picked] != sig[other]


def test_a_query_without_content_words_is_warned_about(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit("Add parser", {"p.py": "def parse(text):\n    return text.split()\n"})
    index_repository(repo.path)
    with Engine(repo.path, models=NO_MODELS) as engine:
        empty = engine.search("the and of", SearchOptions(rerank=False))
        real = engine.search("split the text", SearchOptions(rerank=False))
    assert any("no words to match" in w for w in empty["_meta"]["warnings"])
    assert not any("no words to match" in w for w in real["_meta"]["warnings"])
