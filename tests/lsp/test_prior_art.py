"""``backstory.findPriorArt``: the symbol's exact history first, related commits elsewhere; a selection's prior art."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from .conftest import BackstoryClient, cmd, open_document

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

FIND = "backstory.findPriorArt"
EXACT = ["Log the retry attempts", "Add retry with exponential backoff"]  # newest first


async def test_exact_history_first_then_related_commits(client: BackstoryClient) -> None:
    shas = client.ws.shas
    uri = open_document(client, client.ws.net)
    result = await cmd(client, FIND, {"uri": uri, "position": {"line": 4, "character": 6}})
    assert result["symbol"]["name"] == "fetch_with_retry"
    assert result["symbol"]["path"] == "src/app/net.py"
    exact_subjects = [e["commit"]["subject"] for e in result["exact"]]
    assert exact_subjects == EXACT
    assert all(e["provenance"] == "EXACT" for e in result["exact"])
    # the related results leave out what the exact history already shows
    assert all(r["commit"]["sha"] not in {shas[s] for s in exact_subjects} for r in result["results"])
    assert result["results"], "related commits elsewhere"
    assert all(r["provenance"] == "INFERRED" for r in result["results"])
    assert len(result["results"]) <= 5  # initializationOptions k


async def test_k_in_the_argument_overrides_the_setting(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.net)
    result = await cmd(client, FIND, {"uri": uri, "position": {"line": 4, "character": 6}, "k": 1})
    assert len(result["results"]) == 1
    assert [e["commit"]["subject"] for e in result["exact"]] == EXACT


async def test_a_selection_is_the_query(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.net)
    lines = client.ws.net.read_text().split("\n")
    result = await cmd(
        client,
        FIND,
        {"uri": uri, "range": {"start": {"line": 9, "character": 0}, "end": {"line": 11, "character": 0}}},
    )
    assert result["query"] == "\n".join([*lines[9:11], ""])
    assert "log.warning" in result["query"]
    # the selection's start is inside fetch_with_retry: its exact history comes along, and is not repeated
    assert [e["commit"]["subject"] for e in result["exact"]] == EXACT
    exact_shas = {e["commit"]["sha"] for e in result["exact"]}
    assert not exact_shas & {r["commit"]["sha"] for r in result["results"]}
    assert not result["_meta"]["warnings"]


async def test_outside_any_definition_searches_the_nearby_lines(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.net)
    result = await cmd(client, FIND, {"uri": uri, "position": {"line": 0, "character": 0}})
    assert result["symbol"] is None
    assert result["exact"] == []
    assert "import time" in result["query"]
    assert any("no enclosing symbol at src/app/net.py:1" in w for w in result["_meta"]["warnings"])


async def test_malformed_params_are_invalid_params_and_the_server_keeps_serving(client: BackstoryClient) -> None:
    uri = open_document(client, client.ws.net)
    with pytest.raises(JsonRpcInvalidParams) as info:
        await cmd(client, FIND, {"uri": uri, "position": {"line": "x"}})
    assert "line" in str(info.value)
    with pytest.raises(JsonRpcInvalidParams, match="'uri' must be a non-empty string"):
        await cmd(client, FIND, {"position": {"line": 4, "character": 6}})
    with pytest.raises(JsonRpcInvalidParams, match="'range' must be an object"):
        await cmd(client, FIND, {"uri": uri, "range": [1, 2]})
    # a document outside any repository: an answer with a hint, not an error
    outside = await cmd(
        client, FIND, {"uri": (client.ws.root.parent / "elsewhere.py").as_uri(), "position": {"line": 0}}
    )
    assert (outside["results"], outside["exact"]) == ([], [])
    assert "not inside a git repository" in outside["_meta"]["hint"]
    again = await cmd(client, FIND, {"uri": uri, "position": {"line": 4, "character": 6}})
    assert again["symbol"]["name"] == "fetch_with_retry"
