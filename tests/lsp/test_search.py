"""``backstory.search``: free-text search over the history, with filters; malformed arguments are InvalidParams."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from .conftest import BackstoryClient, cmd

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

SEARCH = "backstory.search"
RETRY = {"Add retry with exponential backoff", "Log the retry attempts"}


async def test_free_text_finds_the_commit_and_says_why(client: BackstoryClient) -> None:
    shas = client.ws.shas
    found = await cmd(client, SEARCH, {"query": "retry an HTTP request with exponential backoff"})
    assert found["query"] == "retry an HTTP request with exponential backoff"
    assert found["results"][0]["commit"]["sha"] in {shas[s] for s in RETRY}
    assert "lanes" in found["results"][0]["why"]
    assert all(r["provenance"] == "INFERRED" for r in found["results"])
    assert len(found["results"]) <= 5  # initializationOptions k
    assert found["_meta"]["index"]["indexed_commits"] == len(shas)


async def test_filters_and_k(client: BackstoryClient) -> None:
    shas = client.ws.shas
    one = await cmd(client, SEARCH, {"query": "retry an HTTP request with exponential backoff", "k": 1})
    assert len(one["results"]) == 1
    by_bob = await cmd(client, SEARCH, {"query": "helpers cache logging retry", "author": "bob"})
    assert by_bob["results"]
    assert {r["commit"]["sha"] for r in by_bob["results"]} <= {
        shas["Add date formatting helpers"],
        shas["Add an LRU cache"],
    }
    in_dates = await cmd(client, SEARCH, {"query": "format a timestamp", "path": "src/app/dates.py"})
    assert [r["commit"]["sha"] for r in in_dates["results"]] == [shas["Add date formatting helpers"]]


async def test_malformed_params_are_invalid_params_and_the_server_keeps_serving(client: BackstoryClient) -> None:
    with pytest.raises(JsonRpcInvalidParams, match="one object argument"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command=SEARCH, arguments=[1, 2]))
    with pytest.raises(JsonRpcInvalidParams, match="query"):
        await cmd(client, SEARCH, {"query": 42})
    with pytest.raises(JsonRpcInvalidParams, match="'k' must be an integer"):
        await cmd(client, SEARCH, {"query": "retry", "k": 0})
    with pytest.raises(JsonRpcInvalidParams):
        await cmd(client, SEARCH, {"query": "retry", "since": "not a date"})
    again = await cmd(client, SEARCH, {"query": "date formatting"})
    assert again["results"]


async def test_branch_scope_params(client: BackstoryClient) -> None:
    """``branch`` names a revision (HEAD's own history here: the same answer); an unknown one is said in the
    hint; ``allBranches`` on an index of HEAD's history only says how to widen it; a wrong type is invalid."""
    query = "retry an HTTP request with exponential backoff"
    plain = await cmd(client, SEARCH, {"query": query})
    on_head = await cmd(client, SEARCH, {"query": query, "branch": "HEAD"})
    assert [r["commit"]["sha"] for r in on_head["results"]] == [r["commit"]["sha"] for r in plain["results"]]
    unknown = await cmd(client, SEARCH, {"query": query, "branch": "no-such-branch"})
    assert not unknown["results"] and "unknown revision 'no-such-branch'" in unknown["_meta"]["hint"]
    everywhere = await cmd(client, SEARCH, {"query": query, "allBranches": True})
    assert any("--all-branches" in w for w in everywhere["_meta"]["warnings"])
    with pytest.raises(JsonRpcInvalidParams, match="allBranches"):
        await cmd(client, SEARCH, {"query": query, "allBranches": "yes"})
