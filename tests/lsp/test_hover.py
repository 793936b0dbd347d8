"""Hover: "Past changes to `name`" (exact history) and related commits; prewarmed when a document opens; one line
while the index is not ready; off when the setting says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from backstory.symbols import extract_definitions

from .conftest import BackstoryClient, cmd, open_document, status, until, wait_runs, write_lock

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]


async def hover_at(client: BackstoryClient, path: Path, line: int, character: int) -> str | None:
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
            position=types.Position(line=line, character=character),
        )
    )
    if hover is None:
        return None
    assert isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.kind == types.MarkupKind.Markdown
    return hover.contents.value


async def hovers_cached(client: BackstoryClient) -> int:
    return int((await status(client))["server"]["hovers_cached"])


async def test_opening_a_document_prewarms_its_hovers(client: BackstoryClient) -> None:
    """First in the module: nothing else has filled the hover cache yet."""
    net, shas = client.ws.net, client.ws.shas
    open_document(client, net)
    n_defs = len(extract_definitions(net.read_bytes(), "python") or [])
    assert n_defs >= 1

    async def prewarmed() -> int | None:
        cached = await hovers_cached(client)
        return cached if cached >= n_defs else None

    cached = await until(prewarmed, f"the prewarm to cache the hovers of {n_defs} definition(s)")
    # a hover on fetch_with_retry's name shows its exact history, and is a cache hit: the count does not grow
    value = await hover_at(client, net, 3, 6)
    assert value is not None
    assert "Past changes to `fetch_with_retry`" in value
    assert shas["Add retry with exponential backoff"][:7] in value
    assert await hovers_cached(client) == cached


async def test_hover_on_a_definition_name(client: BackstoryClient) -> None:
    net, shas = client.ws.net, client.ws.shas
    open_document(client, net)
    value = await hover_at(client, net, 3, 6)  # def fetch_with_retry(...)
    assert value is not None
    lines = value.split("\n")
    assert lines[0] == "**Past changes to `fetch_with_retry`** · 2 changes"
    exact = [line for line in lines[2:] if line.startswith("- `")][:2]
    assert exact[0].startswith(f"- `{shas['Log the retry attempts'][:7]}` Log the retry attempts — Ada Lovelace, ")
    assert exact[1].startswith(
        f"- `{shas['Add retry with exponential backoff'][:7]}` Add retry with exponential backoff — Grace Hopper, "
    )
    if "**Related elsewhere**" in value:  # related commits name their file; never one of the exact ones
        related = value.split("**Related elsewhere**", 1)[1]
        assert shas["Log the retry attempts"][:7] not in related
        assert shas["Add retry with exponential backoff"][:7] not in related


async def test_hover_on_a_method_and_on_a_class(client: BackstoryClient) -> None:
    cache = client.ws.root / "src" / "app" / "cache.py"
    sha = client.ws.shas["Add an LRU cache"][:7]
    open_document(client, cache)
    method = await hover_at(client, cache, 5, 9)  # def get(self, key)
    assert method is not None
    assert method.startswith("**Past changes to `LruCache.get`**")
    assert f"`{sha}` Add an LRU cache — Bob Builder" in method
    klass = await hover_at(client, cache, 0, 8)  # class LruCache
    assert klass is not None
    assert klass.startswith("**Past changes to `LruCache`**")


async def test_no_hover_outside_definitions(client: BackstoryClient) -> None:
    net = client.ws.net
    open_document(client, net)
    assert await hover_at(client, net, 0, 8) is None  # import time
    assert await hover_at(client, net, 1, 0) is None  # a blank line
    readme = client.ws.root / "README.md"
    open_document(client, readme, language_id="markdown")
    assert await hover_at(client, readme, 0, 3) is None  # no symbol parser for Markdown


async def test_the_hover_setting_turns_hovers_off(client: BackstoryClient) -> None:
    """The server pulls ``workspace/configuration`` (section ``backstory``) when told the settings changed."""
    net = client.ws.net
    open_document(client, net)
    client.set_configuration({"k": 5, "dense": True, "hover": {"enabled": False}, "hoverMax": 0}, section="backstory")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def off() -> bool:
        return await hover_at(client, net, 3, 6) is None

    await until(off, "hovers to turn off")
    # the invalid value is reported (once), and the valid ones still apply
    assert [m.message for m in client.messages if "hoverMax=0" in m.message] == [
        "Backstory option hoverMax=0 is invalid (hoverMax must be >= 1); using 3"
    ]
    client.set_configuration({"k": 5, "dense": True}, section="backstory")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def on() -> str | None:
        return await hover_at(client, net, 3, 6)

    assert "Past changes to `fetch_with_retry`" in await until(on, "hovers to turn on again")


async def test_while_indexing_the_hover_says_so(client: BackstoryClient) -> None:
    """Last in the module: it runs an indexing pass. The test holds the index's writer lock, so the pass the reindex
    starts waits in its history phase for as long as the test looks."""
    net = client.ws.net
    open_document(client, net)
    ended = client.runs_ended()
    with write_lock(client.ws.root):
        assert (await cmd(client, "backstory.reindex", {}))["started"] is True

        async def indexing() -> bool:
            return (await status(client))["server"]["state"] == "indexing"

        await until(indexing, "the server to report indexing")
        value = await hover_at(client, net, 3, 6)
        assert value is not None
        assert value.startswith("Backstory: indexing history")
        assert value.endswith("past changes will show here when it is done.")
    await wait_runs(client, ended + 1)
    value = await hover_at(client, net, 3, 6)
    assert value is not None
    assert value.startswith("**Past changes to `fetch_with_retry`**")


def test_the_cache_keeps_a_model_compressed_and_gives_it_back_whole() -> None:
    """The hover cache holds each model as compressed JSON (a model is ~39 KB of Python objects on git/git, and
    the cache is prewarmed for every opened document); a hit gives back the same model, a fresh copy each time."""
    from backstory.lsp.hover import _frozen, _thawed

    commit = {"sha": "a" * 40, "subject": "Fix naïve 漢字 😀 \udc80 parsing", "date": 1.5e9}
    row = {"commit": commit, "hunks": [{"path": "x.c"}]}
    model = {"symbol": {"name": "f", "start": 3}, "commits": [row] * 3, "related": [row] * 8, "more": False, "x": None}
    frozen = _frozen(model)
    assert isinstance(frozen, bytes) and len(frozen) < len(str(model)) / 4
    thawed = _thawed(frozen)
    assert thawed == model and thawed is not _thawed(frozen)
    thawed["commits"].clear()  # a caller changing its copy leaves the cached one alone
    assert _thawed(frozen) == model
