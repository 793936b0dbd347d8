"""Which source paths each merge changes against each parent, and the change blocks: the paths listed right
after the keyword lanes (:func:`list_merges`), the blocks in the last phase before embeddings (:func:`fill`),
so exact symbol history carries line ranges through merges with SQLite lookups instead of diffs.

``git log -L`` maps a range through a merge by diffing the file against every parent (the first parent that
did not touch the range takes it alone). Diffing at query time cost 1 s for a file whose history crosses a
hundred merges; storing the blocks costs one libgit2 diff per (merge, parent, path) once, at index time.

Blob lookups here go through libgit2 (pygit2), like the diff itself: the tree walks cost a few microseconds
instead of milliseconds in dulwich, which stays the reader of everything else.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import pygit2
from pygit2.enums import DeltaStatus

from .. import symbols
from ..history import libgit, renames
from ..history.diff import changes_of_blobs
from ..history.libgit import open_repository
from ..history.linelog import Block
from ..history.trees import TreeDiffer
from .graph import MERGES_LISTED
from .parallel import worker_pool, workers
from .progress import Progress
from .store import Store, bump_counter

RENAMED = "R"  # prefix: the merge renamed the file relative to that parent (followed like git's line-log)
ADDED = "A"  # the path is new relative to that parent: every line was added by the merge
UNKNOWN = "?"  # an object is missing (shallow clone, damaged repo): callers fall back to a diff on the fly
CHUNK = 100  # merges a task lists and diffs (git/git: ~4 rows a merge)
PARALLEL_FROM = 4 * CHUNK  # merges from which reader processes do it
BLOB_CACHE_LIMIT = 1 << 20
T = TypeVar("T")


def encode(blocks: Sequence[Block]) -> str:
    return ";".join(f"{a},{b},{c},{d}" for a, b, c, d in blocks)


def decode(text: str) -> list[Block]:
    out: list[Block] = []
    for part in text.split(";") if text else ():
        a, b, c, d = part.split(",")
        out.append((int(a), int(b), int(c), int(d)))
    return out


BlobMemo = dict[tuple[str, str], "pygit2.Oid | None"]
_UNSEEN = object()


def _blob_id(repo: pygit2.Repository, commit: str, path: str, memo: BlobMemo | None = None) -> pygit2.Oid | None:
    """The blob ``path`` names in ``commit``'s tree (None: no such file). ``memo``: a caller diffing many
    merges along a history (exact history before merges are listed) looks each (commit, path) up once: a
    merge's first parent is often the next merge it crosses, and each lookup reads a root tree (~20 µs)."""
    key = (commit, path)
    known = memo.get(key, _UNSEEN) if memo is not None else _UNSEEN  # one read: another thread may drop the memo
    if known is not _UNSEEN:
        return known  # type: ignore[return-value]
    try:
        entry = repo[commit].peel(pygit2.Tree)[path]
        found = entry.id if entry.type == pygit2.GIT_OBJECT_BLOB else None
    except (KeyError, ValueError):
        found = None
    if memo is not None:
        memo[key] = found
    return found


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


def merge_blocks(repo: pygit2.Repository, merge: str, parent: str, path: str, blobs: BlobMemo | None = None) -> str:
    """The encoded change blocks turning ``path`` in ``parent`` into ``path`` in ``merge`` (or ADDED/UNKNOWN);
    ``R<old path>\t<blocks>`` when the merge renamed the file relative to that parent. ``blobs``: see
    :func:`_blob_id`."""
    mine = _blob_id(repo, merge, path, blobs)
    if mine is None:
        return UNKNOWN
    theirs = _blob_id(repo, parent, path, blobs)
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


