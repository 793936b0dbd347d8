"""`backstory show`: a merge's file against each parent (`--path`), and abbreviated shas resolved from the
catalogue or the object store's prefix lookup, on real repositories."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from dulwich.object_store import DiskObjectStore

from backstory.features.show_commit import resolve_sha, show_commit
from backstory.history.repo import HistoryError, open_repo
from backstory.index.build import index_repository
from backstory.index.catalog import Catalog
from gitrepo import GitRepo, fast_history

BASE = "def greet(name):\n    return 'hello ' + name\n\n\ndef add(a, b):\n    return a + b\n"


def _merge(repo: GitRepo, branch: str, message: str) -> str:
    env = {"GIT_AUTHOR_DATE": "1700900000 +0000", "GIT_COMMITTER_DATE": "1700900000 +0000"}
    repo.git("merge", "-q", "--no-ff", "--no-edit", "-m", message, branch, env=env, check=False)
    repo.git("add", "-A")
    if repo.git("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).strip():
        repo.git("commit", "-q", "--no-edit", env=env)
    return repo.head()


@pytest.fixture
def merged(tmp_path: Path) -> tuple[GitRepo, dict[str, str]]:
    """main and a feature branch both change lib.py (the merge resolves it), the feature alone adds
    feature.py, and README.md is the same in both parents."""
    repo = GitRepo(tmp_path / "merge")
    repo.commit("Base", {"lib.py": BASE, "README.md": "# demo\n", "util.py": "X = 1\n"})
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("Feature", {"lib.py": BASE.replace("hello", "hi"), "feature.py": "def feature():\n    pass\n"})
    repo.git("checkout", "-q", "main")
    repo.commit("Mainline", {"lib.py": BASE.replace("a + b", "b + a"), "util.py": "X = 2\n"})
    merge = _merge(repo, "feature", "Merge feature")
    if "hi " not in (repo.path / "lib.py").read_text() or "b + a" not in (repo.path / "lib.py").read_text():
        raise AssertionError("the merge should have combined both changes to lib.py")
    parents = {f"p{n}": repo.git("rev-parse", f"HEAD^{n}").strip() for n in (1, 2)}
    return repo, {"merge": merge, **parents}


def _changed_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith(("+", "-")) and not x.startswith(("+++", "---"))]


def _sections(text: str) -> dict[int, str]:
    parts = re.split(r"^against parent (\d+) \([0-9a-f]{7}\):$", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def test_show_merge_path_is_the_file_against_each_parent(merged) -> None:
    repo, shas = merged
    with contextlib.closing(open_repo(repo.path)) as r:
        whole = show_commit(r, shas["merge"])
        assert "diff --git" not in whole.text and "--path FILE" in whole.text
        both = show_commit(r, shas["merge"], "lib.py")
        sections = _sections(both.text)
        assert sorted(sections) == [1, 2]
        for n, parent in ((1, shas["p1"]), (2, shas["p2"])):
            git_diff = repo.git("diff", parent, shas["merge"], "--", "lib.py")
            assert _changed_lines(sections[n]) == _changed_lines(git_diff) != []
            assert "diff --git a/lib.py b/lib.py" in sections[n]
        assert {h["parent"] for h in both.hunks} == {shas["p1"], shas["p2"]}
        for h in both.hunks:  # each hunk position points at its header in the text
            assert both.text.splitlines()[int(h["line"])].startswith("@@")  # type: ignore[call-overload]
        # a file only the feature branch changed: a diff against the first parent, the same as the second
        one = _sections(show_commit(r, shas["merge"], "feature.py").text)
        assert "new file" in one[1] or "--- /dev/null" in one[1]
        assert "+def feature():" in one[1] and "feature.py: same as in parent 2" in one[2]
        assert "feature.py" not in one[2].replace("feature.py: same as in parent 2", "")
        with pytest.raises(HistoryError, match=r"does not change README\.md"):
            show_commit(r, shas["merge"], "README.md")
        with pytest.raises(HistoryError, match=r"does not change missing\.py"):
            show_commit(r, shas["merge"], "missing.py")


def test_cli_show_merge_with_path(merged) -> None:
    repo, shas = merged
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "show", shas["merge"][:10], "--path", "util.py", "-C", str(repo.path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    sections = _sections(proc.stdout)
    assert "util.py: same as in parent 1" in sections[1]
    assert _changed_lines(sections[2]) == ["-X = 1", "+X = 2"]
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "show", shas["merge"], "--path", "README.md", "-C", str(repo.path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4 and "does not change README.md" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """1,000 commits in one pack (git fast-import), all indexed: enough for commits sharing a 4-digit prefix."""
    path = tmp_path_factory.mktemp("prefixes") / "repo"
    fast_history(path, 1000)
    index_repository(path)
    shas = GitRepo.__new__(GitRepo)
    shas.path = path
    return path, shas.git("rev-list", "--all").split()


@pytest.fixture
def no_object_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Iterating over every object (what resolving a prefix used to do) fails the test."""

    def scan(self: object) -> None:
        raise AssertionError("a full object scan")

    monkeypatch.setattr(DiskObjectStore, "__iter__", scan)


