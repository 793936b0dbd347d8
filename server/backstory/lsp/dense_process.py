"""The dense (embedding) phase of the language server, run in a child process.

Why a process and not a thread: embedding holds the model's activations (~100 MB more at peak) and a lot of
Python work (tokenizing, assembling passages) that competes for the GIL with hovers and searches. In a spawned
child the server's own memory stays at "models loaded for queries" and its event loop stays responsive; the
child writes vectors and catalogue marks under the index write lock exactly as ``backstory index`` does, and the
server's dense lane picks up the saved vectors by modification time.

The child exits with its parent (``kill -9`` of the server leaves nothing behind) and stops between batches
when the server's cancel event is set.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..index.store import RebuildNeeded, StoreError

POLL_SECONDS = 0.2
LOCK_WAIT_SECONDS = 30.0


def _exit_with_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def _child(store_path: str, model_path: str | None, conn: Connection, cancel: Any, parent: int) -> None:
    """Entry point of the child: embed every pending unit, reporting progress and the outcome over ``conn``."""
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    try:
        from ..index.dense_build import embed_pending
        from ..index.store import Store
        from ..models import Embedder, ModelUnavailable, resolve_model

        try:
            embedder = Embedder(resolve_model(model_path))
        except ModelUnavailable as e:
            conn.send(("skipped", str(e)))
            return
        store = Store(Path(store_path))

        def progress(phase: str, done: int, total: int) -> None:
            conn.send(("progress", phase, done, total))

        with store.write_lock(wait=LOCK_WAIT_SECONDS):
            done = embed_pending(store, embedder, progress=progress, cancel=cancel)
        conn.send(("done", done))
    except RebuildNeeded as e:
        conn.send(("rebuild", str(e)))
    except StoreError as e:
        conn.send(("store-error", str(e)))
    except BaseException as e:  # report anything else; the server keeps serving
        conn.send(("failed", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def embed_in_child(
    store_path: Path,
    model_path: str | None,
    progress: Callable[[str, int, int], None],
    cancel: threading.Event,
) -> tuple[str, Any]:
    """Run the dense phase in a spawned child; blocks (call it from a worker thread).

    Returns the child's outcome: ``("done", n)``, ``("skipped", why)`` when no model is available, or raises
    :class:`RebuildNeeded` / :class:`StoreError` like the in-process phase would. ``cancel`` is forwarded.
    """
    ctx = multiprocessing.get_context("spawn")  # never fork a process that runs threads
    stop = ctx.Event()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(
        target=_child, args=(str(store_path), model_path, send, stop, os.getpid()), name="backstory-embed", daemon=True
    )
    child.start()
    send.close()
    outcome: tuple[str, Any] = ("failed", "the embedding process exited without a result")
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
                    outcome = (msg[0], msg[1])
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
    kind, detail = outcome
    if kind == "rebuild":
        raise RebuildNeeded(detail)
    if kind == "store-error":
        raise StoreError(detail)
    if kind == "failed":
        raise RuntimeError(f"the embedding phase failed: {detail}")
    return outcome