def list_paths(repo: pygit2.Repository, trees: TreeDiffer, merge: str, parents: Sequence[str]) -> list[tuple[str, str]]:
    """(parent, path) of the source files a history walk through ``merge`` may have to carry line ranges
    across: only paths in languages with symbols, and (parent *i*, path) only when the path differs from every
    parent before *i* as well.

    Like git's line-log, a walk through a merge compares a file with the parents in order and stops at the
    first one it is identical in, so only the first parent is diffed (trees only, with the readers'
    `TreeDiffer`: its cache of parsed trees serves merges taken in history order, and it took 2.5-3 times less
    CPU than libgit2's tree diff on git/git's merges); the others are asked for just those paths. A topic merge
    in git/git differs from its second parent in thousands of files that its first parent already has. Paths
    are decoded as the reader decodes them (UTF-8, invalid bytes replaced), so they match the file rows."""
    mine = repo[merge].peel(pygit2.Tree)  # KeyError when the merge cannot be read: the caller keeps it unlisted
    supported = symbols.supported_languages()
    out: list[tuple[str, str]] = []
    differing: dict[str, tuple[str, int] | None] | None = None  # path -> the merge's (hex id, mode)
    for parent in parents:
        try:
            theirs = repo[parent].peel(pygit2.Tree)
        except (KeyError, ValueError):
            continue  # a shallow clone's boundary: nothing to compare with
        if differing is None:
            differing = {}
            for change in trees.changes(theirs.id.raw, mine.id.raw):  # parent -> merge, no rename detection
                new = change.new if change.new is not None and change.new.path is not None else None
                entry = new if new is not None else change.old
                path = entry.path.decode("utf-8", "replace") if entry is not None and entry.path else ""
                if symbols.language_for_path(path) not in supported:
                    continue
                if path not in differing:  # a type change comes as a deletion and an addition
                    out.append((parent, path))
                differing[path] = (new.sha.decode("ascii"), new.mode) if new is not None else None
            continue
        for path, entry_id in list(differing.items()):
            if libgit.entry_id(theirs, path) == entry_id:
                del differing[path]  # identical in this parent: a walk never reaches the later ones
            else:
                out.append((parent, path))
    return out


def list_merges(
    store: Store, git_dir: str, cancel: threading.Event | None = None, progress: Progress | None = None
) -> int:
    """List the paths of every merge the keyword phase left unlisted (``merges_unlisted``); returns how many.

    Run right after the keyword lanes (git/git: 21,215 merges, ~6 s on two cores) so that exact history
    through a merge reads the catalogue while the later phases work (with every merge unlisted, a history
    diffs each merge it crosses: 0.8-1.5 s a function on git/git instead of 0.05-0.4 s, and hovers' p95 during
    the symbols phase was 526 ms). The rows wait without blocks for :func:`fill`, the last phase before
    embeddings. Each chunk's rows are stored and its merges taken off the list in one transaction. Before
    schema 14 the keyword phase's readers listed them (~7 % of their CPU on git/git), which the keyword lanes
    do not need. ``progress`` gets ("merge_paths", merges done, merges)."""
    merges = [
        (sha, tuple(json.loads(parents)))
        for sha, parents in store.db.execute(
            "SELECT u.sha, c.parents FROM merges_unlisted u JOIN commits c ON c.sha = u.sha"
            " ORDER BY c.commit_time DESC, u.sha"  # history order: neighbours share trees (`list_paths`)
        )
    ]

    def stored(db: sqlite3.Connection, chunk: Sequence[tuple[str, tuple[str, ...]]], result: Any) -> None:
        rows, unread = result
        listed = [(sha,) for sha, _p in chunk if sha not in unread]
        db.executemany("DELETE FROM merge_paths WHERE sha=?", listed)  # what a killed run left
        db.executemany("INSERT INTO merge_paths(sha, parent, path) VALUES (?,?,?)", rows)
        db.executemany("DELETE FROM merges_unlisted WHERE sha=?", listed)
        # readers cache the set of listed merges on this (search/topology.py): a hover during this phase and
        # the ones after it read the chunks listed so far instead of diffing every merge it crosses
        bump_counter(db, MERGES_LISTED)

    return _in_chunks(store, git_dir, merges, chunk_paths, stored, "merge_paths", cancel, progress)


