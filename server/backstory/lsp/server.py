"""The Backstory language server (pygls 2): lifecycle, and the one registry of feature modules.

Features live in one module each (commands, hover, code actions); each has a ``register(server)``
and this file is the only place that calls them. The server object itself (options, repositories, status)
is :class:`~.base.BackstoryServer`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from lsprotocol import types

from ..index import memory
from . import changes, code_actions, commands, hover
from .base import BackstoryServer
from .constants import CONFIG_SECTION
from .indexing import start_indexing, watch_heads
from .params import uri_path

log = logging.getLogger(__name__)
FEATURES = (commands, hover, code_actions, changes)
PARENT_POLL_SECONDS = 2.0


server = BackstoryServer()


def add_folder(ls: BackstoryServer, uri: str) -> None:
    """Start serving the repository that contains a workspace folder (once per repository)."""
    path = uri_path(uri)
    state = ls.repos.add(path, ls.options)
    if state is None:
        ls.report_once(
            f"Backstory: {path} is not inside a git repository; its features stay empty there.",
            types.MessageType.Info,
        )
        return
    ls.send_status(state)
    start_indexing(ls, state)


@server.feature(types.INITIALIZE)
def on_initialize(ls: BackstoryServer, params: types.InitializeParams) -> None:
    ls.apply_options(params.initialization_options)
    if params.process_id:
        ls._background.append(asyncio.ensure_future(_watch_parent(ls, params.process_id)))


@server.feature(types.INITIALIZED)
async def on_initialized(ls: BackstoryServer, _params: types.InitializedParams) -> None:
    await ls.pull_configuration()
    folders = list(ls.workspace.folders.values())
    uris = [f.uri for f in folders] or ([ls.workspace.root_uri] if ls.workspace.root_uri else [])
    for uri in uris:
        add_folder(ls, uri)
    ls._background.append(asyncio.ensure_future(watch_heads(ls)))
    ls._background.append(asyncio.ensure_future(_give_heap_back(ls)))


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def on_configuration(ls: BackstoryServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict) and isinstance(settings.get(CONFIG_SECTION), dict):
        ls.apply_options(settings[CONFIG_SECTION])
    else:
        await ls.pull_configuration()


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def on_folders(ls: BackstoryServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    for folder in params.event.added:
        add_folder(ls, folder.uri)


@server.feature(types.SHUTDOWN)
def on_shutdown(ls: BackstoryServer, _params: Any) -> None:
    _stop_work(ls)


@server.feature(types.EXIT)
def on_exit(ls: BackstoryServer, _params: Any) -> None:
    _stop_work(ls)  # an exit without shutdown too: indexing threads and the embedding child stop between batches


def _stop_work(ls: BackstoryServer) -> None:
    ls.closing = True
    for state in ls.repos.all():
        state.cancel.set()
    for task in ls._background:
        task.cancel()


async def _watch_parent(ls: BackstoryServer, pid: int) -> None:
    """Exit when the editor that started us dies without saying goodbye."""
    while True:
        await asyncio.sleep(PARENT_POLL_SECONDS)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.info("client process %s is gone; exiting", pid)
            for state in ls.repos.all():
                state.cancel.set()
            os._exit(0)
        except PermissionError:
            pass


#: Seconds without a client message, and none of its requests running, after which the server gives back the
#: heap pages its requests freed (once per burst of requests) ...
IDLE_SECONDS = 2.0
#: ... and at most this often while requests keep coming (hovers as a reader moves leave no quiet 2 s).
BUSY_SECONDS = 30.0


async def _give_heap_back(ls: BackstoryServer) -> None:
    """Give free heap pages back to the system once the client goes quiet, and every :data:`BUSY_SECONDS` while it
    does not (:func:`memory.release`, a few ms on a worker thread). glibc keeps what a burst of searches and
    hovers freed for its next requests: on git/git after lsp_bench's 900 requests its heaps held 39 MB free, 20 MB
    of them whole pages the system got back. Not after every request: trimming and faulting the pages in again
    cost each search 10-15 ms (eighteenth pass)."""
    protocol = ls.protocol
    done, last = -1, time.monotonic()  # the message count and the time at the last release
    while not ls.closing:
        await asyncio.sleep(IDLE_SECONDS / 2)
        now = time.monotonic()
        quiet = now - protocol.last_message >= IDLE_SECONDS and protocol.in_flight() == 0
        if protocol.messages != done and (quiet or now - last >= BUSY_SECONDS):
            done, last = protocol.messages, now
            await asyncio.to_thread(memory.release)
            ls.heap_releases += 1


for _feature in FEATURES:
    _feature.register(server)


def run(tcp: str | None = None) -> None:
    logging.basicConfig(level=os.environ.get("BACKSTORY_LOG", "WARNING"), format="%(name)s: %(message)s")
    memory.limit_arenas()  # before the request threads start (index/memory.py: 464 -> 367 MB on git/git)
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()


__all__ = ["BackstoryServer", "run", "server"]
