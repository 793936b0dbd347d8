"""``backstory.showCommit``: a commit's header, message and diff as text, with where each hunk starts in it."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from .conftest import BackstoryClient, cmd

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

SHOW = "backstory.showCommit"


async def test_text_and_hunk_positions(client: BackstoryClient) -> None:
    sha = client.ws.shas["Add retry with exponential backoff"]
    shown = await cmd(client, SHOW, {"sha": sha[:8]})
    assert shown["sha"] == sha
    assert shown["title"] == f"{sha[:7]} Add retry with exponential backoff"
    assert shown["text"].startswith(f"commit {sha}\n")
    assert "Author: Grace Hopper <grace@example.com>" in shown["text"]
    assert "+            delay *= 2" in shown["text"]
    first = shown["hunks"][0]
    assert first["path"] == "src/app/net.py"
    assert shown["text"].split("\n")[first["line"]].startswith("@@")


async def test_refs_and_a_path(client: BackstoryClient) -> None:
    shas = client.ws.shas
    head = await cmd(client, SHOW, {"sha": "HEAD"})
    assert head["sha"] == shas["Log the retry attempts"]
    parent = await cmd(client, SHOW, {"sha": "HEAD~1"})
    assert parent["sha"] == shas["Add an LRU cache"]
    only = await cmd(client, SHOW, {"sha": shas["Initial project layout"], "path": "README.md"})
    assert {h["path"] for h in only["hunks"]} == {"README.md"}
    assert "src/app/__init__.py" not in only["text"]


async def test_unknown_commits_and_malformed_params_are_invalid_params(client: BackstoryClient) -> None:
    with pytest.raises(JsonRpcInvalidParams, match="no commit starting with"):
        await cmd(client, SHOW, {"sha": "0000000"})
    with pytest.raises(JsonRpcInvalidParams, match="does not change"):
        await cmd(client, SHOW, {"sha": client.ws.shas["Add an LRU cache"], "path": "README.md"})
    with pytest.raises(JsonRpcInvalidParams, match="'sha' must be a non-empty string"):
        await cmd(client, SHOW, {"sha": ""})
    again = await cmd(client, SHOW, {"sha": "HEAD"})
    assert again["sha"] == client.ws.shas["Log the retry attempts"]
