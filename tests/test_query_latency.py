"""The search-latency command (``backstory.evaluation.query_latency``) on a small indexed history: rounds run in
fresh processes, each importing the checkout it is given, and their results are compared. No time is asserted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backstory.evaluation.query_latency import SERVER, main, summary
from backstory.index.build import index_repository
from gitrepo import GitRepo


def test_rounds_alternate_checkouts_and_compare_their_results(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    for i in range(8):
        repo.commit(f"Teach the parser rule number {i}", {f"rules/r{i}.py": f"def rule_{i}(tokens):\n    return {i}\n"})
    index_repository(repo.path)
    other = tmp_path / "other"  # another checkout: a copy of this one's server/
    shutil.copytree(SERVER, other / "server", ignore=shutil.ignore_patterns("__pycache__"))
    own = tmp_path / "own-index"  # and its own copy of the index
    shutil.copytree(repo.path / ".git" / "backstory", own)
    out = tmp_path / "latency.json"
    args = ["--queries", "5", "--rounds", "2", "--compare", str(other), "--compare-index-dir", str(own)]
    args += ["--stage-rounds", "1"]
    assert main([str(repo.path), *args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["index_dirs"] == {"this checkout": None, "compared": str(own.resolve())}
    used = {arm: {r["index"] for r in rounds} for arm, rounds in report["rounds"].items()}
    assert used == {
        "compared": {str(own.resolve())},
        "this checkout": {str((repo.path / ".git" / "backstory").resolve())},
    }
    imported = {arm: {r["imported"] for r in rounds} for arm, rounds in report["rounds"].items()}
    assert imported == {"compared": {str((other / "server").resolve())}, "this checkout": {str(SERVER)}}
    assert all(len(rounds) == 2 for rounds in report["rounds"].values())
    assert report["results_identical_across_arms"], "the same code on the same index answers alike"
    for stages in report["stage_rounds_ms"].values():
        (timed,) = stages
        assert {"whole search", "keyword lane diff", "message lane (one document a commit)"} <= set(timed)
        assert 0 < timed["keyword lane diff"] < timed["whole search"]
    for arm in report["summary"].values():
        assert arm["rounds_identical"] and 0 < arm["p50_ms_median_of_rounds"] <= arm["p95_ms_median_of_rounds"]


def test_the_summary_is_the_median_of_rounds_and_notices_different_results() -> None:
    rounds = [
        {"p50_ms": 40.0, "p95_ms": 70.0, "results_sha256": "a"},
        {"p50_ms": 60.0, "p95_ms": 90.0, "results_sha256": "a"},
        {"p50_ms": 50.0, "p95_ms": 80.0, "results_sha256": "b"},
    ]
    s = summary(rounds)
    assert (s["p50_ms_median_of_rounds"], s["p95_ms_median_of_rounds"]) == (50.0, 80.0)
    assert s["p50_ms_range"] == [40.0, 60.0] and not s["rounds_identical"]


def test_a_round_that_fails_stops_with_its_error(tmp_path: Path) -> None:
    """Not a repository: the round's own error is shown, no report is written."""
    out = tmp_path / "latency.json"
    with pytest.raises(SystemExit, match="a round failed"):
        main([str(tmp_path), "--queries", "3", "--rounds", "1", "--out", str(out)])
    assert not out.exists()
