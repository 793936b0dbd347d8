"""Hovers only where a user asks about a definition, with actions; the commands behind the editor surface.

Over stdio against the real server (pygls client), on a small repository with known definitions: a hover shows
on a definition's name and on a reference that resolves to one (same file, then HEAD's other files), and never
on keywords, comments, strings, literals, parameters, locals, builtins or names defined more than once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pytest_lsp import client_capabilities

from gitrepo import GitRepo

pytestmark = pytest.mark.timeout(240)

NET_V1 = '''"""HTTP helpers."""
import time

from app.util import backoff, helper

RETRIES = 3


def fetch(url):
    return url
'''

NET_V2 = (
    NET_V1
    + '''

def fetch_with_retry(url, attempts=RETRIES):
    """Fetch a URL, retrying with exponential backoff."""
    # retry the fetch a few times
    for attempt in range(attempts):
        result = fetch(url)
        if result is not None:
            return result
        time.sleep(backoff(attempt))
    return helper(None)


class Client:
    def request(self, request):
        headers = {"retry": 1}
        return self.send(request, headers)

    def send(self, request, headers):
        return fetch(request)
'''
)

UTIL = """def backoff(attempt):
    return 2 ** attempt


def helper(x):
    return x
"""

OTHER = """def helper(x):
    return [x]
