"""A file's content at a revision: both sides of an editor's side-by-side diff, and "open the file as it was"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dulwich.object_store import tree_lookup_path
from dulwich.objects import Blob, Commit

from ..history.repo import HistoryError
from .show_commit import resolve_sha

if TYPE_CHECKING:
    from ..search.engine import Engine

MAX_BYTES = 5_000_000


@dataclass
class FileAtRevision:
    sha: str | None  # the commit the revision names (None: it names none, e.g. the parent of a root commit)
    path: str
    exists: bool  # False: the file is not in that commit (added later, deleted before, or no such commit)
    binary: bool
    text: str


def file_at(engine: Engine, rev: str, path: str) -> FileAtRevision:
    """``path`` in the commit ``rev`` names (a sha, ``sha^``, a branch, …). A revision with no commit behind it
    (``root^``) or a commit without the file gives ``exists: false`` and empty text: the empty side of a diff."""
    repo = engine.repo
    try:
        sha = resolve_sha(repo, rev, engine.catalog if engine.has_index() else None)
    except HistoryError:
        if "^" in rev or "~" in rev:
            return FileAtRevision(None, path, False, False, "")
        raise
    commit = repo[sha.encode()]
    assert isinstance(commit, Commit)
    raw = path.encode("utf-8", "surrogateescape")
    try:
        _mode, blob_id = tree_lookup_path(repo.object_store.__getitem__, commit.tree, raw)
    except KeyError:
        return FileAtRevision(sha, path, False, False, "")
    blob = repo[blob_id]
    if not isinstance(blob, Blob):
        raise HistoryError(f"{path} is a directory in {sha[:7]}, not a file")
    data = blob.data
    if b"\0" in data[:8000] or len(data) > MAX_BYTES:
        why = "binary" if b"\0" in data[:8000] else f"{len(data):,} bytes"
        return FileAtRevision(sha, path, True, True, f"({path} at {sha[:7]}: {why}, not shown)\n")
    return FileAtRevision(sha, path, True, False, data.decode("utf-8", "replace"))
