"""Background indexing for the MCP server: the language server's job, driven by HEAD instead of an editor.

The same rules as ``lsp/indexing.py``: a large job (the first index, a big pull, a re-embed after a model
change) runs in a spawned child (``lsp.index_job.run_index_job``), a few new commits run in this process
(``run_index_here``), both through ``index/job.py``'s one ``run_index`` and under the index's write lock, so
this server, a language server and ``backstory index`` on the same repository never write at once. When
another writer holds the lock, the indexer reports ``waiting`` (``index_status`` shows it) and tries again
every :data:`LOCK_RETRY_SECONDS`.

HEAD is polled once a second (two small file reads). Before answering, a tool call asks :meth:`Indexer.fresh`,
which waits (at most :data:`FRESH_WAIT_SECONDS`) for a *small* update of the current HEAD to finish its history
phase, so a commit an agent just made is in the next answer; a large job is not waited for: the answer says
the index is partial instead.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..history.repo import HistoryError
from ..index.build import BuildOptions, IndexReport
from ..index.progress import PHASES
from ..index.store import IndexBusy, RebuildNeeded, StoreError
from ..lsp.index_job import run_index_here, run_index_job

if TYPE_CHECKING:
    from ..search.engine import Engine

log = logging.getLogger(__name__)
T = TypeVar("T")

POLL_SECONDS = 1.0
LOCK_RETRY_SECONDS = 2.0
FRESH_WAIT_SECONDS = 30.0  # a bound for pathological cases: a small update takes about a second
FRESH_WAIT_COMMITS = 300  # a first index this close to done is waited for (a few seconds of history phase)


async def in_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a daemon thread: blocking work off the event loop that never holds up the process's exit
    (an indexing job stopped by exit is resumed by the next run; the index is crash-safe)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value = fn()
        except BaseException as e:
            loop.call_soon_threadsafe(settle, None, e)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=work, name="backstory-mcp-work", daemon=True).start()
    return await future


def lock_held(engine: Engine) -> bool:
    """Whether another process holds the index write lock."""
    return engine.writer_busy()


class Indexer:
    """Keeps one repository's index at HEAD; ``status`` is what ``index_status`` reports about the work."""

    def __init__(self, engine: Engine, lock: threading.Lock, index_dir: str | None = None, dense: bool = True):
        self.engine = engine
        self.lock = lock  # the engine's readers' lock (tool calls): the small-update check reads through it
        self.index_dir = index_dir
        self.dense = dense
        self.cancel = threading.Event()
        self.status: dict[str, Any] = {"state": "starting", "message": "starting"}
        self.done_head: str | None = None  # HEAD of the last finished job, whatever its outcome
        self.history_head: str | None = None  # HEAD whose history phase (keyword lanes, exact history) is done
        self.running = False
        self.small = False  # the running job is a small in-process update (worth waiting for)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="backstory-mcp-indexer")

    async def stop(self, grace: float) -> None:
        """Ask the job to stop between batches and wait up to ``grace`` seconds for it."""
        self.cancel.set()
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            except Exception:
                log.exception("indexer stopped with an error")

    def wake(self) -> None:
        self._wake.set()

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self._wake.clear()

    # -- the loop ---------------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        while not self.cancel.is_set():
            try:
                await self._step()
            except Exception as e:  # never let the loop die: report, wait, try again
                log.exception("indexer loop")
                self.status = {"state": "error", "message": f"indexing failed: {type(e).__name__}: {e}"}
                await self._sleep(LOCK_RETRY_SECONDS)

    async def _step(self) -> None:
        """One turn: index HEAD if it moved (or wait for another writer), else sleep until the next poll."""
        head = await in_thread(self.engine.head)
        if head is None:
            self.status = {"state": "ready", "message": "the repository has no commits yet"}
            self.done_head = self.history_head = None
        elif head != self.done_head:
            if not await in_thread(lambda: lock_held(self.engine)):
                await self._index(head)
                return  # HEAD may have moved meanwhile: the next turn looks again
            self.status = {
                "state": "waiting",
                "message": "another indexer (a language server or `backstory index`) holds the index write lock; "
                f"retrying every {LOCK_RETRY_SECONDS:g} s",
            }
            await self._sleep(LOCK_RETRY_SECONDS)
            return
        await self._sleep(POLL_SECONDS)

    async def _index(self, head: str) -> None:
        loop = asyncio.get_running_loop()

        def progress(phase: str, done: int, total: int) -> None:
            loop.call_soon_threadsafe(self._progress, head, phase, done, total)

        self.small = await in_thread(self._small_update)
        self.running = True
        self.status = {"state": "indexing", "phase": "history", "done": 0, "total": 0, "message": "starting"}
        try:
            try:
                report, note = await in_thread(lambda: self._build(False, progress))
            except RebuildNeeded as e:  # the index is outdated: rebuilt, as the language server does
                log.info("rebuilding the index: %s", e)
                self.small = False
                report, note = await in_thread(lambda: self._build(True, progress))
        except StoreError as e:
            if isinstance(e, IndexBusy) or await in_thread(lambda: lock_held(self.engine)):
                self.status = {
                    "state": "waiting",
                    "message": "another indexer (a language server or `backstory index`) holds the index write "
                    f"lock; retrying every {LOCK_RETRY_SECONDS:g} s",
                }
                return  # not done: the loop tries again
            self._failed(head, str(e))
        except HistoryError as e:
            self._failed(head, str(e))
        except Exception as e:  # keep serving: report and log
            log.exception("indexing failed")
            self._failed(head, f"indexing failed: {type(e).__name__}: {e}")
        else:
            message = "cancelled" if report.cancelled else f"indexed {report.new_commits} new commit(s)"
            if note:
                message += f"; embeddings skipped: {note}"
            self.status = {"state": "ready", "message": message}
            if not report.cancelled:
                self.done_head = self.history_head = head
        finally:
            self.running = False
            self.small = False

    def _failed(self, head: str, message: str) -> None:
        self.status = {"state": "error", "message": message}
        self.done_head = head  # retried when HEAD moves again, as in the language server

    def _progress(self, head: str, phase: str, done: int, total: int) -> None:
        if phase == "dense":
            self.history_head = head  # history and merges are done: keyword lanes and exact history are current
        label, unit = PHASES.get(phase, (phase, "items"))
        message = f"{label} {done:,}/{total:,} {unit}"
        self.status = {"state": "indexing", "phase": phase, "done": done, "total": total, "message": message}

    def _build(self, rebuild: bool, progress: Callable[[str, int, int], None]) -> tuple[IndexReport, str]:
        options = BuildOptions()
        root = self.engine.root
        if self.small and not rebuild:
            return run_index_here(
                root, options=options, index_dir=self.index_dir, dense=self.dense, embedder=self.engine.embedder,
                progress=progress, cancel=self.cancel,
            )  # fmt: skip
        return run_index_job(
            root, options=options, index_dir=self.index_dir, rebuild=rebuild, dense=self.dense, model_path=None,
            progress=progress, cancel=self.cancel,
        )  # fmt: skip

    def _small_update(self) -> bool:
        """A few new commits on an existing, current index: cheaper here than in a spawned child (the language
        server's rule, :meth:`Engine.small_update_due`)."""
        with self.lock:
            return self.engine.small_update_due(self.dense)

    # -- for the tools ----------------------------------------------------------------------------------------

    async def fresh(self, timeout: float = FRESH_WAIT_SECONDS) -> None:
        """Wait (at most ``timeout``) until the history phase has caught up with HEAD, when that is a matter of
        seconds: a small update (started now if the poll has not seen HEAD move yet) or the last few hundred
        commits of a first index. Returns at once during a large job, while another writer holds the lock, or
        after a failure for this HEAD: the answer then says the index is partial."""
        head = await in_thread(self.engine.head)
        if head is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if head not in (self.history_head, self.done_head):
            self.wake()
        while head not in (self.history_head, self.done_head) and not self.cancel.is_set():
            if not self._worth_waiting() or loop.time() > deadline:
                return
            await asyncio.sleep(0.05)

    def _worth_waiting(self) -> bool:
        status = self.status
        if status.get("state") in ("waiting", "error"):
            return False
        if not self.running or self.small:
            return True  # about to start, or a small update
        if status.get("phase") != "history":
            return False
        total, done = status.get("total") or 0, status.get("done") or 0
        return total == 0 or total - done <= FRESH_WAIT_COMMITS  # 0: the walk has not counted them yet

    def snapshot(self) -> dict[str, Any]:
        """The indexing state for ``_meta`` and ``index_status``."""
        return dict(self.status)
