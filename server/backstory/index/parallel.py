"""Reading commits in worker processes: diffing and tree-sitter parsing are CPU-bound Python, so on a 2-core
machine two readers roughly halve the history phase while the parent writes to SQLite and Tantivy.

Workers are spawned (not forked: the language server has threads) and each opens the repository itself. Each
worker reads whole *segments* (contiguous stretches of the walk) in chunks, so its caches follow the history:
a commit's old objects are the next commit's new ones, and a file's older version is parsed incrementally from
its newer one (`symbols.versions`); every switch to another stretch starts those caches cold, so segments are
long. Results come back in walk order, with at most two segments per worker read ahead.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from dulwich.repo import Repo

from ..history.model import CommitDiff, CommitInfo
from ..history.policy import PathPolicy
from ..history.reader import read_commit
from ..history.repo import open_repo
from . import memory
from .packing import Packer
from .prepare import prepare

CHUNK = 24  # commits per task: the unit in which results stream back
SEGMENT_MAX = 1024  # commits per segment at most (bounds what is read ahead of the writer)
MIN_PARALLEL = 150  # below this, starting workers costs more than it saves

_worker: dict[str, Any] = {}


def workers() -> int:
    env = os.environ.get("BACKSTORY_WORKERS")
    if env:
        return max(1, int(env))
    return max(1, min(2, os.cpu_count() or 1))


def exit_with_parent(parent: int) -> None:
    """A worker whose indexer was killed (-9) must not linger: poll for the parent and leave with it."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def leave_with_parent(parent: int) -> None:
    """A worker's first step: watch for ``parent`` in a thread (:func:`exit_with_parent`)."""
    threading.Thread(target=exit_with_parent, args=(parent,), daemon=True).start()


def worker_pool(n: int) -> ProcessPoolExecutor:
    """``n`` spawned worker processes (not forked: the language server has threads) that leave with this one,
    for the phases that hand chunks to any worker (merges' diffs, commit texts)."""
    ctx = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(n, mp_context=ctx, initializer=leave_with_parent, initargs=(os.getpid(),))


def _init(
    path: str,
    policy_args: tuple[Any, ...],
    with_symbols: bool,
    no_messages: bool,
    documents_only: bool,
    languages: frozenset[str] | None,
    terms: bool,
    dictionaries: Mapping[str, bytes],
    parent: int,
) -> None:
    leave_with_parent(parent)
    _worker["repo"] = open_repo(path)
    gitattributes, backstoryignore, excludes, max_bytes = policy_args
    _worker["policy"] = PathPolicy(gitattributes, backstoryignore, excludes, max_bytes)
    _worker["symbols"] = with_symbols
    _worker["no_messages"] = no_messages
    _worker["documents_only"] = documents_only
    _worker["languages"] = languages
    _worker["terms"] = terms
    _worker["packer"] = Packer(dictionaries)


def _read(
    repo: Repo,
    info: CommitInfo,
    policy: PathPolicy,
    with_symbols: bool,
    no_messages: bool,
    documents_only: bool,
    languages: frozenset[str] | None = None,
    terms: bool = True,
    packer: Packer | None = None,
) -> CommitDiff:
    if info.is_merge:  # recorded as a commit; its paths are listed in the merges phase (`merge_diffs.fill`)
        return CommitDiff(commit=info, files=[])
    cd = read_commit(repo, info, policy, with_symbols=with_symbols, languages=languages)
    cd.prepared = prepare(cd, no_messages, documents_only, terms, packer)  # the writer's text work, here in parallel
    for f in cd.files:  # the writer reads only what was prepared: the raw texts and line numbers need not cross
        for h in f.hunks:  # the pipe (nor wait in the read-ahead), which halves both
            h.changed_text = h.excerpt = ""
            h.added_lines, h.removed_lines = [], []
    return cd


def _read_chunk(infos: list[CommitInfo]) -> list[CommitDiff]:
    w = _worker
    out = [
        _read(
            w["repo"],
            i,
            w["policy"],
            w["symbols"],
            w["no_messages"],
            w["documents_only"],
            w["languages"],
            w["terms"],
            w["packer"],
        )
        for i in infos
    ]
    w["chunks"] = w.get("chunks", 0) + 1
    if w["chunks"] % 8 == 0:
        memory.release()  # a reader's caches churn through large blobs and parse trees
    return out


def segments(total: int, n: int) -> list[tuple[int, int]]:
    """Split ``range(total)`` into contiguous (start, end) segments for ``n`` workers: two per worker, or more
    when a segment would exceed `SEGMENT_MAX` (each switch costs cold caches; the cap bounds what is read
    ahead), always a multiple of ``n`` of them and of equal size, so that the workers finish together (a
    worker with one segment more than the other used to leave a core idle at the end of the walk)."""
    if total <= 0:
        return []
    count = max(1, min(-(-total // CHUNK), max(2 * n, -(-total // SEGMENT_MAX))))
    count = -(-count // n) * n if count >= n else count
    size = -(-total // count)
    return [(start, min(total, start + size)) for start in range(0, total, size)]


def read_all(
    repo: Repo,
    todo: Sequence[CommitInfo],
    policy: PathPolicy,
    with_symbols: bool,
    no_messages: bool = False,
    documents_only: bool = False,
    languages: frozenset[str] | None = None,
    terms: bool = True,
    dictionaries: Mapping[str, bytes] | None = None,
) -> Iterator[CommitDiff]:
    """Every commit of ``todo`` read (a merge as a commit alone: the merges phase lists its paths) and prepared
    for the writer (`index.prepare`; ``documents_only``: only the Tantivy documents' texts; ``terms``: with the
    analysed text; ``languages``: only the files in these languages, `history.reader.read_commit`;
    ``dictionaries``: the index's, to compress the excerpts and analysed texts with, `index.packing`), in order."""
    n = workers()
    dictionaries = dict(dictionaries or {})
    if n <= 1 or len(todo) < MIN_PARALLEL:
        packer = Packer(dictionaries)
        for info in todo:
            yield _read(repo, info, policy, with_symbols, no_messages, documents_only, languages, terms, packer)
        return
    args = (policy.gitattributes, policy.backstoryignore, policy.extra_excludes, policy.max_file_bytes)
    ctx = multiprocessing.get_context("spawn")
    # one single-process pool per worker, so that a segment's chunks all go to the same process, in order
    pools = [
        ProcessPoolExecutor(
            1,
            mp_context=ctx,
            initializer=_init,
            initargs=(
                repo.path,
                args,
                with_symbols,
                no_messages,
                documents_only,
                languages,
                terms,
                dictionaries,
                os.getpid(),
            ),
        )
        for _ in range(n)
    ]
    plan = segments(len(todo), n)
    queued: deque[deque[Future[list[CommitDiff]]]] = deque()  # per submitted segment, its chunks in order
    submitted = 0

    def submit() -> None:
        nonlocal submitted
        while submitted < len(plan) and len(queued) < 2 * n:
            start, end = plan[submitted]
            pool = pools[submitted % n]
            queued.append(
                deque(pool.submit(_read_chunk, list(todo[i : min(end, i + CHUNK)])) for i in range(start, end, CHUNK))
            )
            submitted += 1

    try:
        submit()
        while queued:
            chunks = queued[0]
            while chunks:
                yield from chunks.popleft().result()
            queued.popleft()
            submit()
    finally:
        for futures in queued:
            for f in futures:
                f.cancel()
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)
