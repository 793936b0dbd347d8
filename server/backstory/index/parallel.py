"""Reading commits in worker processes: diffing and tree-sitter parsing are CPU-bound Python, so on a 2-core
machine two readers roughly halve the history phase while the parent writes to SQLite and Tantivy.

Workers are spawned (not forked: the language server has threads), each opens the repository itself, and gets
contiguous chunks of commits so its object and parse caches keep working. Results come back in order.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from dulwich.repo import Repo

from ..history.model import CommitDiff, CommitInfo
from ..history.policy import PathPolicy
from ..history.reader import read_commit, read_merge
from ..history.repo import open_repo

CHUNK = 24
MIN_PARALLEL = 150  # below this, starting workers costs more than it saves

_worker: dict[str, Any] = {}


def workers() -> int:
    env = os.environ.get("BACKSTORY_WORKERS")
    if env:
        return max(1, int(env))
    return max(1, min(2, os.cpu_count() or 1))


def _exit_with_parent(parent: int) -> None:
    """A worker whose indexer was killed (-9) must not linger: poll for the parent and leave with it."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def _init(path: str, policy_args: tuple[Any, ...], with_symbols: bool, parent: int) -> None:
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    _worker["repo"] = open_repo(path)
    gitattributes, backstoryignore, excludes, max_bytes = policy_args
    _worker["policy"] = PathPolicy(gitattributes, backstoryignore, excludes, max_bytes)
    _worker["symbols"] = with_symbols


def _read_chunk(infos: list[CommitInfo]) -> list[CommitDiff | CommitInfo]:
    repo, policy, with_symbols = _worker["repo"], _worker["policy"], _worker["symbols"]
    return [
        read_merge(repo, i) if i.is_merge else read_commit(repo, i, policy, with_symbols=with_symbols) for i in infos
    ]


def read_all(
    repo: Repo, todo: Sequence[CommitInfo], policy: PathPolicy, with_symbols: bool
) -> Iterator[CommitDiff | CommitInfo]:
    """Every commit of ``todo`` read (merges passed through), in order."""
    n = workers()
    if n <= 1 or len(todo) < MIN_PARALLEL:
        for info in todo:
            yield (
                read_merge(repo, info) if info.is_merge else read_commit(repo, info, policy, with_symbols=with_symbols)
            )
        return
    args = (policy.gitattributes, policy.backstoryignore, policy.extra_excludes, policy.max_file_bytes)
    ctx = multiprocessing.get_context("spawn")
    chunks = [list(todo[i : i + CHUNK]) for i in range(0, len(todo), CHUNK)]
    with ProcessPoolExecutor(
        n, mp_context=ctx, initializer=_init, initargs=(repo.path, args, with_symbols, os.getpid())
    ) as pool:
        pending: list[Future[list[CommitDiff | CommitInfo]]] = []
        ahead = n * 3
        it = iter(chunks)
        try:
            for chunk in it:
                pending.append(pool.submit(_read_chunk, chunk))
                if len(pending) >= ahead:
                    break
            while pending:
                done = pending.pop(0)
                nxt = next(it, None)
                if nxt is not None:
                    pending.append(pool.submit(_read_chunk, nxt))
                yield from done.result()
        finally:
            for f in pending:
                f.cancel()