class _Conn:
    """A plain connection to the catalogue file (closable) and the named reads over it."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path / ".git" / "backstory" / "catalog.sqlite")
        self.catalog = Catalog(lambda: self.conn)

    def close(self) -> None:
        self.conn.close()


def _catalogue(path: Path) -> _Conn:
    return _Conn(path)


def _loose(path: Path, sha: str) -> bool:
    return (path / ".git" / "objects" / sha[:2] / sha[2:]).exists()


def test_abbreviated_shas_resolve_from_the_catalogue_then_the_object_store(packed, no_object_scan, monkeypatch) -> None:
    path, shas = packed
    groups: dict[str, list[str]] = {}
    for sha in shas:
        groups.setdefault(sha[:4], []).append(sha)
    prefix, ambiguous = min((p, sorted(g)) for p, g in groups.items() if len(g) > 1)
    unique = next(sha for sha in shas if len(groups[sha[:4]]) == 1)
    assert not _loose(path, unique)  # fast-import wrote a pack
    with contextlib.closing(open_repo(path)) as repo, contextlib.closing(_catalogue(path)) as conn:
        db = conn.catalog
        for catalogue in (db, None):
            assert resolve_sha(repo, unique[:4], catalogue) == unique
            assert resolve_sha(repo, unique[:7].upper() + "~0", catalogue) == unique
            with pytest.raises(HistoryError, match=f"ambiguous commit id {prefix}: matches {', '.join(ambiguous)}"):
                resolve_sha(repo, prefix, catalogue)
            assert resolve_sha(repo, ambiguous[0][:12], catalogue) == ambiguous[0]
            with pytest.raises(HistoryError, match="no commit starting with"):
                resolve_sha(repo, "000000000", catalogue)
        # the catalogue answers alone: the object store's prefix lookup is not needed for an indexed commit
        with monkeypatch.context() as m:
            m.setattr(DiskObjectStore, "iter_prefix", lambda self, prefix: iter(()))
            assert resolve_sha(repo, unique[:6], db) == unique
            with pytest.raises(HistoryError, match="no commit starting with"):
                resolve_sha(repo, unique[:6], None)


def test_prefix_of_a_loose_then_packed_commit_and_of_a_pruned_one(tmp_path, no_object_scan) -> None:
    repo = GitRepo(tmp_path / "loose")
    first = repo.commit("First", {"a.py": "a = 1\n"})
    second = repo.commit("Second", {"a.py": "a = 2\n"})
    index_repository(repo.path)
    third = repo.commit("Third, not indexed", {"a.py": "a = 3\n"})
    assert _loose(repo.path, third)
    with contextlib.closing(_catalogue(repo.path)) as conn:
        db = conn.catalog
        for catalogue in (db, None):
            with contextlib.closing(open_repo(repo.path)) as r:
                assert resolve_sha(r, third[:7], catalogue) == third  # not in the catalogue: the loose object
                assert resolve_sha(r, first[:7], catalogue) == first
        repo.git("gc", "-q")
        assert not _loose(repo.path, third) and not _loose(repo.path, first)
        for catalogue in (db, None):
            with contextlib.closing(open_repo(repo.path)) as r:
                assert resolve_sha(r, third[:7], catalogue) == third
                assert resolve_sha(r, first[:7], catalogue) == first
        # the catalogue still lists a commit that is gone from the repository: not an answer
        repo.git("reset", "-q", "--hard", first)
        repo.git("reflog", "expire", "--expire=now", "--all")
        repo.git("gc", "-q", "--prune=now")
        assert db.commit_state(second) == "indexed"
        with contextlib.closing(open_repo(repo.path)) as r, pytest.raises(HistoryError, match="no commit starting"):
            resolve_sha(r, second[:7], db)
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "show", second[:7], "-C", str(repo.path)], capture_output=True, text=True
    )  # fmt: skip
    assert proc.returncode == 4 and "no commit starting with" in proc.stderr and "Traceback" not in proc.stderr
