"""Tree diffs from raw tree objects (history/trees.py) against ``git diff-tree`` on real repositories."""

from __future__ import annotations

import itertools
import os

import pygit2
from dulwich.diff_tree import CHANGE_ADD, CHANGE_DELETE, CHANGE_MODIFY

from backstory.history.trees import TreeDiffer
from gitrepo import GitRepo


def _git_changes(repo: GitRepo, old: str, new: str) -> list[tuple[str, bytes, int, str]]:
    """``git diff-tree -r``'s changes as (kind, path, mode, id); a type change is a delete and an add."""
    out = []
    for line in repo.git("diff-tree", "-r", "--no-renames", old, new).splitlines():
        meta, path = line.split("\t", 1)
        old_mode, new_mode, old_id, new_id, status = meta[1:].split()
        if status in "DT":
            out.append((CHANGE_DELETE, path.encode(), int(old_mode, 8), old_id))
        if status in "AT":
            out.append((CHANGE_ADD, path.encode(), int(new_mode, 8), new_id))
        if status == "M":
            out.append((CHANGE_MODIFY, path.encode(), int(new_mode, 8), new_id))
    return out


def _ours(differ: TreeDiffer, git: pygit2.Repository, old: str, new: str) -> list[tuple[str, bytes, int, str]]:
    out = []
    for c in differ.changes(git[old].peel(pygit2.Tree).id.raw, git[new].peel(pygit2.Tree).id.raw):
        entry = c.new if c.type != CHANGE_DELETE else c.old
        out.append((c.type, entry.path, entry.mode, entry.sha.decode()))
    return out


def test_changes_match_git_diff_tree(repo: GitRepo) -> None:
    repo.commit("root", {"a.py": "a\n", "d/x.py": "x\n", "d/sub/y.py": "y\n", "d-name.txt": "n\n", "f": "file\n"})
    root = repo.head()
    repo.commit("edit nested", {"d/sub/y.py": "y2\n"})
    (repo.path / "a.py").chmod(0o755)
    repo.git("add", "a.py")
    repo.git("commit", "-q", "-m", "mode only")
    os.remove(repo.path / "f")
    (repo.path / "f").mkdir()
    repo.commit("file becomes a directory", {"f/inner.py": "i\n", "d.py": "sorts between d-name and d/\n"})
    os.remove(repo.path / "d-name.txt")
    os.symlink("a.py", repo.path / "d-name.txt")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "file becomes a symlink")
    repo.git("rm", "-q", "-r", "d")
    repo.commit("directory goes, new one comes", {"e/deep/er/z.py": "z\n"})
    git = pygit2.Repository(str(repo.path))
    differ = TreeDiffer(git, limit=3)  # a tiny cache: trees are read again, results must not change
    shas = repo.git("rev-list", "--reverse", "HEAD").split()
    pairs = [*itertools.pairwise(shas), (root, repo.head()), (repo.head(), root)]
    for old, new in pairs:
        assert _ours(differ, git, old, new) == _git_changes(repo, old, new), (old, new)


def test_empty_tree_side_lists_every_file(repo: GitRepo) -> None:
    repo.commit("root", {"b/c.py": "c\n", "a.py": "a\n"})
    git = pygit2.Repository(str(repo.path))
    tree = git[repo.head()].peel(pygit2.Tree).id.raw
    added = TreeDiffer(git).changes(None, tree)
    assert [(c.type, c.new.path) for c in added] == [(CHANGE_ADD, b"a.py"), (CHANGE_ADD, b"b/c.py")]
    deleted = TreeDiffer(git).changes(tree, None)
    assert [(c.type, c.old.path) for c in deleted] == [(CHANGE_DELETE, b"a.py"), (CHANGE_DELETE, b"b/c.py")]
    assert TreeDiffer(git).changes(tree, tree) == []
