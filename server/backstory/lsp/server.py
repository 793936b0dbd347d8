"""The Backstory language server (pygls 2): lifecycle, options, and the registry of feature modules.

Features live in one module each (commands, hover, code actions); this file wires them in one place and owns
the per-repository state and status notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from . import code_actions, commands, hover
from .constants import CONFIG_SECTION, STATUS_NOTIFICATION
from .indexing import start_indexing, watch_heads
from .options import Options, parse_options
from .params import uri_path
from .state import Repos, RepoState

log = logging.getLogger(__name__)
FEATURES = (commands, hover, code_actions)
PARENT_POLL_SECONDS = 2.0


class BackstoryServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("backstory", __version__)
        self.options = Options()
        self.repos = Repos()
        self._reported: set[str] = set()
        self._background: list[asyncio.Task[None]] = []
        self.closing = False  # after shutdown/exit nothing may be written: the client stopped reading

    # -- reporting --------------------------------------------------------------------------------------------

    def report_once(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Show a message once per server lifetime (no storms when every request hits the same problem)."""
        if message in self._reported:
            return
        self._reported.add(message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def status_payload(self, state: RepoState) -> dict[str, Any]:
        payload: dict[str, Any] = {"repo": str(state.root), **state.status}
        with contextlib.suppress(Exception):
            if state.engine.store.exists():
                info, _allowed, _hint = state.engine.freshness()
                payload.update(
                    indexed_commits=info.get("indexed_commits"),
                    commits_behind_head=info.get("commits_behind_head"),
                    dense_coverage=info.get("dense_coverage"),
                    head=info.get("head"),
                )
        if "message" not in payload or payload["message"] is None:
            payload["message"] = f"Backstory: {payload.get('state')}"
        return payload

    def send_status(self, state: RepoState) -> None:
        if self.closing:
            return
        self.protocol.notify(STATUS_NOTIFICATION, self.status_payload(state))

    # -- options ----------------------------------------------------------------------------------------------

    def apply_options(self, raw: Any) -> None:
        options, problems = parse_options(raw)
        for p in problems:
            self.report_once(p)
        self.options = options
        self.repos.reconfigure(options)

    async def pull_configuration(self) -> None:
        caps = self.client_capabilities.workspace
        if caps is None or not caps.configuration:
            return
        try:
            result = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=CONFIG_SECTION)])
            )
        except Exception:
            return
        if result and isinstance(result[0], dict):
            self.apply_options(result[0])

    # -- folders ----------------------------------------------------------------------------------------------

    def add_folder(self, uri: str) -> None:
        path = uri_path(uri)
        state = self.repos.add(path, self.options)
        if state is None:
            self.report_once(
                f"Backstory: {path} is not inside a git repository; its features stay empty there.",
                types.MessageType.Info,
            )
            return
        self.send_status(state)
        start_indexing(self, state)


server = BackstoryServer()


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
        ls.add_folder(uri)
    ls._background.append(asyncio.ensure_future(watch_heads(ls)))


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
        ls.add_folder(folder.uri)


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


for _feature in FEATURES:
    _feature.register(server)


def run(tcp: str | None = None) -> None:
    logging.basicConfig(level=os.environ.get("BACKSTORY_LOG", "WARNING"), format="%(name)s: %(message)s")
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()


__all__ = ["BackstoryServer", "run", "server"]
