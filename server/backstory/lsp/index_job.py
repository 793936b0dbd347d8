"""The language server's indexing job (history phase, then the dense phase), run in a spawned child process.

Why a process and not a thread: indexing holds a lot of transient memory (the Tantivy writer's heap, dulwich
and parse caches, the embedding model's activations) that a long-lived Python process never gives back to the
system, and its Python work (diff assembly, tokenizing) competes with hovers and searches for the GIL. In a
child, the server's memory stays at "catalogue + models for queries" and its event loop stays responsive. The
child writes under the index write lock exactly like ``backstory index``; the server's engine reads what it
committed (Tantivy reload, vectors by modification time). The child runs at a lower priority than the server
(:data:`BACKGROUND_NICENESS`), so the requests asked meanwhile win the cores.

Small updates (a few new commits after HEAD moved) run in the server itself instead (``run_index_here``):
spawning a child and importing the indexing stack costs about a second, which matters for "a new commit is
searchable within 2 s" and buys nothing for a handful of commits.

The child exits with its parent (``kill -9`` of the server leaves nothing behind) and stops between batches
when the server's cancel event is set; the outcome comes back as messages and is re-raised as the same errors
the in-process build raises.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

from ..history.repo import HistoryError
from ..index.build import BuildOptions, IndexReport
from ..index.parallel import exit_with_parent
from ..index.progress import Progress
from ..index.store import IndexBusy, RebuildNeeded, StoreError

POLL_SECONDS = 0.2
#: the child's (and its readers') niceness above the server's: hovers and searches asked while a long history
#: indexes get the cores first (on git/git's two cores a hover waited ~100 ms for them during the symbols phase,
#: against ~35 ms once the run was over), and the run takes back what the server leaves idle
BACKGROUND_NICENESS = 10
# how long a run waits for another writer before the server says so and waits itself (lsp/indexing.py: it
# retries as soon as the lock is free, so a long wait here would only hide why nothing happens)
LOCK_WAIT_SECONDS = 2.0


def _child(job: dict[str, Any], conn: Connection, cancel: Any, parent: int) -> None:
    """Entry point of the child: index, then embed, reporting progress and the outcome over ``conn``."""
    threading.Thread(target=exit_with_parent, args=(parent,), daemon=True).start()
    with contextlib.suppress(OSError, AttributeError):  # best effort: without nice, the server's priority
        os.nice(BACKGROUND_NICENESS)
    try:
        from ..index.job import run_index

        def progress(phase: str, done: int, total: int) -> None:
            conn.send(("progress", phase, done, total))

        result = run_index(
            job["root"], options=job["options"], index_dir=job["index_dir"], rebuild=job["rebuild"],
            dense=job["dense"], model_path=job["model_path"], progress=progress, cancel=cancel,
            wait=LOCK_WAIT_SECONDS, all_branches=job["all_branches"],
        )  # fmt: skip
        conn.send(("done", result.report, result.dense_note))
    except RebuildNeeded as e:
        conn.send(("rebuild", str(e)))
    except IndexBusy as e:
        conn.send(("busy", str(e), e.holder))
    except StoreError as e:
        conn.send(("store-error", str(e)))
    except HistoryError as e:
        conn.send(("history-error", str(e)))
    except BaseException as e:  # report anything else; the server keeps serving
        conn.send(("failed", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def run_index_job(
    root: Path,
    *,
    options: BuildOptions,
    index_dir: str | None,
    rebuild: bool,
    dense: bool,
    model_path: str | None,
    progress: Progress,
    cancel: threading.Event,
    all_branches: bool = False,
) -> tuple[IndexReport, str]:
    """Index ``root`` (and embed, with ``dense``) in a spawned child; blocks, so call it from a worker thread.

    Returns the history phase's report and the dense phase's note ("" or why it was skipped). Raises
    :class:`RebuildNeeded`, :class:`StoreError` or :class:`HistoryError` like :func:`index_repository`.
    """
    ctx = multiprocessing.get_context("spawn")  # never fork a process that runs threads
    stop = ctx.Event()
    receive, send = ctx.Pipe(duplex=False)
    job = {
        "root": str(root), "options": options, "index_dir": index_dir, "rebuild": rebuild, "dense": dense,
        "model_path": model_path, "all_branches": all_branches,
    }  # fmt: skip
    # not a daemon: the child starts its own reader processes (see index.parallel); it exits with us anyway
    child = ctx.Process(target=_child, args=(job, send, stop, os.getpid()), name="backstory-index")
    child.start()
    send.close()
    outcome: tuple[Any, ...] = ("failed", "the indexing process exited without a result")
    try:
        while True:
            if cancel.is_set():
                stop.set()
            if receive.poll(POLL_SECONDS):
                try:
                    msg = receive.recv()
                except EOFError:
                    break
                if msg[0] == "progress":
                    progress(msg[1], msg[2], msg[3])
                else:
                    outcome = msg
            elif not child.is_alive():
                break
    finally:
        if cancel.is_set():
            stop.set()
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
            child.join()
        receive.close()
    kind = outcome[0]
    if kind == "busy":
        raise IndexBusy(str(outcome[1]), str(outcome[2]))
    if kind == "done":
        report = cast(IndexReport, outcome[1])
        if cancel.is_set():
            report.cancelled = True
        return report, str(outcome[2])
    errors: dict[str, type[Exception]] = {
        "rebuild": RebuildNeeded, "store-error": StoreError, "history-error": HistoryError,
    }  # fmt: skip
    raise errors.get(kind, RuntimeError)(str(outcome[1]))


def run_index_here(
    root: Path,
    *,
    options: BuildOptions,
    index_dir: str | None,
    dense: bool,
    embedder: Callable[[], Any],
    progress: Progress,
    cancel: threading.Event,
    all_branches: bool = False,
) -> tuple[IndexReport, str]:
    """The same job in this process, for small incremental updates; ``embedder`` returns the server's model."""
    from ..index.job import run_index

    result = run_index(
        root, options=options, index_dir=index_dir, dense=dense, embedder=embedder, progress=progress,
        cancel=cancel, wait=LOCK_WAIT_SECONDS, verify=False, all_branches=all_branches,
    )  # fmt: skip
    return result.report, result.dense_note
