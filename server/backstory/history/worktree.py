"""The uncommitted change of a worktree (staged and unstaged, against HEAD), as file diffs like a commit's.

What ``git diff HEAD`` shows, read through libgit2 (``pygit2``): the status of each path against HEAD and the
index, then the HEAD blob against the file on disk. Nothing configured in git is run (no external diff, no
textconv, no fsmonitor hook): libgit2 implements none of them. Untracked files are left out, as in
``git diff HEAD``; a new file that is staged is in.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
from pygit2.enums import FileStatus

from .. import symbols
from .diff import diff_hunks
from .model import FileDiff, SymbolRef
from .policy import PathPolicy

_CHANGED = (
    FileStatus.INDEX_NEW
    | FileStatus.INDEX_MODIFIED
    | FileStatus.INDEX_DELETED
    | FileStatus.INDEX_RENAMED
    | FileStatus.INDEX_TYPECHANGE
    | FileStatus.WT_MODIFIED
    | FileStatus.WT_DELETED
    | FileStatus.WT_RENAMED
    | FileStatus.WT_TYPECHANGE
)


def _head_blob(repo: pygit2.Repository, path: str) -> bytes | None:
    try:
        tree = repo.head.peel(pygit2.Commit).tree
    except (pygit2.GitError, KeyError):
        return None  # no commit yet
    try:
        obj = tree[path]
    except KeyError:
        return None
    return obj.data if isinstance(obj, pygit2.Blob) else None


def attribute_symbols(fd: FileDiff, old: bytes | None, new: bytes | None) -> None:
    """Each hunk's touched definitions (post-image for added lines, pre-image for removed ones, ancestors
    included), as the indexer attributes them; the file's definitions become its sibling symbols."""
    if fd.language is None or fd.language not in symbols.supported_languages():
        return
    new_defs = symbols.definitions(new, fd.language) if new else []
    old_defs = symbols.definitions(old, fd.language) if old and any(h.removed_lines for h in fd.hunks) else []
    if new_defs is None or old_defs is None:
        return
    fd.parsed = True
    for h in fd.hunks:
        seen: dict[tuple[str, str], SymbolRef] = {}
        for defs, lines in ((new_defs, h.added_lines), (old_defs, h.removed_lines)):
            for d in symbols.definitions_touching(defs, lines):
                seen.setdefault((d.name, d.kind), SymbolRef(d.name, d.kind, d.start_line, d.end_line))
        h.symbols = list(seen.values())
    fd.sibling_symbols = list(dict.fromkeys(d.name for d in (new_defs or old_defs)))[:200]


def worktree_changes(root: Path, paths: list[str] | None = None, policy: PathPolicy | None = None) -> list[FileDiff]:
    """The worktree's uncommitted file diffs against HEAD (only ``paths``, repository-relative, when given),
    sorted by path; files the policy skips (binary, too large, generated, ignored) are left out."""
    policy = policy or PathPolicy()
    repo = pygit2.Repository(str(root))
    workdir = Path(repo.workdir or root)
    wanted = set(paths) if paths else None
    out: list[FileDiff] = []
    for path, flags in sorted(repo.status().items()):
        if not flags & _CHANGED or (wanted is not None and path not in wanted):
            continue
        if policy.path_skip_reason(path):
            continue
        old = _head_blob(repo, path)
        file = workdir / path
        new = file.read_bytes() if file.is_file() and not file.is_symlink() else None
        if old is None and new is None:
            continue
        if any(policy.blob_skip_reason(data) for data in (old, new) if data is not None):
            continue
        hunks = diff_hunks(old or b"", new or b"")
        if not hunks:
            continue
        change = "add" if old is None else "delete" if new is None else "modify"
        fd = FileDiff(path=path, old_path=path, change=change, language=symbols.language_for_path(path), hunks=hunks)
        attribute_symbols(fd, old, new)
        out.append(fd)
    return out