"""


def build(root: Path) -> dict[str, str]:
    repo = GitRepo(root)
    shas = {}
    shas["util"] = repo.commit("Add backoff helper", {"app/__init__.py": "", "app/util.py": UTIL})
    shas["fetch"] = repo.commit("Add fetch", {"app/net.py": NET_V1})
    shas["retry"] = repo.commit("Add retry with exponential backoff", {"app/net.py": NET_V2})
    shas["other"] = repo.commit("Add another helper", {"app/other.py": OTHER})
    shas["log"] = repo.commit(
        "Sleep a little longer between retries",
        {"app/net.py": NET_V2.replace("time.sleep(backoff(attempt))", "time.sleep(backoff(attempt) + 0.1)")},
    )
    return shas


@contextlib.asynccontextmanager
async def session(folder: Path, options: dict[str, Any] | None = None) -> AsyncIterator[LanguageClient]:
    client = LanguageClient("test", "1")
    client.statuses = []  # type: ignore[attr-defined]
    client.feature("backstory/status")(lambda p: client.statuses.append(p))  # type: ignore[attr-defined]
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda p: None)
    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda p: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    await client.initialize_async(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=folder.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
            initialization_options={"dense": False, **(options or {})},
        )
    )
    client.initialized(types.InitializedParams())
    try:
        yield client
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await asyncio.wait_for(client.stop(), 30)


async def cmd(client: LanguageClient, name: str, arg: Any) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=[arg]))


async def wait_for(client: LanguageClient, what: str, check: Any, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = await cmd(client, "backstory.status", {})
        if check(status):
            return status
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: {status}")


def ready(status: dict[str, Any]) -> bool:
    return status.get("server", {}).get("state") == "ready"


def open_doc(client: LanguageClient, path: Path) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=path.read_text())
        )
    )
    return uri


def where(text: str, needle: str, occurrence: int = 1, offset: int = 0) -> types.Position:
    """The position of the ``occurrence``-th ``needle`` in ``text`` (plus ``offset`` characters)."""
    start = -1
    for _ in range(occurrence):
        start = text.index(needle, start + 1)
    line = text.count("\n", 0, start)
    return types.Position(line=line, character=start - (text.rfind("\n", 0, start) + 1) + offset)


def at(text: str, needle: str, occurrence: int = 1, offset: int = 0) -> dict[str, int]:
    """:func:`where` as a command argument."""
    p = where(text, needle, occurrence, offset)
    return {"line": p.line, "character": p.character}


async def hover_text(client: LanguageClient, uri: str, pos: types.Position) -> str | None:
    h = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=pos)
    )
    return None if h is None else h.contents.value  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("hover") / "repo"
    return root, build(root)


NO_HOVER = [
    ("a keyword (def)", "def fetch_with_retry", 1, 1),
    ("a keyword (return)", "return result", 1, 2),
    ("a keyword (for)", "for attempt", 1, 1),
    ("a comment word", "# retry the fetch", 1, 10),
    ("a docstring word", "Fetch a URL, retrying", 1, 2),
    ("a string literal", '"retry": 1', 1, 2),
    ("a number literal", "RETRIES = 3", 1, 10),
    ("a parameter at its declaration", "fetch_with_retry(url", 1, 18),
    ("a parameter where it is used", "range(attempts)", 1, 8),
    ("a local variable", "result = fetch", 1, 1),
    ("a local where it is read", "return result", 1, 9),
    ("a loop variable", "backoff(attempt)", 1, 9),
    ("a parameter named like a method", "def request(self, request)", 1, 19),
    ("self", "self.send", 1, 1),
    ("a local named like nothing", "headers = {", 1, 1),
    ("a builtin", "range(attempts)", 1, 1),
    ("a module's member nobody here defines", "time.sleep", 1, 6),
    ("a name defined in two other files", "return helper(None)", 1, 8),
]

HOVER = [
    ("the name at a definition site", "def fetch_with_retry", 1, 6, "fetch_with_retry", None),
    ("a call resolved in the same file", "result = fetch(url)", 1, 10, "fetch", None),
    ("a constant used as a default", "attempts=RETRIES", 1, 10, "RETRIES", None),
    ("self.method in the enclosing class", "self.send", 1, 6, "Client.send", None),
    ("a method's own name", "def request(self", 1, 5, "Client.request", None),
    ("a call resolved in another file at HEAD", "time.sleep(backoff", 1, 12, "backoff", "app/util.py"),
    ("an imported name", "import backoff", 1, 8, "backoff", "app/util.py"),
]


@pytest.mark.asyncio
async def test_hover_only_on_definitions_and_resolved_references(sample: tuple[Path, dict[str, str]]) -> None:
    root, shas = sample
    async with session(root, {"hoverLinks": True}) as client:
        await wait_for(client, "server ready", ready)
        net = root / "app/net.py"
        text = net.read_text()
        uri = open_doc(client, net)
        await wait_for(client, "HEAD definitions", lambda s: s.get("server", {}).get("definitions_ready"))
        wrong = []
        for what, needle, occurrence, offset in NO_HOVER:
            got = await hover_text(client, uri, where(text, needle, occurrence, offset))
            if got is not None:
                wrong.append(f"{what}: {got.splitlines()[0]}")
        for what, needle, occurrence, offset, name, elsewhere in HOVER:
            got = await hover_text(client, uri, where(text, needle, occurrence, offset))
            head = (got or "").splitlines()[0] if got else "no hover"
            if not head.startswith(f"**Past changes to `{name}`**"):
                wrong.append(f"{what}: expected {name}, got {head!r}")
            elif elsewhere and f"in {elsewhere}" not in head:
                wrong.append(f"{what}: expected the path {elsewhere} in {head!r}")
            elif not elsewhere and " in app/" in head:
                wrong.append(f"{what}: a same-file definition names a path: {head!r}")
        assert not wrong, "\n".join(wrong)

        # the hover of a definition: its changes (newest first) and command links for VS Code
        value = await hover_text(client, uri, where(text, "def fetch_with_retry", 1, 6))
        assert value is not None
        assert "· 2 changes" in value.splitlines()[0]
        assert value.index(shas["log"][:7]) < value.index(shas["retry"][:7])
        links = [(m.split("?")[0], urllib.parse.unquote(m.split("?")[1])) for m in value.split("(command:")[1:]]

        def linked(command: str, *needles: str) -> bool:
            return any(c == command and all(n in a for n in needles) for c, a in links)

        assert linked("backstory.ui.openCommit", shas["log"], '"path":"app/net.py"')
        assert linked("backstory.ui.openChanges", shas["log"], '"path":"app/net.py"')
        assert linked("backstory.ui.symbolHistory", '"line":12') and linked("backstory.ui.findPriorArt", '"line":12')
        assert "Show all 2 changes" in value and "Open changes" in value and "Find prior art" in value

        # the same model as JSON (Neovim's actions): the resolved definition and where it is
        info = await cmd(client, "backstory.hoverInfo", {"uri": uri, "position": at(text, "backoff(attempt)", 1, 2)})
        assert info["symbol"]["name"] == "backoff" and info["symbol"]["path"] == "app/util.py"
        assert info["uri"] == (root / "app/util.py").as_uri()
        assert [c["commit"]["sha"] for c in info["commits"]] == [shas["util"]]
        assert info["commits"][0]["reason"] == "same function"
        assert info["_meta"]["partial"] is False
        none = await cmd(client, "backstory.hoverInfo", {"uri": uri, "position": {"line": 0, "character": 3}})
        assert none["symbol"] is None


@pytest.mark.asyncio
async def test_hover_without_links_for_other_clients(sample: tuple[Path, dict[str, str]]) -> None:
    root, shas = sample
    async with session(root) as client:
        await wait_for(client, "server ready", ready)
        net = root / "app/net.py"
        text = net.read_text()
        uri = open_doc(client, net)
        value = await hover_text(client, uri, where(text, "def fetch_with_retry", 1, 6))
        assert value is not None and "Past changes to `fetch_with_retry`" in value
        assert "command:" not in value
        assert f"`{shas['retry'][:7]}`" in value


@pytest.mark.asyncio
async def test_commands_behind_the_editor_surface(sample: tuple[Path, dict[str, str]]) -> None:
    root, shas = sample
    async with session(root) as client:
        await wait_for(client, "server ready", ready)
        net = root / "app/net.py"
        text = net.read_text()
        uri = open_doc(client, net)

        # file at a revision: both sides of a diff; the side before an added file is empty
        after = await cmd(client, "backstory.fileAtRevision", {"sha": shas["retry"], "path": "app/net.py"})
        before = await cmd(client, "backstory.fileAtRevision", {"sha": shas["retry"] + "^", "path": "app/net.py"})
        assert after["exists"] and after["text"] == NET_V2
        assert before["exists"] and before["text"] == NET_V1 and before["sha"] == shas["fetch"]
        added = await cmd(client, "backstory.fileAtRevision", {"sha": shas["fetch"] + "^", "path": "app/net.py"})
        assert added["exists"] is False and added["text"] == ""
        root_parent = await cmd(client, "backstory.fileAtRevision", {"sha": shas["util"] + "^", "path": "app/util.py"})
        assert root_parent == {"sha": None, "path": "app/util.py", "exists": False, "binary": False, "text": ""}

        # showCommit: the files it changed, hunk headers with the definition they changed
        shown = await cmd(client, "backstory.showCommit", {"sha": shas["log"]})
        assert shown["files"] == [{"path": "app/net.py", "old_path": "app/net.py", "change": "modify"}]
        header = shown["text"].split("\n")[shown["hunks"][0]["line"]]
        assert header.startswith("@@") and header.endswith("def fetch_with_retry(url, attempts=RETRIES):"), header

        # prior art: related commits carry a reason in words; exact history is the definition's
        pos = at(text, "def fetch_with_retry", 1, 6)
        found = await cmd(client, "backstory.findPriorArt", {"uri": uri, "position": pos})
        assert [e["commit"]["sha"] for e in found["exact"]] == [shas["log"], shas["retry"]]
        assert {e["reason"] for e in found["exact"]} == {"same function"}
        assert found["results"] and all(r["reason"] and "#" not in r["reason"] for r in found["results"])
        assert found["_meta"]["partial"] is False
        words = await cmd(client, "backstory.search", {"query": "exponential backoff"})
        assert words["results"][0]["reason"]


@pytest.mark.asyncio
async def test_subfolder_workspace_gets_exact_history(sample: tuple[Path, dict[str, str]]) -> None:
    """A workspace folder inside the repository (not its root): paths are resolved once, against the
    repository, so exact history and prior art still find the definition's commits."""
    root, shas = sample
    async with session(root / "app") as client:
        await wait_for(client, "server ready", ready)
        net = root / "app/net.py"
        text = net.read_text()
        uri = open_doc(client, net)
        pos = at(text, "def fetch_with_retry", 1, 6)
        history = await cmd(client, "backstory.symbolHistory", {"uri": uri, "position": pos})
        assert [c["commit"]["sha"] for c in history["commits"]] == [shas["log"], shas["retry"]]
        found = await cmd(client, "backstory.findPriorArt", {"uri": uri, "position": pos})
        assert [e["commit"]["sha"] for e in found["exact"]] == [shas["log"], shas["retry"]]
        value = await hover_text(client, uri, where(text, "def fetch_with_retry", 1, 6))
        assert value is not None and "· 2 changes" in value


