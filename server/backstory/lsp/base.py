"""The server object every LSP feature module is registered on: options, repositories, status reporting.

Its own module, below the feature modules and ``server.py`` (which wires them), so that handlers can name
``BackstoryServer`` in their annotations (pygls reads them at run time) without an import cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer

from .. import __version__
from .constants import CONFIG_SECTION, STATUS_NOTIFICATION
from .options import Options, parse_options
from .protocol import BackstoryProtocol, serve
from .state import Repos, RepoState

IndexListener = Callable[["BackstoryServer", RepoState], None]


class BackstoryServer(LanguageServer):
    protocol: BackstoryProtocol

    def __init__(self) -> None:
        super().__init__("backstory", __version__, protocol_cls=BackstoryProtocol)
        self.options = Options()
        self.repos = Repos()
        self._reported: set[str] = set()
        self._background: list[asyncio.Task[None]] = []
        self.closing = False  # after shutdown/exit nothing may be written: the client stopped reading
        self.heap_releases = 0  # free heap given back after the client went quiet (server._give_heap_back)
        # called on the event loop after a repository's indexing run ends ready (hover prewarms its documents)
        self.index_listeners: list[IndexListener] = []

    # -- transport --------------------------------------------------------------------------------------------

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve over stdio with the framing that survives broken messages (:mod:`.protocol`)."""
        self._stop_event = threading.Event()
        reader = StdinAsyncReader(stdin or sys.stdin.buffer, self.thread_pool)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(serve(self._stop_event, reader, self.protocol))
        except BrokenPipeError:
            pass  # the client is gone
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one TCP client at a time (for debugging), with the same framing as stdio."""
        self._stop_event = stop = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await serve(stop, reader, self.protocol)
            self.shutdown()

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            async with self._server:
                await self._server.serve_forever()

        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(listen())

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
            if state.engine.has_index():
                info, _allowed, _hint = state.engine.freshness()
                payload.update(
                    indexed_commits=info.get("indexed_commits"),
                    commits_behind_head=info.get("commits_behind_head"),
                    dense_coverage=info.get("dense_coverage"),
                    symbols_pending=info.get("symbols_pending"),
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
