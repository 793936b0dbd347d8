"""End-to-end tests of ``backstory mcp``: the MCP SDK's own stdio client spawns ``python -m backstory mcp``
against real temporary git repositories (real Tantivy, usearch and the bundled ONNX model)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult

from backstory.history.repo import open_repo
from backstory.index.build import store_for
from gitrepo import GitRepo, build_sample

pytestmark = pytest.mark.timeout(300)

TOOLS = {"find_prior_art", "symbol_history", "show_commit", "index_status"}
BREAKER = '''class CircuitBreaker:
    """Stop calling a failing service for a while after repeated failures."""

    def __init__(self, threshold=3):
        self.failures = 0
        self.threshold = threshold

    def allow(self):
        return self.failures < self.threshold
'''


@contextlib.asynccontextmanager
async def serve(repo: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """A client session with ``backstory mcp -C repo`` (the environment passed on: model cache, PATH)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "backstory", "mcp", "-C", str(repo), *extra], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, **args: Any) -> CallToolResult:
    return await session.call_tool(name, args)


async def ok(session: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    """The structured content of a successful call (its text rendering is checked to be there too)."""
    result = await call(session, name, **args)
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    assert not result.is_error, text
    assert text.strip()
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return result.content[0].text  # type: ignore[union-attr]


async def wait_for(session: ClientSession, state: str, timeout: float = 180, dense: bool = True) -> dict[str, Any]:
    """Poll index_status until the background indexer reports ``state`` (and, for ready, full embeddings)."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = await ok(session, "index_status")
        server = status.get("server", {})
        done = state != "ready" or not dense or status["index"].get("dense_coverage") == 1.0
        if server.get("state") == state and done:
            return status
        await asyncio.sleep(0.3)
    raise AssertionError(f"the indexer never reached {state!r}: {status}")


@pytest.mark.asyncio
async def test_tools_are_listed_with_schemas_and_descriptions(tmp_path: Path) -> None:
    build_sample(tmp_path / "sample")
    async with serve(tmp_path / "sample") as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
    assert set(listed) == TOOLS
    for tool in listed.values():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert all(p.get("description") for p in schema.get("properties", {}).values()), tool.name
        assert "Use it" in (tool.description or "") and "Not for" in (tool.description or "")
        assert tool.annotations is not None and tool.annotations.read_only_hint
    props = listed["find_prior_art"].input_schema["properties"]
    assert {"query", "path", "line", "k", "since", "until", "path_glob", "author", "language"} == set(props)
    assert props["k"]["maximum"] == 20
    assert set(listed["symbol_history"].input_schema["required"]) == {"path", "line"}
    assert listed["show_commit"].input_schema["required"] == ["revision"]


@pytest.mark.asyncio
async def test_each_tool_and_a_new_commit_becomes_visible(tmp_path: Path) -> None:
    root = tmp_path / "sample"
    shas = build_sample(root)
    retry = {shas["Add retry with exponential backoff"], shas["Log the retry attempts"]}
    async with serve(root) as session:
        status = await wait_for(session, "ready")
        assert status["index"]["indexed_commits"] == len(shas)
        assert status["index"]["commits_behind_head"] == 0 and status["pending_units"] == 0
        assert status["hint"] is None

        # free text: INFERRED results with why, freshness, and the text rendering naming the short sha
        result = await call(session, "find_prior_art", query="retry an HTTP request with exponential backoff", k=3)
        found = result.structured_content
        assert found is not None and not result.is_error
        assert found["results"][0]["commit"]["sha"] in retry
        assert all(r["provenance"] == "INFERRED" for r in found["results"]) and len(found["results"]) <= 3
        assert found["_meta"]["index"]["commits_behind_head"] == 0
        assert found["_meta"]["indexing"]["state"] == "ready" and found["_meta"]["hint"] is None
        assert found["results"][0]["commit"]["short_sha"] in result.content[0].text  # type: ignore[union-attr]

        # a position: the definition's EXACT history, then related commits without duplicates
        at = await ok(session, "find_prior_art", path="src/app/net.py", line=5)
        assert at["symbol"]["name"] == "fetch_with_retry"
        assert [e["commit"]["subject"] for e in at["exact"]] == [
            "Log the retry attempts",
            "Add retry with exponential backoff",
        ]
        assert all(e["provenance"] == "EXACT" for e in at["exact"])
        assert not retry & {r["commit"]["sha"] for r in at["results"]}

        # filters
        by_bob = await ok(session, "find_prior_art", query="helpers cache dates", author="bob")
        assert by_bob["results"] and {r["commit"]["author"]["name"] for r in by_bob["results"]} == {"Bob Builder"}
        in_net = await ok(session, "find_prior_art", query="retry logging cache", path_glob="src/app/net.py")
        assert {r["commit"]["sha"] for r in in_net["results"]} == retry

        history = await ok(session, "symbol_history", path="src/app/net.py", line=7)
        assert history["symbol"]["name"] == "fetch_with_retry"
        assert [c["commit"]["sha"] for c in history["commits"]] == [
            shas["Log the retry attempts"],
            shas["Add retry with exponential backoff"],
        ]
        assert all(c["provenance"] == "EXACT" for c in history["commits"])
        newest = await ok(session, "symbol_history", path="src/app/net.py", line=7, limit=1)
        assert len(newest["commits"]) == 1 and "newest 1 of 2" in newest["_meta"]["warnings"][0]
        outside = await ok(session, "symbol_history", path="src/app/net.py", line=1)
        assert outside["symbol"] is None and "no enclosing symbol" in outside["message"]

        # show_commit with the short sha a search returned; a cut diff says how much was cut
        short = found["results"][0]["commit"]["short_sha"]
        shown = await ok(session, "show_commit", revision=short)
        assert shown["sha"] == found["results"][0]["commit"]["sha"] and not shown["truncated"]
        assert f"commit {shown['sha']}" in shown["text"] and "src/app/net.py" in shown["files"]
        cut = await ok(session, "show_commit", revision=shas["Add retry with exponential backoff"], max_lines=20)
        assert cut["truncated"] and cut["shown_lines"] == 20 and cut["lines"] > 20
        assert f"{cut['lines'] - 20} of {cut['lines']} lines" in cut["note"] and cut["note"] in cut["text"]
        one_file = await ok(session, "show_commit", revision="HEAD", path="src/app/net.py")
        assert "log.warning('retrying %s', url)" in one_file["text"]

        # a new commit: the very next calls see it, without waiting or polling
        repo = GitRepo(root)  # `git init` again: harmless, sets the author
        new = repo.commit("Add a circuit breaker for failing services", {"src/app/breaker.py": BREAKER}, days=10)
        found = await ok(session, "find_prior_art", query="circuit breaker stops calling a failing service")
        assert found["results"][0]["commit"]["sha"] == new
        assert found["_meta"]["index"]["head"] == new and found["_meta"]["index"]["commits_behind_head"] == 0
        status = await ok(session, "index_status")
        assert status["index"]["indexed_commits"] == len(shas) + 1 and status["index"]["last_indexed_commit"] == new
        breaker = await ok(session, "symbol_history", path="src/app/breaker.py", line=7)
        assert [c["commit"]["sha"] for c in breaker["commits"]] == [new]

        # a file an agent is writing (not committed): read from disk, no exact history, prior art elsewhere
        (root / "src/app/backoff.py").write_text(
            "def retry_with_backoff(call, attempts=4):\n"
            "    delay = 0.5\n"
            "    for attempt in range(attempts):\n"
            "        try:\n"
            "            return call()\n"
            "        except ConnectionError:\n"
            "            time.sleep(delay)\n"
            "            delay *= 2\n"
        )
        draft = await ok(session, "find_prior_art", path="src/app/backoff.py", line=3)
        assert draft["symbol"]["name"] == "retry_with_backoff" and draft["exact"] == []
        assert draft["results"][0]["commit"]["sha"] in retry


@pytest.mark.asyncio
async def test_bad_input_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    root = tmp_path / "sample"
    build_sample(root)
    async with serve(root) as session:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("symbol_history", {"path": "src/app/nope.py", "line": 3}, "unknown path src/app/nope.py"),
            (
                "symbol_history",
                {"path": "src/app/net.py", "line": 99},
                "line 99 is past the end of src/app/net.py (14 lines)",
            ),
            ("symbol_history", {"path": "src/app", "line": 1}, "is a directory"),
            ("symbol_history", {"path": "../elsewhere.py", "line": 1}, "outside the repository"),
            (
                "symbol_history",
                {"path": "src/app/net.py", "line": 0},
                "line: Input should be greater than or equal to 1",
            ),
            ("symbol_history", {"path": "src/app/net.py"}, "line: Field required"),
            ("find_prior_art", {"query": "retry", "k": 21}, "k: Input should be less than or equal to 20"),
            ("find_prior_art", {"query": "retry", "k": "many"}, "k: Input should be a valid integer"),
            ("find_prior_art", {"querry": "retry"}, "unknown argument(s) querry"),
            ("find_prior_art", {}, "give query"),
            ("find_prior_art", {"path": "src/app/net.py"}, "give path and line together"),
            ("find_prior_art", {"query": "retry", "since": "last tuesday"}, "cannot understand the date"),
            ("find_prior_art", {"query": "retry", "since": "2024-01-01", "until": "2023-01-01"}, "no commit can match"),
            ("find_prior_art", {"query": "retry", "language": "klingon"}, "unknown language 'klingon'"),
            ("show_commit", {"revision": "0123456789abcdef"}, "no commit starting with 0123456789abcdef"),
            ("show_commit", {"revision": "no-such-branch"}, "not a commit id, branch or tag"),
            ("show_commit", {"revision": "HEAD", "path": "README.md"}, "does not change README.md"),
            (
                "show_commit",
                {"revision": "HEAD", "max_lines": 5},
                "max_lines: Input should be greater than or equal to 20",
            ),
            ("index_status", {"verbose": True}, "unknown argument(s) verbose"),
        ]
        for name, args, expected in cases:
            message = error_text(await session.call_tool(name, args))
            assert expected in message, (name, args, message)
            assert message.startswith(f"{name}: "), message
        # still serving, and answering correctly
        history = await ok(session, "symbol_history", path="src/app/net.py", line=5)
        assert history["symbol"]["name"] == "fetch_with_retry"


@pytest.mark.asyncio
async def test_outside_a_repository_every_tool_says_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    async with serve(plain) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        for name, args in [
            ("index_status", {}),
            ("find_prior_art", {"query": "retry"}),
            ("symbol_history", {"path": "a.py", "line": 1}),
            ("show_commit", {"revision": "HEAD"}),
        ]:
            message = error_text(await session.call_tool(name, args))
            assert "not a git repository" in message and "-C PATH" in message, message


@pytest.mark.asyncio
async def test_waits_for_another_writer_then_indexes(tmp_path: Path) -> None:
    """Another process holds the index write lock: the server reports it and indexes once it is released."""
    root = tmp_path / "sample"
    shas = build_sample(root)
    repo = open_repo(root)
    store = store_for(repo)
    with contextlib.ExitStack() as held:
        held.enter_context(store.write_lock())
        async with serve(root) as session:
            status = await wait_for(session, "waiting", timeout=60)
            assert "write lock" in status["server"]["message"]
            assert status["index"]["indexed_commits"] == 0
            found = await ok(session, "find_prior_art", query="retry with backoff")
            assert found["results"] == [] and "write lock" in found["_meta"]["hint"]
            held.close()  # the other writer finishes
            status = await wait_for(session, "ready", dense=False)
            assert status["index"]["indexed_commits"] == len(shas)
            found = await ok(session, "find_prior_art", query="retry with exponential backoff")
            assert found["results"][0]["commit"]["sha"] in {
                shas["Add retry with exponential backoff"],
                shas["Log the retry attempts"],
            }
    repo.close()