@pytest.mark.asyncio
async def test_results_while_indexing_are_labelled_partial(tmp_path: Path) -> None:
    """While the server indexes (here: waiting for another indexer's write lock), answers say they are partial
    and that the server is indexing, never "run backstory index"; once indexed they are complete."""
    root = tmp_path / "repo"
    shas = build(root)
    subprocess.run([sys.executable, "-m", "backstory", "index", "--no-dense", str(root)], check=True)
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = root, 10
    newest = repo.commit("Retry on timeouts too", {"app/net.py": NET_V2.replace("(url):", "(url):  # timeouts")})
    lock = (root / ".git" / "backstory" / "write.lock").open("a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        async with session(root) as client:
            await wait_for(client, "indexing", lambda s: s.get("server", {}).get("state") == "indexing")
            net = root / "app/net.py"
            uri = open_doc(client, net)
            pos = at(net.read_text(), "def fetch_with_retry", 1, 6)
            found = await cmd(client, "backstory.findPriorArt", {"uri": uri, "position": pos})
            meta = found["_meta"]
            assert meta["partial"] is True
            assert "indexing" in meta["hint"] and "partial" in meta["hint"]
            assert "backstory index" not in meta["hint"]
            assert newest not in [e["commit"]["sha"] for e in found["exact"]]
            assert shas["retry"] in [e["commit"]["sha"] for e in found["exact"]]
            fcntl.flock(lock, fcntl.LOCK_UN)
            await wait_for(client, "ready after the lock is released", ready)
            found = await cmd(client, "backstory.findPriorArt", {"uri": uri, "position": pos})
            assert found["_meta"]["partial"] is False
            assert found["exact"][0]["commit"]["sha"] == newest
    finally:
        lock.close()
