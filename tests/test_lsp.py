"""End-to-end language server tests over stdio (pytest-lsp), with VS Code's and Neovim's capability sets."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from backstory.symbols import extract_definitions
from gitrepo import GitRepo, build_sample

pytestmark = pytest.mark.timeout(240)


def _fix_code_action_decoding(client: LanguageClient) -> None:
    """pytest-lsp decodes a CodeAction carrying a command as a bare Command; pick by shape instead."""
    converter = client.protocol._converter
    union = types.Command | types.CodeAction

    def hook(obj: Any, _t: Any) -> Any:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(union, hook)


@pytest_lsp.fixture(
    params=["visual-studio-code", "neovim"],
    config=ClientServerConfig(server_command=[sys.executable, "-m", "backstory", "serve", "--stdio"]),
)
async def lsp_client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: Path):
    root = tmp_path / "ws"
    shas = build_sample(root)
    params = types.InitializeParams(
        capabilities=client_capabilities(request.param),
        root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name="ws")],
        initialization_options={"k": 5, "dense": True},
    )
    _fix_code_action_decoding(lsp_client)
    await lsp_client.initialize_session(params)
    lsp_client.sample = (root, shas)  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def wait_ready(client: LanguageClient, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="backstory.status", arguments=[{}])
        )
        server = status.get("server", {}) if isinstance(status, dict) else {}
        if server.get("state") == "ready":
            return status
        await asyncio.sleep(0.3)
    raise AssertionError(f"server never became ready: {status}")


def _open(client: LanguageClient, path: Path) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=path.read_text())
        )
    )
    return uri


async def _cmd(client: LanguageClient, name: str, arg: Any) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=[arg]))


@pytest.mark.asyncio
async def test_end_to_end(lsp_client: LanguageClient) -> None:
    root, shas = lsp_client.sample  # type: ignore[attr-defined]
    status = await wait_ready(lsp_client)
    assert status["index"]["indexed_commits"] == len(shas)
    assert lsp_client.progress_reports, "indexing reports work-done progress"
    # the dense phase ran in a child process; the server sees every vector it wrote
    assert status["index"]["dense_coverage"] == 1.0

    uri = _open(lsp_client, root / "src/app/net.py")
    # findPriorArt on fetch_with_retry: exact history first
    result = await _cmd(lsp_client, "backstory.findPriorArt", {"uri": uri, "position": {"line": 4, "character": 6}})
    assert result["symbol"]["name"] == "fetch_with_retry"
    exact_subjects = [e["commit"]["subject"] for e in result["exact"]]
    assert exact_subjects == ["Log the retry attempts", "Add retry with exponential backoff"]
    assert all(e["provenance"] == "EXACT" for e in result["exact"])
    assert all(r["commit"]["sha"] not in {shas[s] for s in exact_subjects} for r in result["results"])

    # free-text search
    found = await _cmd(lsp_client, "backstory.search", {"query": "retry an HTTP request with exponential backoff"})
    assert found["results"][0]["commit"]["sha"] in {
        shas["Add retry with exponential backoff"],
        shas["Log the retry attempts"],
    }
    assert "lanes" in found["results"][0]["why"]

    # opening the document prewarmed the hovers of its definitions in the background
    n_defs = len(extract_definitions((root / "src/app/net.py").read_bytes(), "python") or [])
    assert n_defs >= 1
    deadline = time.monotonic() + 60
    while (cached := (await _cmd(lsp_client, "backstory.status", {}))["server"]["hovers_cached"]) < n_defs:
        assert time.monotonic() < deadline, f"prewarm cached {cached} of {n_defs} hovers"
        await asyncio.sleep(0.2)

    # hover shows exact history (a cache hit now: the count does not grow)
    hover = await lsp_client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=4, character=8)
        )
    )
    assert hover is not None
    value = hover.contents.value  # type: ignore[union-attr]
    assert "Past changes to `fetch_with_retry`" in value
    assert shas["Add retry with exponential backoff"][:7] in value
    assert (await _cmd(lsp_client, "backstory.status", {}))["server"]["hovers_cached"] == cached

    # code actions on the symbol and on a selection
    actions = await lsp_client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=6, character=4), end=types.Position(line=6, character=4)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    titles = [a.title for a in actions or []]
    assert "Find prior art for `fetch_with_retry`" in titles
    assert "Show history of `fetch_with_retry`" in titles
    sel = await lsp_client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=9, character=0), end=types.Position(line=11, character=0)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert any(a.title == "Find prior art for the selection" for a in sel or [])

    # showCommit gives text and hunk positions
    shown = await _cmd(lsp_client, "backstory.showCommit", {"sha": shas["Add retry with exponential backoff"][:8]})
    assert "+            delay *= 2" in shown["text"]
    first = shown["hunks"][0]
    assert shown["text"].split("\n")[first["line"]].startswith("@@")

    # a commit made during the session becomes searchable
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = root, 50
    new_sha = repo.commit(
        "Add jitter to the circuit breaker", {"src/app/breaker.py": "def circuit_breaker_jitter():\n    return 42\n"}
    )
    deadline = time.monotonic() + 30
    while True:
        found = await _cmd(lsp_client, "backstory.search", {"query": "circuit breaker jitter"})
        if found["results"] and found["results"][0]["commit"]["sha"] == new_sha:
            break
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)

    # malformed params: InvalidParams, and the server keeps serving
    with pytest.raises(JsonRpcInvalidParams) as info:
        await _cmd(lsp_client, "backstory.findPriorArt", {"uri": uri, "position": {"line": "x"}})
    assert "line" in str(info.value)
    with pytest.raises(JsonRpcInvalidParams, match="one object argument"):
        await lsp_client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="backstory.search", arguments=[1, 2])
        )
    with pytest.raises(JsonRpcInvalidParams, match="query"):
        await _cmd(lsp_client, "backstory.search", {"query": 42})
    again = await _cmd(lsp_client, "backstory.search", {"query": "date formatting"})
    assert again["results"]


@pytest.mark.asyncio
async def test_shutdown_while_embedding_exits_promptly_and_keeps_the_index(tmp_path: Path) -> None:
    """shutdown + exit in the middle of the dense phase: the embedding child stops between batches, nothing is
    written to the closed stream, the process exits, and the index stays usable (a later run resumes)."""
    from pygls.lsp.client import LanguageClient as PlainClient

    from gitrepo import fast_history

    root = tmp_path / "big"
    fast_history(root, 1500)
    client = PlainClient("test", "1")
    phases: list[str | None] = []
    client.feature("backstory/status")(lambda p: phases.append(getattr(p, "phase", None)))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda p: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    await client.initialize_async(types.InitializeParams(capabilities=caps, root_uri=root.as_uri()))
    client.initialized(types.InitializedParams())
    deadline = time.monotonic() + 120
    while "dense" not in phases:
        assert time.monotonic() < deadline, f"no dense phase seen: {phases[-3:]}"
        await asyncio.sleep(0.05)
    await client.shutdown_async(None)
    client.exit(None)
    started = time.monotonic()
    await asyncio.wait_for(client.stop(), 30)
    assert time.monotonic() - started < 30

    from backstory.search.engine import Engine

    engine = Engine(root, None)
    index = engine.status()["index"]
    assert index["indexed_commits"] == 1500
    assert 0.0 <= index["dense_coverage"] < 1.0  # stopped part-way, resumable
    engine.close()


@pytest.mark.asyncio
async def test_outdated_index_is_rebuilt_by_the_indexing_child(tmp_path: Path) -> None:
    """The child reports "rebuild needed" across the process boundary; the server rebuilds instead of failing."""
    import json
    import subprocess

    from pygls.lsp.client import LanguageClient as PlainClient

    from gitrepo import fast_history

    root = tmp_path / "old"
    fast_history(root, 30)
    subprocess.run([sys.executable, "-m", "backstory", "index", "--no-dense", str(root)], check=True)
    manifest = root / ".git" / "backstory" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["schema_version"] = 1  # as if written by an old version
    manifest.write_text(json.dumps(data))
    client = PlainClient("test", "1")
    messages: list[str] = []
    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda p: messages.append(p.message))
    client.feature("backstory/status")(lambda p: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=root.as_uri(), initialization_options={"dense": False}
        )
    )
    client.initialized(types.InitializedParams())
    try:
        status = await wait_ready(client)
        assert status["index"]["indexed_commits"] == 30
        assert any("rebuilding the index" in m for m in messages)
        assert json.loads(manifest.read_text())["schema_version"] != 1
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await asyncio.wait_for(client.stop(), 30)
