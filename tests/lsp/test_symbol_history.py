"""``backstory.symbolHistory``: every commit that changed the definition at a position (EXACT), newest first."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from .conftest import BackstoryClient, cmd, open_document

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

HISTORY = "backstory.symbolHistory"


async def test_every_commit_that_changed_the_function(client: BackstoryClient) -> None:
    shas = client.ws.shas
    uri = open_document(client, client.ws.net)
    result = await cmd(client, HISTORY, {"uri": uri, "position": {"line": 10, "character": 12}})
    assert result["message"] is None
    symbol = result["symbol"]
    assert (symbol["name"], symbol["kind"], symbol["path"]) == ("fetch_with_retry", "function", "src/app/net.py")
    assert (symbol["start"], symbol["end"]) == (4, 14)  # 1-based lines
    commits = result["commits"]
    assert [c["commit"]["sha"] for c in commits] == [
        shas["Log the retry attempts"],
        shas["Add retry with exponential backoff"],
    ]
    assert all(c["provenance"] == "EXACT" for c in commits)
    assert all(h["path"] == "src/app/net.py" for c in commits for h in c["hunks"])
    assert result["_meta"]["index"]["indexed_commits"] == len(shas)


async def test_a_method_is_named_with_its_class(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.root / "src" / "app" / "cache.py")
    result = await cmd(client, HISTORY, {"uri": uri, "position": {"line": 6, "character": 8}})
    assert result["symbol"]["name"] == "LruCache.get"
    assert [c["commit"]["subject"] for c in result["commits"]] == ["Add an LRU cache"]


async def test_outside_any_definition_says_why(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.net)
    result = await cmd(client, HISTORY, {"uri": uri, "position": {"line": 0, "character": 0}})
    assert result["symbol"] is None
    assert result["commits"] == []
    assert result["message"].startswith("no enclosing symbol at src/app/net.py:1")


async def test_malformed_params_are_invalid_params(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.net)
    with pytest.raises(JsonRpcInvalidParams, match="'position' must be an object"):
        await cmd(client, HISTORY, {"uri": uri})
    with pytest.raises(JsonRpcInvalidParams, match=r"'position\.character' must be a non-negative integer"):
        await cmd(client, HISTORY, {"uri": uri, "position": {"line": 4, "character": -1}})
    again = await cmd(client, HISTORY, {"uri": uri, "position": {"line": 4, "character": 0}})
    assert again["symbol"]["name"] == "fetch_with_retry"