def fill(store: Store, git_dir: str, cancel: threading.Event | None = None, progress: Progress | None = None) -> int:
    """Compute the blocks of every listed merge path that has none yet (incremental), after listing what an
    interrupted run left unlisted; returns how many merges it diffed. In reader processes when there are many
    (git/git: 84,653 rows of 21,215 merges, 275 s in one process), merges in history order (a merge's blob is
    often the next one's parent blob), each chunk written as it comes back. ``progress`` gets ("merges",
    merges done, merges) after each chunk."""
    list_merges(store, git_dir, cancel)
    if cancel is not None and cancel.is_set():
        return 0
    by_merge: dict[str, list[tuple[int, str, str, str]]] = {}
    for rowid, sha, parent, path in store.db.execute(
        "SELECT m.rowid, m.sha, m.parent, m.path FROM merge_paths m JOIN commits c ON c.sha = m.sha"
        " WHERE m.ops IS NULL ORDER BY c.commit_time DESC, m.sha, m.rowid"
    ):
        by_merge.setdefault(sha, []).append((rowid, sha, parent, path))

    def stored(db: sqlite3.Connection, _chunk: Sequence[list[tuple[int, str, str, str]]], result: Any) -> None:
        db.executemany("UPDATE merge_paths SET ops=? WHERE rowid=?", result)

    return _in_chunks(store, git_dir, list(by_merge.values()), chunk_blocks, stored, "merges", cancel, progress)


def _in_chunks(
    store: Store,
    git_dir: str,
    items: Sequence[T],
    work: Callable[[str, Sequence[T]], Any],
    stored: Callable[[sqlite3.Connection, Sequence[T], Any], None],
    phase: str,
    cancel: threading.Event | None,
    progress: Progress | None,
) -> int:
    """``work`` on :data:`CHUNK` items at a time (merges), in reader processes when there are many, each
    chunk's result ``stored`` in a transaction of its own as it comes back, in order; stops at ``cancel``."""
    if not items:
        return 0
    chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
    if progress is not None:
        progress(phase, 0, len(items))
    n = workers()
    pool = None
    if n > 1 and len(items) >= PARALLEL_FROM:
        pool = worker_pool(n)
        results: Iterator[Any] = (f.result() for f in [pool.submit(work, git_dir, c) for c in chunks])
    else:
        results = (work(git_dir, c) for c in chunks)
    done = 0
    try:
        for chunk, result in zip(chunks, results, strict=False):
            if cancel is not None and cancel.is_set():
                break
            with store.transaction() as db:
                stored(db, chunk, result)
            done += len(chunk)
            if progress is not None:
                progress(phase, done, len(items))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        _opened.clear()  # in this process (a small update inside a server): not kept for its lifetime
    return done


def _repository(git_dir: str) -> tuple[pygit2.Repository, TreeDiffer]:
    """This process's repository and tree cache, kept across the chunks it is given."""
    repo, trees = _opened.get(git_dir) or (None, None)
    if repo is None or trees is None:
        _opened.clear()
        repo = open_repository(git_dir)
        trees = TreeDiffer(repo)
        _opened[git_dir] = (repo, trees)
    return repo, trees


def chunk_paths(
    git_dir: str, merges: Sequence[tuple[str, Sequence[str]]]
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(merge, parent, path) of each of ``merges`` (sha, parents), and the merges that could not be read (a
    damaged repository: they stay unlisted, every run tries them again, and exact history diffs them on the fly
    when it can)."""
    repo, trees = _repository(git_dir)
    rows: list[tuple[str, str, str]] = []
    unread: list[str] = []
    for sha, parents in merges:
        try:
            rows += [(sha, parent, path) for parent, path in list_paths(repo, trees, sha, parents)]
        except (KeyError, ValueError):
            unread.append(sha)
    return rows, unread


def chunk_blocks(git_dir: str, merges: Sequence[list[tuple[int, str, str, str]]]) -> list[tuple[str, int]]:
    """(encoded blocks, rowid) of each (rowid, merge, parent, path) of each merge's rows."""
    repo, _trees = _repository(git_dir)
    # a merge's blob is often the next merge's parent blob: let libgit2 keep blobs (it caches none by default);
    # measured on Flask: 1.2-1.45 s of CPU instead of 1.8-1.9 s
    pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.BLOB, BLOB_CACHE_LIMIT)
    try:
        return [(merge_blocks(repo, sha, parent, path), rowid) for rows in merges for rowid, sha, parent, path in rows]
    finally:
        pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.BLOB, 0)


#: this process's repository and tree cache, kept across the chunks it is given (one repository at a time)
_opened: dict[str, tuple[pygit2.Repository, TreeDiffer]] = {}
