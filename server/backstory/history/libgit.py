"""libgit2 (through pygit2) for the hot paths of reading history: commits and blobs (tree diffs: `.trees`).

dulwich stays the repository handle everything else uses (discovery, HEAD, refs, shallow roots), but walking
and diffing a long history in it is per-object Python: on git/git's first 5,000 commits its tree diffs took
8.6 s where libgit2's took 1.4 s, and reading 4,846 commits 0.95 s against 0.07 s. The results are the same
(checked on every commit of that history); only the order of changes inside one commit follows git's own
(``git diff``'s) instead of dulwich's, which sorted ``dir/`` after ``dir-name``.
"""

from __future__ import annotations

import functools
import heapq
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator

import pygit2
from dulwich.repo import Repo
from pygit2.enums import ObjectType

from .model import CommitInfo
from .repo import HistoryError, _codec, _split_message, shallow_roots

# Per reader process; the sizes are a memory budget. On git/git (4,000 commits read without symbols from the
# 20,000th newest), 8 MB of blobs and 16 MB of libgit2 objects took 21.2 s of CPU and peaked at 197 MB, against
# 22.2 s and 276 MB with 32 and 48 MB: the hits that matter are the next commit's, and they fit.
BLOB_CACHE_BYTES = 8 << 20  # recent blobs kept: a commit's old blob is often the next one's new blob
TREE_CACHE_LIMIT = 1 << 20  # largest tree (or commit) libgit2 keeps in its object cache
OBJECT_CACHE_BYTES = 16 << 20  # libgit2's object cache (recent trees and commits are what repeat)
# libgit2 maps packs in windows of 1 GiB up to 8 GiB by default, and every page a walk touches stays resident: on
# git/git a reader process held 141 MB of pack pages after 4,000 commits, 45 MB with these (reading cost ~5 % more)
PACK_WINDOW_BYTES = 64 << 20
PACK_MAPPED_LIMIT = 160 << 20


#: Handles kept open, most recently used last (see :func:`open_repository`).
_HANDLES: OrderedDict[str, pygit2.Repository] = OrderedDict()
_HANDLES_LOCK = threading.Lock()
MAX_HANDLES = 8


def open_repository(git_dir: str) -> pygit2.Repository:
    """The libgit2 handle of a git directory (a linked worktree's own one works too); cached per directory (the
    :data:`MAX_HANDLES` most recently used). libgit2 rescans the object database when an id is not found, so
    objects written later are seen."""
    with _HANDLES_LOCK:
        found = _HANDLES.get(git_dir)
        if found is not None:
            _HANDLES.move_to_end(git_dir)
            return found
    _settings()
    opened = pygit2.Repository(git_dir)
    with _HANDLES_LOCK:
        found = _HANDLES.setdefault(git_dir, opened)  # another thread's, if it opened the same one meanwhile
        _HANDLES.move_to_end(git_dir)
        while len(_HANDLES) > MAX_HANDLES:
            _HANDLES.popitem(last=False)
    return found


def is_open(repo: Repo) -> bool:
    """Whether :func:`of` holds a handle for ``repo``."""
    with _HANDLES_LOCK:
        return os.fspath(repo.controldir()) in _HANDLES


def release(repo: Repo) -> None:
    """Forget ``repo``'s cached handle (:func:`of` opens it again on demand). A handle keeps what it read: the
    pack index mapped (20 MB on git/git), the pack windows its walks touched and its object cache; each goes
    when the last user of the handle lets go of it. For long-lived processes between runs: a language server's
    handle from one run's merge diffs otherwise held those pages for hours. Other repositories' handles stay."""
    with _HANDLES_LOCK:
        _HANDLES.pop(os.fspath(repo.controldir()), None)


@functools.cache
def _settings() -> None:
    """libgit2's process-wide memory settings. Trees of any size are cached: by default none over 4 KiB is, and
    a large project's top trees are bigger, so each path lookup in a tree (merges' parents, merge blocks, exact
    history) would inflate them from the pack again (tree diffs read raw trees and keep their own: `.trees`).
    Commits get the same, for long messages; the cache as a whole stays bounded. Pack windows are bounded too
    (see ``PACK_WINDOW_BYTES``)."""
    pygit2.settings.cache_object_limit(ObjectType.TREE, TREE_CACHE_LIMIT)
    pygit2.settings.cache_object_limit(ObjectType.COMMIT, TREE_CACHE_LIMIT)
    pygit2.settings.cache_max_size(OBJECT_CACHE_BYTES)
    pygit2.settings.mwindow_size = PACK_WINDOW_BYTES
    pygit2.settings.mwindow_mapped_limit = PACK_MAPPED_LIMIT


def of(repo: Repo) -> pygit2.Repository:
    return open_repository(os.fspath(repo.controldir()))


def commit(git: pygit2.Repository, sha: str) -> pygit2.Commit | None:
    """The commit ``sha``, or None when it is missing (beyond a shallow boundary, a partial clone) or not a commit."""
    try:
        obj = git.get(sha)
    except (ValueError, pygit2.GitError):
        return None
    return obj if isinstance(obj, pygit2.Commit) else None


