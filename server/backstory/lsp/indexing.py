"""Background indexing as a tracked, cancellable task with work-done progress, plus the freshness watcher.

Indexing (history, then embeddings) runs in a spawned child process (see ``index_job``); the event loop only
relays progress. The watcher polls HEAD (two small file reads) twice a second: it works identically
in every client, unlike file-watcher registrations, and a new commit becomes searchable within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

from ..history.repo import HistoryError
from ..index import memory
from ..index.build import BuildOptions, IndexReport
from ..index.progress import PHASES
from ..index.store import IndexBusy, RebuildNeeded, StoreError
from ..views.status import unreadable_merges_note
from .constants import PROGRESS_TITLE
from .index_job import run_index_here, run_index_job

if TYPE_CHECKING:
    from .base import BackstoryServer
    from .state import RepoState

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5
REPORT_EVERY = 0.25


def start_indexing(ls: BackstoryServer, state: RepoState, rebuild: bool = False) -> bool:
    """Start (or, with ``rebuild``, restart) indexing of ``state``; False when a run is already going."""
    if state.indexing:
        if not rebuild:
            return False
        state.cancel.set()
    state.task = asyncio.ensure_future(_run(ls, state, rebuild, state.task))
    return True


async def _create_progress(ls: BackstoryServer) -> str | None:
    caps = ls.client_capabilities.window
    if caps is None or not caps.work_done_progress:
        return None
    token = f"backstory-index-{uuid.uuid4()}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:
        return None
    return token


async def _run(ls: BackstoryServer, state: RepoState, rebuild: bool, previous: asyncio.Task[None] | None) -> None:
    if previous is not None:
        with contextlib.suppress(BaseException):
            await previous
    state.cancel.clear()
    state.waiting_for = None
    loop = asyncio.get_running_loop()
    token = await _create_progress(ls)
    last = [0.0]
    git_released = [False]

    def progress(phase: str, done: int, total: int) -> None:
        if phase != "history" and state.status.get("phase") == "history":
            state.hover_cache.clear()  # history is complete: hovers may now show the new commits
        if phase in ("dense", "messages") and not git_released[0]:
            # the merges' blocks are stored (their phase comes before): exact history reads them from the catalogue,
            # and the libgit2 handle its hovers diffed through held ~40 MB for the rest of the run (git/git)
            git_released[0] = True
            state.engine.release_git()
        now = time.monotonic()
        if done < total and done > 0 and now - last[0] < REPORT_EVERY:
            return
        last[0] = now
        loop.call_soon_threadsafe(_report, ls, state, token, phase, done, total)

    if token is not None:
        ls.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=PROGRESS_TITLE, cancellable=True, message="starting", percentage=0)
        )
        future = ls.work_done_progress.tokens.get(token)
        if future is not None:
            future.add_done_callback(lambda f: state.cancel.set() if f.cancelled() else None)
    state.status = {"state": "indexing", "phase": "history", "done": 0, "total": 0}
    ls.send_status(state)
    message = "done"
    head = state.head()
    try:
        options = BuildOptions(excludes=tuple(ls.options.exclude))
        with contextlib.suppress(Exception):  # what the settings leave at its default follows the index, even
            options = options.following(state.engine.manifest().get("options") or {})  # in a rebuild

        branches = ls.options.allBranches  # from now on the index holds every branch (the setting)

        def build(rebuild: bool) -> tuple[IndexReport, str]:
            widening = branches and not state.engine.holds_branches()  # other branches' history: a long run
            if not rebuild and not widening and _small_update(state, ls.options.dense):
                return run_index_here(
                    state.root, options=options, index_dir=ls.options.indexDir, dense=ls.options.dense,
                    embedder=state.engine.embedder, progress=progress, cancel=state.cancel, all_branches=branches,
                )  # fmt: skip
            return run_index_job(
                state.root, options=options, index_dir=ls.options.indexDir, rebuild=rebuild, dense=ls.options.dense,
                model_path=ls.options.modelPath, progress=progress, cancel=state.cancel, all_branches=branches,
            )  # fmt: skip

        try:
            report, dense_note = await asyncio.to_thread(build, rebuild)
        except RebuildNeeded as e:
            # the server owns its index: an outdated one is rebuilt rather than left unusable
            ls.report_once(f"Backstory: rebuilding the index ({e})", types.MessageType.Info)
            report, dense_note = await asyncio.to_thread(build, True)
        if dense_note:
            log.info("dense phase skipped: %s", dense_note)
        if report.unreadable_merges:  # a damaged repository: said once, as `backstory index` says it
            ls.report_once(f"Backstory: {unreadable_merges_note(report.unreadable_merges)}")
        message = "cancelled" if state.cancel.is_set() else f"indexed {report.new_commits} commit(s)"
        state.status = {"state": "ready", "message": message}
    except IndexBusy as e:
        # another process (a `backstory index`, another editor's server) is writing: the watcher starts this
        # run again as soon as the lock is free, so the index catches up without HEAD having to move
        state.waiting_for = e.holder
        message = f"Backstory: another process ({e.holder}) is writing this index; indexing continues when it is done"
        state.status = {"state": "indexing", "phase": "waiting", "message": message}
    except (HistoryError, StoreError) as e:
        message = str(e)
        state.status = {"state": "error", "message": message}
        if not ls.closing:
            ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"Backstory: {e}"))
    except Exception as e:  # keep serving: report and log
        log.exception("indexing failed")
        message = f"indexing failed: {e}"
        state.status = {"state": "error", "message": message}
    finally:
        state.last_head = head  # after an error, retry only once HEAD moves again
        if token is not None and not ls.closing:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
        if token is not None:
            ls.work_done_progress.tokens.pop(token, None)  # pygls keeps every token's future otherwise
        state.hover_cache.clear()
        state.engine.release_git()  # libgit2's mapped pack index and pages, kept otherwise until the server exits
        memory.release()  # a run's churn (matrices re-read, graphs rebuilt, caches refilled) leaves free heap pages
        ls.send_status(state)
        if state.status.get("state") == "ready" and not ls.closing:
            for listener in ls.index_listeners:
                listener(ls, state)


def _small_update(state: RepoState, dense: bool) -> bool:
    """A few new commits on an existing, current index: run in the server (see Engine.small_update_due)."""
    return state.engine.small_update_due(dense)


def _report(ls: BackstoryServer, state: RepoState, token: str | None, phase: str, done: int, total: int) -> None:
    if ls.closing:
        return
    label, unit = PHASES.get(phase, (phase, "items"))
    message = f"{label} {done:,}/{total:,} {unit}"
    if token is not None:
        pct = int(100 * done / total) if total else 100
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=message, percentage=pct))
    state.status = {"state": "indexing", "phase": phase, "done": done, "total": total, "message": message}
    ls.send_status(state)


async def watch_heads(ls: BackstoryServer) -> None:
    """Re-index a repository shortly after its HEAD moves (commit, checkout, rebase, pull), or once the writer
    that held its lock is gone (read from /proc/locks twice a second: asking never takes the lock)."""
    while True:
        await asyncio.sleep(POLL_SECONDS)
        for state in ls.repos.all():
            if state.indexing:
                continue
            if state.waiting_for is not None:  # lost the writer-lock race: go again once the writer is gone
                if await asyncio.to_thread(state.engine.store.writer_pid) is None:
                    start_indexing(ls, state)
                continue
            head = await asyncio.to_thread(state.head)
            if head is not None and head != state.last_head:
                start_indexing(ls, state)
