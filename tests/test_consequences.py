"""What became of a commit (index/relations.py): reverted (by message, by inverse patch), re-applied, fixed,
cherry-picked (by trailer, by the same patch on another branch); shown in search results and exact history."""

from __future__ import annotations

import json
import re

from backstory.features.exact_history import symbol_history
from backstory.features.locate import Position
from backstory.index.build import BuildOptions, index_repository
from backstory.index.relations import patch_ids, references
from backstory.search.engine import Engine
from backstory.search.options import SearchOptions
from gitrepo import BASE_TIME, GitRepo
from test_cli import ok

NO_DENSE = BuildOptions()


def fates(engine: Engine, sha: str) -> list[tuple[str, str]]:
    return engine.catalog.consequences([sha]).get(sha, [])


def at(days: int) -> dict[str, str]:
    when = f"{BASE_TIME + days * 86400} +0000"
    return {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}


def revert(repo: GitRepo, sha: str, days: int) -> str:
    repo.git("revert", "--no-edit", sha, env=at(days))
    return repo.head()


def index(repo: GitRepo) -> None:
    index_repository(repo.path)


def test_message_rules() -> None:
    assert references('Revert "x"', "This reverts commit 0123456789abcdef.") == [("reverts", "0123456789abcdef")]
    assert references("Fix it", 'Fixes: abcdef1 ("Add x")') == [("fixes", "abcdef1")]
    assert references("Fix regression from 1234567890", "") == [("fixes", "1234567890")]
    assert references("x", "(cherry picked from commit fedcba9876543210)") == [("cherry-pick-of", "fedcba9876543210")]
    assert references("Fix the 123456 items bug", "fixes #123") == []  # six digits, an issue number: no sha


def test_patch_id_inverse_and_whitespace() -> None:
    forward = patch_ids([("a.py", "a.py", [("2=1-1+2=", ["x = 1", "x = 2"])])])
    inverse = patch_ids([("a.py", "a.py", [("2=1-1+2=", ["x = 2", "x = 1"])])])
    spaced = patch_ids([("a.py", "a.py", [("1=1-1+", ["x  =  1", "x = 2"])])])
    assert forward is not None and inverse is not None
    assert forward[1] == inverse[0] and forward[0] == inverse[1]
    assert spaced == forward  # context and whitespace do not count, as in git patch-id
    assert patch_ids([("a.py", "a.py", [("1-1+", ["only one line: capped"])])]) is None


def test_revert_by_message_then_reapplied_incrementally(repo: GitRepo) -> None:
    repo.commit("start", {"net.py": "def fetch(url):\n    return get(url)\n"})
    feature = repo.commit("Add a timeout", {"net.py": "def fetch(url):\n    return get(url, timeout=5)\n"})
    repo.commit("Unrelated", {"README": "hello\n"})
    index(repo)
    with Engine(repo.path) as engine:
        assert fates(engine, feature) == []
    reverted = revert(repo, feature, 10)
    index(repo)  # incremental: only the revert is new
    with Engine(repo.path) as engine:
        assert fates(engine, feature) == [("reverted", reverted)]
    again = revert(repo, reverted, 20)
    index(repo)
    with Engine(repo.path) as engine:
        assert fates(engine, feature) == [("reverted", reverted), ("reapplied", again)]
        assert fates(engine, reverted) == [("reverted", again)]


def test_revert_by_inverse_patch_without_a_message(repo: GitRepo) -> None:
    repo.commit("start", {"calc.py": "def rate():\n    return 1\n\n\ndef other():\n    return 0\n"})
    change = repo.commit("Raise the rate", {"calc.py": "def rate():\n    return 2\n\n\ndef other():\n    return 0\n"})
    repo.commit("Docs", {"README": "x\n"})
    undo = repo.commit("Back to one", {"calc.py": "def rate():\n    return 1\n\n\ndef other():\n    return 0\n"})
    index(repo)
    with Engine(repo.path) as engine:
        assert fates(engine, change) == [("reverted", undo)]
        # the undo's own inverse is the earlier change, but that came first: not a revert of the undo
        assert fates(engine, undo) == []


def test_fixes_trailer_and_cherry_picks(repo: GitRepo) -> None:
    repo.commit("start", {"a.py": "A = 1\n", "b.py": "B = 1\n"})
    bug = repo.commit("Add the parser", {"a.py": "A = 1\nPARSER = make()\n"})
    fix = repo.commit("Handle empty input", {"a.py": "A = 1\nPARSER = make(empty=True)\n"})
    repo.git("commit", "--amend", "-q", "-m", f'Handle empty input\n\nFixes: {bug[:12]} ("Add the parser")')
    fix = repo.head()
    base = repo.head()
    repo.git("checkout", "-q", "-b", "stable", "HEAD~2")
    repo.git("checkout", "-q", "main")
    feature = repo.commit("Tune B", {"b.py": "B = 2\n"})
    repo.git("checkout", "-q", "stable")
    repo.git("cherry-pick", "-x", feature, env=at(30))  # same patch, and the trailer
    picked = repo.head()
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge stable", "stable", env=at(31))
    index(repo)
    with Engine(repo.path) as engine:
        assert fates(engine, bug) == [("fixed", fix)]
        assert fates(engine, feature) == [("cherry-picked", picked)]
    assert base


def test_results_history_and_hide_reverted(repo: GitRepo) -> None:
    repo.commit("start", {"net.py": "def fetch(url):\n    return get(url)\n"})
    feature = repo.commit("Retry the fetch with backoff", {"net.py": "def fetch(url):\n    return retry(get, url)\n"})
    reverted = revert(repo, feature, 23)  # the feature is from day 2: three weeks later
    index(repo)
    with Engine(repo.path) as engine:
        hits = engine.search("retry backoff fetch", SearchOptions(rerank=False, lanes=("diff", "message")))["results"]
        by_sha = {h["commit"]["sha"]: h for h in hits}
        [c] = by_sha[feature]["consequences"]
        assert c["kind"] == "reverted" and c["by"]["sha"] == reverted and c["after_days"] == 21.0
        hidden = engine.search(
            "retry backoff fetch", SearchOptions(rerank=False, lanes=("diff", "message"), hide_reverted=True)
        )
        assert feature not in {h["commit"]["sha"] for h in hidden["results"]}
        history = symbol_history(engine, Position("net.py", 1))
        shown = {c["commit"]["sha"]: c["consequences"] for c in history["commits"]}
        assert [x["kind"] for x in shown[feature]] == ["reverted"]
    text = ok("query", "-C", str(repo.path), "retry backoff fetch", "--no-dense", "--no-rerank")
    assert f"reverted 3 weeks later by {reverted[:7]}" in text
    data = json.loads(ok("query", "-C", str(repo.path), "retry backoff", "--json", "--no-dense", "--hide-reverted"))
    assert feature not in {h["commit"]["sha"] for h in data["results"]}


def test_show_says_what_became_of_the_commit(repo: GitRepo) -> None:
    repo.commit("start", {"net.py": "def fetch(url):\n    return get(url)\n"})
    feature = repo.commit("Add a timeout", {"net.py": "def fetch(url):\n    return get(url, timeout=5)\n"})
    reverted = revert(repo, feature, 21)
    index(repo)
    text = ok("show", feature[:8], "-C", str(repo.path))
    lines = text.split("\n")
    date = next(i for i, line in enumerate(lines) if line.startswith("Date:"))
    assert re.fullmatch(rf"Later:  reverted [23] weeks later by {reverted[:7]}", lines[date + 1])
    assert "Later:" not in ok("show", reverted[:8], "-C", str(repo.path))
