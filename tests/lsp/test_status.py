"""``backstory.status``, ``backstory.reindex`` and the ``backstory/status`` notification, on an indexed server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from backstory.lsp.constants import PROGRESS_TITLE
from backstory.lsp.server import IDLE_SECONDS

from .conftest import BackstoryClient, cmd, open_document, status, until, wait_runs, write_lock

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

REINDEX = "backstory.reindex"


def ready_messages(client: BackstoryClient) -> list[str]:
    return [s.get("message", "") for s in client.statuses if s.get("state") == "ready"]


async def test_status_reports_the_index_and_the_server(client: BackstoryClient, tmp_path: Path) -> None:
    root, shas = client.ws.root, client.ws.shas
    result = await status(client)
    assert Path(result["repo"]).resolve() == root.resolve()
    assert result["index"]["indexed_commits"] == len(shas)
    assert result["index"]["dense_coverage"] == 1.0
    assert result["index"]["head"] == shas["Log the retry attempts"]
    assert result["hunks"] >= len(shas)
    server = result["server"]
    assert server["state"] == "ready"
    assert Path(server["repo"]).resolve() == root.resolve()
    assert isinstance(server["hovers_cached"], int)
    # the notifications so far: the folder was found, then one (small, in-process) indexing run ended ready
    assert client.statuses[0]["state"] == "starting"
    assert [s["state"] for s in client.statuses].count("ready") == client.runs_ended() == 1
    assert client.statuses[-1]["state"] == "ready"
    assert client.statuses[-1]["indexed_commits"] == len(shas)
    # by document: the repository that holds it; outside any repository: says so
    uri = open_document(client, client.ws.net)
    assert (await status(client, {"uri": uri}))["index"]["indexed_commits"] == len(shas)
    elsewhere = await status(client, {"uri": tmp_path.as_uri()})
    assert elsewhere["state"] == "no-repo"


async def test_free_heap_is_given_back_once_the_client_goes_quiet(client: BackstoryClient) -> None:
    before = (await status(client))["server"]["heap_releases"]
    await cmd(client, "backstory.search", {"query": "retry the poll"})
    await asyncio.sleep(IDLE_SECONDS * 2.5)  # quiet for longer than the server waits, and its next look
    assert (await status(client))["server"]["heap_releases"] > before


async def test_reindex_when_idle_runs_a_pass_with_progress(client: BackstoryClient) -> None:
    ended, tokens = client.runs_ended(), set(client.progress_reports)
    assert await cmd(client, REINDEX, {}) == {"started": True, "message": None}
    after = await wait_runs(client, ended + 1)
    assert after["server"]["state"] == "ready"
    assert after["index"]["indexed_commits"] == len(client.ws.shas)
    assert ready_messages(client)[-1] == "indexed 0 commit(s)"
    # the pass reported work-done progress under a token of its own: begin (titled), then end
    new = [t for t in client.progress_reports if t not in tokens]
    assert len(new) == 1
    reports = client.progress_reports[new[0]]
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert reports[0].title == PROGRESS_TITLE
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert reports[-1].message == "indexed 0 commit(s)"


async def test_reindex_while_a_pass_runs_is_refused_and_a_rebuild_restarts(client: BackstoryClient) -> None:
    """The test holds the index's writer lock, so the first pass waits in its history phase."""
    ended = client.runs_ended()
    with write_lock(client.ws.root):
        assert (await cmd(client, REINDEX, {}))["started"] is True

        async def indexing() -> bool:
            return (await status(client))["server"]["state"] == "indexing"

        await until(indexing, "the server to report indexing")
        assert await cmd(client, REINDEX, {}) == {"started": False, "message": "indexing is already running"}
        assert (await cmd(client, REINDEX, {"rebuild": True}))["started"] is True
    # the waiting pass ends cancelled, then the rebuild indexes (and embeds) everything again
    after = await wait_runs(client, ended + 2)
    assert ready_messages(client)[-2:] == ["cancelled", f"indexed {len(client.ws.shas)} commit(s)"]
    assert after["index"]["indexed_commits"] == len(client.ws.shas)
    assert after["index"]["dense_coverage"] == 1.0
    found = await cmd(client, "backstory.search", {"query": "retry with exponential backoff"})
    assert found["results"]


async def test_malformed_params_are_invalid_params(client: BackstoryClient) -> None:
    with pytest.raises(JsonRpcInvalidParams, match="'rebuild' must be a boolean"):
        await cmd(client, REINDEX, {"rebuild": "yes"})
    with pytest.raises(JsonRpcInvalidParams, match="one object argument"):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="backstory.status", arguments=["x"])
        )
    with pytest.raises(JsonRpcInvalidParams, match="'uri' must be a string"):
        await cmd(client, "backstory.status", {"uri": 3})
    assert (await status(client))["server"]["state"] == "ready"
