"""Background indexing: the first index (in a child process, with work-done progress), new commits picked up while
serving, shutdown in the middle of the dense phase, an outdated index rebuilt by the indexing child."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.lsp.client import LanguageClient as PlainClient

from backstory.evaluation.procs import tree_pids
from backstory.index.build import BuildOptions
from backstory.lsp.constants import PROGRESS_TITLE, STATUS_NOTIFICATION
from backstory.lsp.index_job import BACKGROUND_NICENESS, run_index_job
from gitrepo import GitRepo, build_sample, fast_history, merge_missing_a_tree

from .conftest import CLIENTS, SERVER, BackstoryClient, Sample, cmd, initialize_params, until, wait_ready

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]


@pytest_lsp.fixture(scope="module", params=CLIENTS, config=SERVER)
async def fresh(
    lsp_client: BackstoryClient, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[None]:
    """A server on the sample repository with no index yet: it indexes it from scratch."""
    root = tmp_path_factory.mktemp("fresh") / "ws"
    lsp_client.sample = Sample(root, build_sample(root))
    await lsp_client.initialize_session(initialize_params(request.param, root))
    yield
    await lsp_client.shutdown_session()


async def test_the_first_index_runs_in_the_child_and_reports_progress(fresh: BackstoryClient) -> None:
    shas = fresh.ws.shas
    status = await wait_ready(fresh)
    assert status["index"]["indexed_commits"] == len(shas)
    assert fresh.progress_reports, "indexing reports work-done progress"
    # the dense phase ran in a child process; the server sees every vector it wrote
    assert status["index"]["dense_coverage"] == 1.0
    (reports,) = fresh.progress_reports.values()
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert reports[0].title == PROGRESS_TITLE
    assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert reports[-1].message == f"indexed {len(shas)} commit(s)"
    # backstory/status: starting, then indexing through the history and dense phases, then ready
    states = [s["state"] for s in fresh.statuses]
    assert states[0] == "starting"
    assert states[-1] == "ready"
    phases = [s.get("phase") for s in fresh.statuses if s["state"] == "indexing"]
    assert phases[0] == "history"
    assert "dense" in phases
    assert phases.index("dense") > phases.index("history")
    # the server reads what the child committed: keyword lanes and vectors
    found = await cmd(fresh, "backstory.search", {"query": "retry an HTTP request with exponential backoff"})
    assert found["results"][0]["commit"]["sha"] in {
        shas["Add retry with exponential backoff"],
        shas["Log the retry attempts"],
    }
    assert found["results"][0]["why"]["lanes"]["dense"] is not None


async def test_a_commit_made_during_the_session_becomes_searchable(fresh: BackstoryClient) -> None:
    root = fresh.ws.root
    await wait_ready(fresh)
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = root, 50
    new_sha = repo.commit(
        "Add jitter to the circuit breaker", {"src/app/breaker.py": "def circuit_breaker_jitter():\n    return 42\n"}
    )

    async def found_first() -> bool:
        found = await cmd(fresh, "backstory.search", {"query": "circuit breaker jitter"})
        return bool(found["results"]) and found["results"][0]["commit"]["sha"] == new_sha

    await until(found_first, "the new commit to be searchable", timeout=30)
    status = await wait_ready(fresh)
    assert status["index"]["head"] == new_sha


async def test_shutdown_while_embedding_exits_promptly_and_keeps_the_index(tmp_path: Path) -> None:
    """shutdown + exit in the middle of the dense phase: the embedding child stops between batches, nothing is
    written to the closed stream, the process exits, and the index stays usable (a later run resumes)."""
    root = tmp_path / "big"
    fast_history(root, 1500)
    client = PlainClient("test", "1")
    phases: list[str | None] = []
    client.feature(STATUS_NOTIFICATION)(lambda p: phases.append(getattr(p, "phase", None)))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda p: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    await client.initialize_async(types.InitializeParams(capabilities=caps, root_uri=root.as_uri()))
    client.initialized(types.InitializedParams())

    async def dense_seen() -> bool:
        return "dense" in phases

    await until(dense_seen, f"a dense phase (phases: {phases[-3:]})", timeout=120, pause=0.05)
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


async def test_the_indexing_child_and_its_readers_run_below_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hovers and searches asked while a long history indexes get the cores first: the indexing child and the
    reader processes it starts run at a lower priority than the process that started it."""
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    if ours + BACKGROUND_NICENESS > 19:
        pytest.skip(f"the tests already run at niceness {ours}: no lower priority to see")
    monkeypatch.setenv("BACKSTORY_WORKERS", "2")  # reader processes even on a one-core machine
    root = tmp_path / "big"
    fast_history(root, 600)
    seen: dict[int, int] = {}

    def progress(_phase: str, _done: int, _total: int) -> None:
        for pid in tree_pids(os.getpid())[1:]:
            with contextlib.suppress(OSError):  # gone meanwhile
                seen[pid] = os.getpriority(os.PRIO_PROCESS, pid)

    report, _note = await asyncio.to_thread(
        run_index_job, root, options=BuildOptions(), index_dir=None, rebuild=False, dense=False, model_path=None,
        progress=progress, cancel=threading.Event(),
    )  # fmt: skip
    assert report.new_commits == 600
    niced = [pid for pid, n in seen.items() if n == ours + BACKGROUND_NICENESS]
    assert len(niced) >= 2, f"the child and its readers at niceness {ours} + {BACKGROUND_NICENESS}: {seen}"


async def test_outdated_index_is_rebuilt_by_the_indexing_child(tmp_path: Path) -> None:
    """The child reports "rebuild needed" across the process boundary; the server rebuilds instead of failing."""
    root = tmp_path / "old"
    fast_history(root, 30)
    subprocess.run([sys.executable, "-m", "backstory", "index", "--no-dense", str(root)], check=True)
    manifest = root / ".git" / "backstory" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["schema_version"] = 1  # as if written by an old version
    manifest.write_text(json.dumps(data))
    client, messages = await _serve(root)
    try:
        status = await wait_ready(client)
        assert status["index"]["indexed_commits"] == 30
        assert any("rebuilding the index" in m for m in messages)
        assert json.loads(manifest.read_text())["schema_version"] != 1
    finally:
        await _stop(client)


async def test_a_merge_git_cannot_read_is_said_once_and_the_rest_is_indexed(tmp_path: Path) -> None:
    """A damaged repository (an object only a merge has is missing): the server indexes the rest and says why
    symbol history through that merge is partial, as `backstory index` does."""
    repo = GitRepo(tmp_path / "damaged")
    merge_missing_a_tree(repo)
    client, messages = await _serve(repo.path)
    try:
        status = await wait_ready(client)
        assert status["index"]["indexed_commits"] == 4, status
        said = [m for m in messages if "could not be read from git" in m]
        assert len(said) == 1 and "1 merge could not" in said[0] and "git fsck" in said[0], messages
    finally:
        await _stop(client)


async def _serve(root: Path) -> tuple[PlainClient, list[str]]:
    """A server on ``root`` without the dense phase, and the messages it shows."""
    client = PlainClient("test", "1")
    messages: list[str] = []
    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda p: messages.append(p.message))
    client.feature(STATUS_NOTIFICATION)(lambda p: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=root.as_uri(), initialization_options={"dense": False}
        )
    )
    client.initialized(types.InitializedParams())
    return client, messages


async def _stop(client: PlainClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.wait_for(client.stop(), 30)
