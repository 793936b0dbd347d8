"""``backstory.findPriorArtForChanges``: prior art for the workspace's uncommitted change, end to end."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from .conftest import BackstoryClient, cmd

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

CHANGES = "backstory.findPriorArtForChanges"


async def test_uncommitted_change_finds_the_commits_that_wrote_the_code(client: BackstoryClient) -> None:
    ws = client.ws
    net, dates = ws.net, ws.root / "src/app/dates.py"
    original_net, original_dates = net.read_text(), dates.read_text()
    try:
        net.write_text(original_net.replace("delay *= 2", "delay = min(delay * 2, 30.0)"))
        dates.write_text(original_dates + "\n\ndef to_week(ts):\n    return format_timestamp(ts)[:4]\n")
        result = await cmd(client, CHANGES, {})
        assert {f["path"] for f in result["changes"]["files"]} == {"src/app/net.py", "src/app/dates.py"}
        assert result["changes"]["source"] == "worktree"
        assert all(r["provenance"] == "INFERRED" for r in result["results"])
        assert len(result["results"]) <= 5  # initializationOptions k
        # only the file asked for, given as a URI
        only = await cmd(client, CHANGES, {"paths": [net.as_uri()], "k": 2})
        assert [f["path"] for f in only["changes"]["files"]] == ["src/app/net.py"]
        subjects = {r["commit"]["subject"] for r in only["results"]}
        assert subjects == {"Add retry with exponential backoff", "Log the retry attempts"}
    finally:
        net.write_text(original_net)
        dates.write_text(original_dates)


async def test_a_revision_leaves_its_own_commit_out(client: BackstoryClient) -> None:
    shas = client.ws.shas
    logged = shas["Log the retry attempts"]
    result = await cmd(client, CHANGES, {"rev": logged[:10]})
    assert result["changes"]["commits"] == [logged]
    got = [r["commit"]["sha"] for r in result["results"]]
    assert logged not in got and shas["Add retry with exponential backoff"] in got


async def test_clean_worktree_and_bad_arguments(client: BackstoryClient) -> None:
    result = await cmd(client, CHANGES, {})
    assert result["results"] == [] and "no uncommitted changes" in result["_meta"]["hint"]
    with pytest.raises(JsonRpcInvalidParams):
        await cmd(client, CHANGES, {"paths": "src/app/net.py"})
