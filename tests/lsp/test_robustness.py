"""The language server under malformed input and pressure (issue #27, items 3, 5, 6, 11, 12): every request is
answered, broken framing costs one message, memory does not grow with commands, and a server that lost the
writer-lock race indexes once the writer is gone. A real `backstory serve` over stdio, fed raw bytes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gitrepo import build_sample

pytestmark = [pytest.mark.timeout(300), pytest.mark.asyncio]


class RawClient:
    """Speaks to a real `backstory serve --stdio` byte by byte, so framing can be broken on purpose."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.inbox: list[dict[str, Any]] = []
        self.next_id = 1000

    @classmethod
    async def start(cls) -> RawClient:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "backstory", "serve", "--stdio",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        return cls(proc)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    @staticmethod
    def frame(obj: Any) -> bytes:
        body = json.dumps(obj).encode()
        return f"Content-Length: {len(body)}\r\n\r\n".encode() + body

    def send(self, obj: Any) -> None:
        self.write(self.frame(obj))

    def request(self, method: Any, params: Any = None, msg_id: Any = None) -> Any:
        if msg_id is None:
            self.next_id += 1
            msg_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    async def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = None
        while True:
            line = await self.proc.stdout.readline()
            assert line, "the server closed its output"
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
            elif not line.strip() and length is not None:
                return dict(json.loads(await self.proc.stdout.readexactly(length)))

    async def answer(self, msg_id: Any, timeout: float = 120) -> dict[str, Any]:
        """The response to ``msg_id`` (the server's own requests are answered with null on the way)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, msg in enumerate(self.inbox):
                if msg.get("id") == msg_id and "method" not in msg:
                    return self.inbox.pop(i)
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to {msg_id!r}; got {self.inbox[-5:]}"
            msg = await asyncio.wait_for(self._read(), left)
            if "method" in msg and "id" in msg:  # workspace/configuration, workDoneProgress/create
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "method" not in msg:
                self.inbox.append(msg)

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        return await self.answer(self.request(method, params))

    async def command(self, name: str, arg: Any) -> Any:
        reply = await self.call("workspace/executeCommand", {"command": name, "arguments": [arg]})
        assert "result" in reply, reply
        return reply["result"]

    async def initialize(self, root: Path | None = None, options: Any = None) -> None:
        params: dict[str, Any] = {"processId": os.getpid(), "capabilities": {}, "initializationOptions": options}
        if root is not None:
            params.update(rootUri=root.as_uri(), workspaceFolders=[{"uri": root.as_uri(), "name": "ws"}])
        reply = await self.call("initialize", params)
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()


@pytest_asyncio.fixture
async def client():
    c = await RawClient.start()
    yield c
    await c.close()


def _error(reply: dict[str, Any], code: int) -> str:
    assert "error" in reply and reply["error"]["code"] == code, reply
    return str(reply["error"]["message"])


async def test_a_request_before_initialize_or_after_shutdown_is_refused(client: RawClient) -> None:
    _error(await client.call("workspace/executeCommand", {"command": "backstory.status", "arguments": [{}]}), -32002)
    _error(await client.call("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}}), -32002)
    await client.initialize()
    assert (await client.command("backstory.status", {}))["state"] == "no-repo"
    assert (await client.call("shutdown"))["result"] is None
    reply = await client.call("workspace/executeCommand", {"command": "backstory.status", "arguments": [{}]})
    assert "shutting down" in _error(reply, -32600)  # answered, not dropped
    client.send({"jsonrpc": "2.0", "method": "exit"})
    assert await asyncio.wait_for(client.proc.wait(), 60) == 0


async def test_requests_that_do_not_fit_their_method_are_answered(client: RawClient, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    build_sample(root)
    await client.initialize(root, {"dense": False})
    uri = (root / "src" / "app" / "net.py").as_uri()
    position = {"line": 3, "character": 4}
    for method, params in [
        ("textDocument/hover", None),
        ("textDocument/hover", []),
        ("textDocument/hover", {"textDocument": {"uri": 5}, "position": position}),
        ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": 7, "context": {"diagnostics": []}}),
        ("workspace/executeCommand", "x"),
    ]:
        _error(await client.call(method, params), -32602)
    bad_arguments = [
        {"query": "retry", "since": 5},
        {"query": "retry", "until": ["2024"]},
        {"query": "retry\x00backoff"},
        {"query": 42},
        {"query": "retry", "k": "ten"},
        {"query": "retry", "rerank": "no"},
        {"query": "retry", "path": 3},
    ]
    for arg in bad_arguments:
        reply = await client.call("workspace/executeCommand", {"command": "backstory.search", "arguments": [arg]})
        _error(reply, -32602)
    # a lone surrogate can only be written as an escape: JSON text with "\ud800" in a string
    body = b'{"jsonrpc": "2.0", "id": 77, "method": "workspace/executeCommand", "params": {"command": '
    body += b'"backstory.search", "arguments": [{"query": "retry \\ud800 backoff"}]}}'
    client.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert "surrogate" in _error(await client.answer(77), -32602)
    client.send({"jsonrpc": "2.0", "id": {"an": "object"}, "method": "backstory.status", "params": {}})
    assert "'id'" in _error(await client.answer(None), -32600)
    assert "'method'" in _error(await client.call(12345, {}), -32600)
    symlink = root / "loop_a"
    os.symlink("loop_a", symlink)
    reply = await client.call(
        "workspace/executeCommand",
        {"command": "backstory.symbolHistory", "arguments": [{"uri": symlink.as_uri(), "position": position}]},
    )
    assert "symbolic link that loops" in _error(reply, -32602)
    status = await client.command("backstory.status", {})  # and the server still serves
    assert status["server"]["state"] in ("indexing", "ready")


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda body: b"Content-Type: application/json\r\n\r\n" + body, id="no-content-length"),
        pytest.param(lambda body: b"Content-Length: twelve\r\n\r\n" + body, id="non-numeric"),
        pytest.param(lambda body: f"Content-Length: {len(body) - 9}\r\n\r\n".encode() + body, id="too-short"),
        pytest.param(lambda body: body, id="no-headers"),
    ],
)
async def test_broken_framing_costs_one_message(client: RawClient, broken) -> None:  # type: ignore[no-untyped-def]
    await client.initialize()
    status = {"command": "backstory.status", "arguments": [{}]}
    body = json.dumps({"jsonrpc": "2.0", "id": 501, "method": "workspace/executeCommand", "params": status})
    client.write(broken(body.encode()))
    for n in range(3):  # every later message is read and answered
        assert (await client.command("backstory.status", {}))["state"] == "no-repo", n
    reply = await client.answer(501)  # and the broken one is answered too, not left waiting
    assert reply["error"]["code"] in (-32600, -32700), reply


async def test_too_long_content_length_takes_the_message_and_reads_the_next(client: RawClient) -> None:
    await client.initialize()
    status = {"command": "backstory.status", "arguments": [{}]}
    first = json.dumps({"jsonrpc": "2.0", "id": 601, "method": "workspace/executeCommand", "params": status})
    second = client.frame({"jsonrpc": "2.0", "id": 602, "method": "workspace/executeCommand", "params": status})
    client.write(f"Content-Length: {len(first) + 30}\r\n\r\n{first}".encode() + second)
    client.request("workspace/executeCommand", status, msg_id=603)
    for msg_id in (601, 603):
        assert (await client.answer(msg_id))["result"]["state"] == "no-repo"


async def test_command_futures_do_not_accumulate(client: RawClient, tmp_path: Path) -> None:
    """pygls 2.1.1 kept the completed future of every executeCommand; 1,200 searches grew the server from 220
    to 679 MB. The table now holds only what is in flight: after 400 commands, just the status asking."""
    root = tmp_path / "ws"
    build_sample(root)
    await client.initialize(root, {"dense": False, "rerank": False})
    for batch in range(8):
        ids = [
            client.request(
                "workspace/executeCommand", {"command": "backstory.search", "arguments": [{"query": f"retry {i}"}]}
            )
            for i in range(50)
        ]
        for msg_id in ids:
            assert "result" in await client.answer(msg_id), batch
    status = await client.command("backstory.status", {})
    assert status["server"]["requests_in_flight"] == 2  # this status request: its own future and its handler's


async def test_server_that_lost_the_writer_lock_indexes_once_the_writer_dies(client: RawClient, tmp_path) -> None:
    root = tmp_path / "ws"
    build_sample(root)
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import sys, time; from pathlib import Path; from backstory.index.store import Store\n"
            "with Store(Path(sys.argv[1])).write_lock():\n    print('locked', flush=True); time.sleep(600)",
            str(root / ".git" / "backstory"),
        ],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        await client.initialize(root, {"dense": False})
        deadline = time.monotonic() + 120
        while True:
            server = (await client.command("backstory.status", {}))["server"]
            if server.get("phase") == "waiting":
                break
            assert server.get("state") != "error", server
            assert time.monotonic() < deadline, server
            await asyncio.sleep(0.2)
        assert f"pid {holder.pid}" in server["message"] and "--wait" not in server["message"], server
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # the writer dies; the kernel releases its lock
        holder.wait()
    deadline = time.monotonic() + 120
    while (status := await client.command("backstory.status", {}))["server"].get("state") != "ready":
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.2)
    assert status["index"]["indexed_commits"] == 6 and status["index"]["commits_behind_head"] == 0


async def test_a_huge_query_is_cut_and_a_hover_after_it_is_answered(client: RawClient, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    build_sample(root)
    await client.initialize(root, {"dense": False})
    path = root / "src" / "app" / "net.py"
    document = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": path.read_text()}
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": document}})
    search = client.request(
        "workspace/executeCommand",
        {"command": "backstory.search", "arguments": [{"query": "retry backoff delay " * 8700}]},  # 164 KB
    )
    hover = client.request(
        "textDocument/hover", {"textDocument": {"uri": path.as_uri()}, "position": {"line": 3, "character": 6}}
    )
    result = (await client.answer(search))["result"]
    assert any("the query was cut to its first" in w for w in result["_meta"]["warnings"]), result["_meta"]
    assert "result" in await client.answer(hover)


def _manifest(root: Path) -> dict[str, Any]:
    return dict(json.loads((root / ".git" / "backstory" / "manifest.json").read_text()))


async def _until_ready(client: RawClient) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while (status := await client.command("backstory.status", {}))["server"].get("state") != "ready":
        assert status["server"].get("state") != "error" and time.monotonic() < deadline, status
        await asyncio.sleep(0.2)
    return dict(status)


async def test_cli_and_server_share_one_build_options_policy(tmp_path: Path) -> None:
    """Built by the CLI with --max-file-bytes, updated by a server with default settings and by the CLI again
    without the flag: one index, never rebuilt. A setting the server does ask for (exclude) rebuilds once, keeping
    the CLI's option, and the CLI then follows that index too."""
    root = tmp_path / "ws"
    shas = build_sample(root)
    cli = [sys.executable, "-m", "backstory", "index", str(root), "--no-dense"]
    assert subprocess.run([*cli, "--max-file-bytes", "200000"], capture_output=True).returncode == 0
    generation = _manifest(root)["generation"]
    client = await RawClient.start()
    try:
        await client.initialize(root, {"dense": False})
        status = await _until_ready(client)
        assert status["index"]["indexed_commits"] == len(shas) and _manifest(root)["generation"] == generation
    finally:
        await client.close()
    proc = subprocess.run(cli, capture_output=True, text=True)
    assert proc.returncode == 0 and "indexed 0 new commits" in proc.stdout, proc.stderr
    assert _manifest(root)["generation"] == generation and _manifest(root)["options"]["max_file_bytes"] == 200000
    client = await RawClient.start()
    try:
        await client.initialize(root, {"dense": False, "exclude": ["*.md"]})
        await _until_ready(client)
    finally:
        await client.close()
    rebuilt = _manifest(root)
    assert rebuilt["generation"] != generation  # the server asked for something the index was not built with
    assert rebuilt["options"]["excludes"] == ["*.md"] and rebuilt["options"]["max_file_bytes"] == 200000
    proc = subprocess.run(cli, capture_output=True, text=True)
    assert proc.returncode == 0 and "indexed 0 new commits" in proc.stdout, proc.stderr
    assert _manifest(root)["generation"] == rebuilt["generation"]
