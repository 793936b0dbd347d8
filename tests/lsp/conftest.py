"""Shared fixtures for the language server tests: one module per LSP feature, real servers over stdio (pytest-lsp).

Each module shares one server per client capability set (VS Code's and Neovim's) through a module-scoped fixture,
so its tests run on an indexed server without paying for a server start and an index each. The sample repository
is indexed once per session (``backstory index``, the same indexing job the server runs) and copied into each
module's workspace; ``test_indexing.py`` has the server index from nothing instead.

Tests in a module that uses a module-scoped server run in the module's event loop:
``pytestmark = pytest.mark.asyncio(loop_scope="module")`` (pytest-asyncio needs the test's loop to be the one the
fixture's client lives on).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.lsp.client import LanguageClient as BaseClient
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import register_lsp_features

from backstory.lsp.constants import STATUS_NOTIFICATION
from gitrepo import build_sample

CLIENTS = ["visual-studio-code", "neovim"]
SERVE = [sys.executable, "-m", "backstory", "serve", "--stdio"]
OPTIONS = {"k": 5, "dense": True}
READY_TIMEOUT = 180.0


@dataclass(frozen=True)
class Sample:
    """The sample repository (tests/gitrepo.py: ``build_sample``) and its commits, subject -> sha."""

    root: Path
    shas: dict[str, str]

    @property
    def net(self) -> Path:
        """src/app/net.py: ``fetch_with_retry`` (lines 3-13, 0-based), changed by two commits."""
        return self.root / "src" / "app" / "net.py"


class BackstoryClient(LanguageClient):
    """pytest-lsp's client, plus the ``backstory/status`` notifications it received and the workspace it opened."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.statuses: list[dict[str, Any]] = []
        self.sample: Sample | None = None

    @property
    def ws(self) -> Sample:
        assert self.sample is not None, "the fixture did not open a workspace"
        return self.sample

    def runs_ended(self) -> int:
        """How many indexing runs have ended: each one ends with a ``ready`` (or ``error``) status notification."""
        return sum(1 for s in self.statuses if s.get("state") in ("ready", "error"))


def fix_code_action_decoding(client: LanguageClient) -> None:
    """pytest-lsp decodes a CodeAction carrying a command as a bare Command; pick by shape instead."""
    converter = client.protocol._converter
    union = types.Command | types.CodeAction

    def hook(obj: Any, _t: Any) -> Any:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(union, hook)


def make_client() -> BackstoryClient:
    client = BackstoryClient(converter_factory=default_converter)
    register_lsp_features(client)
    fix_code_action_decoding(client)

    @client.feature(STATUS_NOTIFICATION)
    def _status(params: Any) -> None:
        client.statuses.append(params._asdict() if hasattr(params, "_asdict") else dict(params))

    return client


SERVER = ClientServerConfig(server_command=SERVE, client_factory=make_client)


# -- helpers ------------------------------------------------------------------------------------------------------


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60, pause: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy (returned); fail with ``what`` after ``timeout`` seconds.

    A bound on waiting for an event, not an assertion on how long it took."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting: {what} (last: {value!r})"
        await asyncio.sleep(pause)


async def cmd(client: BaseClient, name: str, arg: Any) -> Any:
    """``workspace/executeCommand`` with the one object argument every Backstory command takes."""
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=[arg]))


async def status(client: BaseClient, arg: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await cmd(client, "backstory.status", arg or {})
    assert isinstance(result, dict)
    return result


async def wait_ready(client: BaseClient, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
    """The status once the server says ``ready`` (for a first run: its status starts at ``starting``)."""

    async def ready() -> dict[str, Any] | None:
        result = await status(client)
        server = result.get("server", {})
        return result if server.get("state") == "ready" else None

    return await until(ready, "the server to become ready", timeout, pause=0.3)


async def wait_runs(client: BackstoryClient, n: int, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
    """Wait until ``n`` indexing runs have ended (counted from the server's start), then return the status."""

    async def ended() -> bool:
        return client.runs_ended() >= n

    await until(ended, f"{n} indexing run(s) to end (statuses: {client.statuses[-3:]})", timeout)
    return await status(client)


def open_document(client: BaseClient, path: Path, language_id: str = "python") -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=path.read_text())
        )
    )
    return uri


def initialize_params(client_name: str, root: Path, options: dict[str, Any] | None = None) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=client_capabilities(client_name),
        root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options=OPTIONS if options is None else options,
    )


@contextlib.contextmanager
def write_lock(root: Path) -> Iterator[None]:
    """Hold the index's writer lock (``<git dir>/backstory/write.lock``, an flock; docs/architecture.md), so that
    an indexing run the server starts waits for it: the server stays "indexing" while the test looks. (The server
    waits up to 30 s for the lock, ``index_job.LOCK_WAIT_SECONDS``; the requests made under it take well under one.)"""
    path = root / ".git" / "backstory" / "write.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def copy_sample(template: Sample, dest: Path) -> Sample:
    shutil.copytree(template.root, dest, symlinks=True)
    return Sample(dest, dict(template.shas))


# -- fixtures -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def indexed_sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The sample repository, indexed once per session (history and embeddings) with ``backstory index``."""
    root = tmp_path_factory.mktemp("indexed-sample") / "ws"
    shas = build_sample(root)
    subprocess.run([sys.executable, "-m", "backstory", "index", str(root)], check=True, capture_output=True)
    return Sample(root, shas)


@pytest_lsp.fixture(scope="module", params=CLIENTS, config=SERVER)
async def client(
    lsp_client: BackstoryClient,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    indexed_sample: Sample,
) -> AsyncIterator[None]:
    """A server on a copy of the indexed sample, ready; shared by the tests of one module, per client."""
    sample = copy_sample(indexed_sample, tmp_path_factory.mktemp("ws") / "ws")
    lsp_client.sample = sample
    await lsp_client.initialize_session(initialize_params(request.param, sample.root))
    ready = await wait_ready(lsp_client)
    # the server used the copied index as it is (up to date: nothing to rebuild, nothing to embed)
    assert ready["index"]["indexed_commits"] == len(sample.shas)
    assert ready["index"]["dense_coverage"] == 1.0
    assert not [m.message for m in lsp_client.messages if "rebuild" in m.message]
    yield
    await lsp_client.shutdown_session()
