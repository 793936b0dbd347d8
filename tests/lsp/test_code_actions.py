"""Code actions: prior art / history for the symbol at the cursor, prior art for a selection. They carry the
client-side ``backstory.ui.*`` commands with the argument of the server command the client then runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from backstory.lsp.constants import UI_FIND_PRIOR_ART, UI_SYMBOL_HISTORY

from .conftest import BackstoryClient, cmd, open_document

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]


async def actions_at(client: BackstoryClient, path: Path, start: tuple[int, int], end: tuple[int, int]) -> list:
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
            range=types.Range(start=types.Position(*start), end=types.Position(*end)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert all(isinstance(a, types.CodeAction) for a in actions or [])
    return list(actions or [])


async def test_actions_on_the_symbol_at_the_cursor(client: BackstoryClient) -> None:
    net = client.ws.net
    uri = open_document(client, net)
    actions = await actions_at(client, net, (6, 4), (6, 4))
    titles = [a.title for a in actions]
    assert "Find prior art for `fetch_with_retry`" in titles
    assert "Show history of `fetch_with_retry`" in titles
    assert titles == ["Find prior art for `fetch_with_retry`", "Show history of `fetch_with_retry`"]
    arg = {"uri": uri, "position": {"line": 6, "character": 4}}
    assert [(a.command.command, list(a.command.arguments or [])) for a in actions] == [
        (UI_FIND_PRIOR_ART, [arg]),
        (UI_SYMBOL_HISTORY, [arg]),
    ]
    # what a client does with them: the matching server command, with the same argument
    prior = await cmd(client, "backstory.findPriorArt", arg)
    history = await cmd(client, "backstory.symbolHistory", arg)
    assert prior["symbol"]["name"] == history["symbol"]["name"] == "fetch_with_retry"


async def test_an_action_for_a_selection(client: BackstoryClient) -> None:
    net = client.ws.net
    uri = open_document(client, net)
    actions = await actions_at(client, net, (9, 0), (11, 0))
    assert any(a.title == "Find prior art for the selection" for a in actions)
    selection = next(a for a in actions if a.title == "Find prior art for the selection")
    assert selection.command.command == UI_FIND_PRIOR_ART
    arg = {"uri": uri, "range": {"start": {"line": 9, "character": 0}, "end": {"line": 11, "character": 0}}}
    assert list(selection.command.arguments or []) == [arg]
    # inside a definition the symbol's actions come too, after the selection's
    assert [a.title for a in actions][1:] == [
        "Find prior art for `fetch_with_retry`",
        "Show history of `fetch_with_retry`",
    ]
    result = await cmd(client, "backstory.findPriorArt", arg)
    assert "log.warning" in result["query"]


async def test_a_method_is_named_with_its_class(client: BackstoryClient) -> None:
    cache = client.ws.root / "src" / "app" / "cache.py"
    open_document(client, cache)
    actions = await actions_at(client, cache, (6, 8), (6, 8))
    assert [a.title for a in actions] == ["Find prior art for `LruCache.get`", "Show history of `LruCache.get`"]


async def test_no_actions_outside_definitions_or_repositories(client: BackstoryClient, tmp_path: Path) -> None:
    net = client.ws.net
    open_document(client, net)
    assert await actions_at(client, net, (0, 0), (0, 0)) == []  # import time
    readme = client.ws.root / "README.md"
    open_document(client, readme, language_id="markdown")
    assert await actions_at(client, readme, (0, 0), (0, 0)) == []  # no symbol parser: no symbol actions
    assert [a.title for a in await actions_at(client, readme, (0, 0), (0, 6))] == ["Find prior art for the selection"]
    outside = tmp_path / "loose.py"
    outside.write_text("def loose():\n    return 1\n")
    open_document(client, outside)
    assert await actions_at(client, outside, (1, 4), (1, 4)) == []  # not in a git repository
