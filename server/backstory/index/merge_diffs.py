"""Change blocks of each merge against each parent, per source path it changes: stored after the BM25 phase so
exact symbol history carries line ranges through merges with SQLite lookups instead of diffs.

``git log -L`` maps a range through a merge by diffing the file against every parent (the first parent that
did not touch the range takes it alone). Diffing at query time cost 1 s for a file whose history crosses a
hundred merges; storing the blocks costs one libgit2 diff per (merge, parent, path) once, at index time.

Blob lookups here go through libgit2 (pygit2), like the diff itself: the tree walks cost a few microseconds
instead of milliseconds in dulwich, which stays the reader of everything else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pygit2
from pygit2.enums import DeltaStatus

from ..history import renames
from ..history.diff import changes_of_blobs
from ..history.libgit import open_repository
from ..history.linelog import Block
from .parallel import worker_pool, workers
from .progress import Progress
from .store import Store

RENAMED = "R"  # prefix: the merge renamed the file relative to that parent (followed like git's line-log)
ADDED = "A"  # the path is new relative to that parent: every line was added by the merge
UNKNOWN = "?"  # an object is missing (shallow clone, damaged repo): callers fall back to a diff on the fly
CHUNK = 500
PARALLEL_FROM = 4 * CHUNK  # rows from which reader processes diff them
BLOB_CACHE_LIMIT = 1 << 20


def encode(blocks: Sequence[Block]) -> str:
    return ";".join(f"{a},{b},{c},{d}" for a, b, c, d in blocks)


def decode(text: str) -> list[Block]:
    out: list[Block] = []
    for part in text.split(";") if text else ():
        a, b, c, d = part.split(",")
        out.append((int(a), int(b), int(c), int(d)))
    return out


def _blob_id(repo: pygit2.Repository, commit: str, path: str) -> pygit2.Oid | None:
    try:
        entry = repo[commit].peel(pygit2.Tree)[path]
    except (KeyError, ValueError):
        return None
    return entry.id if entry.type == pygit2.GIT_OBJECT_BLOB else None


def _rename_source(repo: pygit2.Repository, merge: str, parent: str, path: str) -> str | None:
    """The path ``path`` had in ``parent`` if the merge renamed it: git's line-log runs rename detection when a
    tracked file is new relative to a parent. Candidates are the files the merge deleted relative to that
    parent; similarity is the reader's (history/renames.py, git's 50 % default), so merges and commits agree."""
    try:
        diff = repo[parent].peel(pygit2.Tree).diff_to_tree(repo[merge].peel(pygit2.Tree))  # parent -> merge
        new_id = _blob_id(repo, merge, path)
        target = repo[new_id] if new_id is not None else None
    except (KeyError, ValueError):
        return None
    if not isinstance(target, pygit2.Blob):
        return None
    best: tuple[int, str] | None = None
    deleted = [d.old_file for d in diff.deltas if d.status == DeltaStatus.DELETED]
    for old in deleted[: renames.MAX_PAIRS]:
        if old.id == new_id:
            return str(old.path)
        try:
            blob = repo[old.id]
        except KeyError:
            continue
        if not isinstance(blob, pygit2.Blob):
            continue
        score = renames.similarity(blob.data, target.data)
        if score >= renames.THRESHOLD and (best is None or (score, old.path) > best):
            best = (score, str(old.path))
    return best[1] if best else None


def merge_blocks(repo: pygit2.Repository, merge: str, parent: str, path: str) -> str:
    """The encoded change blocks turning ``path`` in ``parent`` into ``path`` in ``merge`` (or ADDED/UNKNOWN);
    ``R<old path>\t<blocks>`` when the merge renamed the file relative to that parent."""
    mine = _blob_id(repo, merge, path)
    if mine is None:
        return UNKNOWN
    theirs = _blob_id(repo, parent, path)
    prefix = ""
    if theirs is None:
        source = _rename_source(repo, merge, parent, path)
        theirs = _blob_id(repo, parent, source) if source is not None else None
        if source is None or theirs is None:
            return ADDED
        prefix = f"{RENAMED}{source}\t"
    if mine == theirs:
        return prefix
    try:
        old, new = repo[theirs], repo[mine]
    except KeyError:
        return UNKNOWN
    assert isinstance(old, pygit2.Blob) and isinstance(new, pygit2.Blob)
    return prefix + encode(changes_of_blobs(old, new))


def parse(ops: str, path: str) -> tuple[str, list[Block]]:
    """(the path in the parent, the change blocks) of a stored merge row."""
    if ops.startswith(RENAMED):
        source, _tab, blocks = ops[len(RENAMED) :].rpartition("\t")
        return source, decode(blocks)
    return path, decode(ops)


def fill(
    store: Store,
    git_dir: str,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> int:
    """Compute the blocks of every merge path that has none yet (incremental); returns how many were computed.

    The reader lists (merge, parent, path) only where a history walk can reach it (the path differs from every
    earlier parent too: `history.reader.read_merge`), so every listed row is diffed: in reader processes when
    there are many (git/git has 84,653, 275 s in one process), each chunk written as it comes back, in order.
    ``progress`` gets ("merges", rows done, rows) after each chunk."""
    rows = store.db.execute("SELECT rowid, sha, parent, path FROM merge_paths WHERE ops IS NULL").fetchall()
    if not rows:
        return 0
    chunks = [[tuple(r) for r in rows[i : i + CHUNK]] for i in range(0, len(rows), CHUNK)]
    n = workers()
    pool = None
    if n > 1 and len(rows) >= PARALLEL_FROM:
        pool = worker_pool(n)
        results: Iterator[list[tuple[str, int]]] = (
            f.result() for f in [pool.submit(chunk_blocks, git_dir, c) for c in chunks]
        )
    else:
        results = (chunk_blocks(git_dir, c) for c in chunks)
    done = 0
    try:
        for out in results:
            if cancel is not None and cancel.is_set():
                break
            done += len(out)
            with store.transaction() as db:
                db.executemany("UPDATE merge_paths SET ops=? WHERE rowid=?", out)
            if progress is not None:
                progress("merges", done, len(rows))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return done


def chunk_blocks(git_dir: str, rows: Sequence[tuple[int, str, str, str]]) -> list[tuple[str, int]]:
    """(encoded blocks, rowid) of each (rowid, merge, parent, path)."""
    repo = open_repository(git_dir)
    # a merge's blob is often the next merge's parent blob: let libgit2 keep blobs (it caches none by default);
    # measured on Flask: 1.2-1.45 s of CPU instead of 1.8-1.9 s
    pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.BLOB, BLOB_CACHE_LIMIT)
    try:
        return [(merge_blocks(repo, sha, parent, path), rowid) for rowid, sha, parent, path in rows]
    finally:
        pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.BLOB, 0)
