"""Exact history honours the project's ignore-revs files, like ``git blame --ignore-revs-file``: formatting-only
commits are followed through but not listed, and counted."""

from __future__ import annotations

import json
from pathlib import Path

from backstory.features.exact_history import symbol_history
from backstory.features.locate import Position
from backstory.index.build import index_repository
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig
from gitrepo import GitRepo
from test_cli import ok

NO_MODELS = ModelConfig(dense=False, reranker="none")
V1 = "def area(w, h):\n    return w*h\n"
V2 = "def area(w, h):\n    return w * h\n"  # formatting only
V3 = "def area(w, h):\n    return abs(w * h)\n"


def _history(tmp_path: Path) -> tuple[GitRepo, dict[str, str]]:
    repo = GitRepo(tmp_path / "r")
    shas = {
        "add": repo.commit("Add area", {"geo.py": V1}),
        "fmt": repo.commit("Reformat with black", {"geo.py": V2}),
        "fix": repo.commit("Area is never negative", {"geo.py": V3}),
    }
    return repo, shas


def test_conventional_file_skips_and_counts(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    repo.commit("List formatting commits", {".git-blame-ignore-revs": f"# black\n{shas['fmt']}\n"})
    index_repository(repo.path)
    with Engine(repo.path, models=NO_MODELS) as engine:
        result = symbol_history(engine, Position("geo.py", 2))
    assert [c["commit"]["subject"] for c in result["commits"]] == ["Area is never negative", "Add area"]
    assert [s["sha"] for s in result["skipped"]] == [shas["fmt"]]
    assert result["message"] == "1 formatting commit skipped (listed in the repository's ignore-revs file)"


def test_configured_file_with_an_abbreviation_and_the_cli(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    (repo.path / "revs.txt").write_text(f"{shas['fmt'][:10]}  # formatting\n")
    repo.git("config", "blame.ignoreRevsFile", "revs.txt")
    index_repository(repo.path)
    result = json.loads(ok("history", "geo.py:2", "-C", str(repo.path), "--json"))
    assert [c["commit"]["sha"] for c in result["commits"]] == [shas["fix"], shas["add"]]
    assert [s["sha"] for s in result["skipped"]] == [shas["fmt"]]
    text = ok("history", "geo.py:2", "-C", str(repo.path), "--color", "never")
    assert f"1 formatting commit skipped (listed in the repository's ignore-revs file): {shas['fmt'][:7]}" in text


def test_without_an_ignore_file_every_commit_is_listed(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    index_repository(repo.path)
    with Engine(repo.path, models=NO_MODELS) as engine:
        result = symbol_history(engine, Position("geo.py", 2))
    assert [c["commit"]["sha"] for c in result["commits"]] == [shas["fix"], shas["fmt"], shas["add"]]
    assert result["skipped"] == [] and result["message"] is None