def info(c: pygit2.Commit, shallow: set[str] | None = None) -> CommitInfo:
    """Metadata of a commit, as :func:`.repo.commit_info` reads it from dulwich; a shallow root has no parents."""
    sha = str(c.id)
    parents = () if shallow and sha in shallow else tuple(str(p) for p in c.parent_ids)
    codec = _codec(c.message_encoding.encode("ascii", "replace") if c.message_encoding else None)
    subject, body = _split_message(c.raw_message, codec)
    author, committer = c.author, c.committer
    return CommitInfo(
        sha=sha,
        parents=parents,
        subject=subject,
        body=body,
        author_name=author.raw_name.decode(codec, "replace").strip(),
        author_email=author.raw_email.decode(codec, "replace").strip(),
        author_time=int(author.time),
        author_tz=int(author.offset) * 60,
        commit_time=int(committer.time),
        commit_tz=int(committer.offset) * 60,
    )


def newest(repo: Repo, head: str, count: int) -> list[CommitInfo]:
    """The ``count`` most recently committed commits reachable from ``head``, newest first: a date-ordered walk
    (git log's default order) that reads only as far as it must, milliseconds where a whole walk of git/git takes
    seconds. (libgit2's own date-sorted walker walked everything first: 1.6 s.)"""
    git = of(repo)
    shallow = shallow_roots(repo)
    found: list[CommitInfo] = []
    queued = {head}
    first = commit(git, head)
    frontier = [] if first is None else [(-first.commit_time, head, first)]
    while frontier and len(found) < count:
        _, _sha, c = heapq.heappop(frontier)
        meta = info(c, shallow)
        found.append(meta)
        for parent in meta.parents:
            if parent not in queued and (p := commit(git, parent)) is not None:
                queued.add(parent)
                heapq.heappush(frontier, (-p.commit_time, parent, p))
    return found


def walk(repo: Repo, head: str, stop: set[str] | None = None) -> Iterator[CommitInfo]:
    """Commits reachable from ``head``, newest first, not descending below any commit in ``stop``.

    A plain stack walk over parents (not a date-ordered walker) so that it can stop early at known commits,
    which makes "what is new since the last run" cost proportional to the new commits. Commits are read by
    libgit2 (an order of magnitude faster than dulwich on long histories)."""
    stop = stop or set()
    shallow = shallow_roots(repo)
    git = of(repo)
    seen: set[str] = set()
    pending = [head]
    found: list[CommitInfo] = []
    while pending:
        sha = pending.pop()
        if sha in seen or sha in stop:
            continue
        seen.add(sha)
        obj = commit(git, sha)
        if obj is None:
            continue  # missing object (shallow or partial clone): history ends here
        meta = info(obj, shallow)
        found.append(meta)
        pending.extend(meta.parents)
    found.sort(key=lambda c: (-c.commit_time, c.sha))
    yield from found


def entry_id(tree: pygit2.Tree, path: str) -> tuple[str, int] | None:
    """(id, mode) of ``path`` in ``tree``, or None when absent."""
    try:
        e = tree[path]
    except (KeyError, ValueError):
        return None
    return str(e.id), int(e.filemode)


class BlobCache:
    """Blob bytes by hex id, the most recent first, bounded by total size."""

    def __init__(self, git: pygit2.Repository, limit: int = BLOB_CACHE_BYTES) -> None:
        self.git = git
        self._limit = limit
        self._size = 0
        self._cache: OrderedDict[bytes, bytes] = OrderedDict()

    def get(self, sha: bytes | None) -> bytes | None:
        """The blob's bytes; b"" for no side; None when the object is missing (partial clone, broken repo)."""
        if sha is None:
            return b""
        data = self._cache.get(sha)
        if data is not None:
            self._cache.move_to_end(sha)
            return data
        try:  # the object database directly: a Blob's lookup and then its .data took 1.7x as long on git/git
            kind, data, *_ = self.git.odb.read(sha.decode("ascii"))
        except (KeyError, ValueError):
            return None
        if kind != ObjectType.BLOB:
            return None
        self._cache[sha] = data
        self._size += len(data)
        while self._size > self._limit and self._cache:
            _k, old = self._cache.popitem(last=False)
            self._size -= len(old)
        return data


def branch_tips(git: pygit2.Repository) -> dict[str, str]:
    """Local branch name -> the commit it points at (``git log --branches``' starting points)."""
    tips: dict[str, str] = {}
    for name in git.references:
        if not name.startswith("refs/heads/"):
            continue
        try:
            target = git.references[name].peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            continue  # a dangling or non-commit branch
        tips[name[len("refs/heads/") :]] = str(target.id)
    return tips


def resolve_commit(git: pygit2.Repository, revision: str) -> str:
    """The commit ``revision`` names, as git reads it (a branch, remote branch, tag, sha prefix, ``HEAD~2``);
    a :class:`HistoryError` that names it otherwise."""
    if not revision or revision.startswith("-"):
        raise HistoryError(f"not a revision: {revision!r}")
    try:
        obj = git.revparse_single(revision)
        return str(obj.peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise HistoryError(f"unknown revision {revision!r}: name a branch, tag or commit") from None
