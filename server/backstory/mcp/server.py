"""The MCP server: four tools over one repository's engine, served over stdio with the official SDK.

Every tool call: arguments checked (the SDK validates them against the published JSON schema; names the schema
does not know are refused here), the index brought up to HEAD when that takes seconds (``Indexer.fresh``), the
work run in a thread under the engine's lock, and the answer sent as structured content (the JSON of
docs/protocol.md, with ``_meta.indexing`` and a hint when the index is partial) plus a compact text rendering.
Problems the agent can fix come back as tool errors (``isError``) with a message; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from .. import __version__
from ..history.repo import HistoryError
from ..index import memory
from ..index.store import StoreError
from ..search.when import BadDate
from . import text, tools
from .descriptions import ARGS, DESCRIPTIONS, INSTRUCTIONS
from .indexer import Indexer, in_thread

if TYPE_CHECKING:
    from ..search.engine import Engine

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_SECONDS = 5.0


class Backstory:
    """The served repository: its engine (opened lazily, so a server started outside a repository answers
    every call with a clear error, and starts working once the directory becomes one), its indexer, and the
    lock that serialises the engine's readers."""

    def __init__(self, path: str | Path, index_dir: str | None = None, dense: bool = True) -> None:
        self.path = Path(path)
        self.index_dir = index_dir
        self.dense = dense
        self.lock = threading.Lock()
        self.engine: Engine | None = None
        self.indexer: Indexer | None = None
        self.running = False  # inside the server's lifespan: an opened engine starts indexing at once
        self._opening = threading.Lock()
        self._starting: asyncio.Task[None] | None = None

    def _open(self) -> Engine:
        """The engine, opened on first use; raises ``HistoryError`` when the path is not in a repository."""
        with self._opening:
            if self.engine is None:
                from ..search.engine import Engine  # 0.5-1 s of imports: not before the client is answered

                try:
                    engine = Engine(self.path, self.index_dir)
                except HistoryError as e:
                    raise HistoryError(f"{e}; start `backstory mcp` inside a repository or with -C PATH") from None
                self.indexer = Indexer(engine, self.lock, self.index_dir, self.dense)
                self.engine = engine
            return self.engine

    async def open(self) -> Engine:
        """The engine (opened off the event loop), its indexer started once the server runs."""
        engine = self.engine if self.engine is not None else await in_thread(self._open)
        if self.running and self.indexer is not None and not self.indexer.started:
            self.indexer.start()
        return engine

    async def start(self) -> None:
        """Open the repository and start indexing in the background (the client's initialize is not held up)."""
        self.running = True

        async def opening() -> None:
            try:
                await self.open()
            except Exception as e:  # not a repository, an unusable index directory: every tool call says so
                log.info("not serving yet: %s", e)

        self._starting = asyncio.get_running_loop().create_task(opening())

    async def stop(self) -> None:
        """Stop indexing (between batches) and close the engine; a job still running after the grace period is
        left to ``run``, which exits without waiting for it."""
        self.running = False
        if self.indexer is not None:
            await self.indexer.stop(SHUTDOWN_GRACE_SECONDS)
        if self.engine is not None and not self.busy():
            with self.lock:
                self.engine.close()  # the catalogue and dulwich's pack files (it complains about open ones at exit)

    def busy(self) -> bool:
        return self.indexer is not None and self.indexer.running


def partial_hint(meta: dict[str, Any], status: dict[str, Any]) -> str | None:
    """The hint for an answer given while the background indexer works (None: keep the engine's). The engine's
    own hints tell a person to run `backstory index`; here the server does that itself."""
    info = meta.get("index") or {}
    state, message = status.get("state"), status.get("message", "")
    count, behind = info.get("indexed_commits") or 0, info.get("commits_behind_head")
    cover = info.get("dense_coverage")
    if state == "error":
        return f"background indexing failed: {message}; results cover what was indexed before"
    if state not in ("indexing", "starting", "waiting"):
        return None
    doing = f"({message})"
    if count == 0 and info.get("head"):
        return (
            f"the index is being built in the background {doing}; answers are empty or partial until it is: "
            "retry shortly, or follow it with index_status"
        )
    if behind:
        return (
            f"the index is {behind} commit(s) behind HEAD and catching up in the background {doing}; "
            "the newest commits may be missing"
        )
    if isinstance(cover, (int, float)) and cover < 1:
        return f"embeddings are still being computed {doing}; keyword matches are complete, the ranking may change"
    return None


def _result(structured: dict[str, Any], rendered: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=rendered)], structured_content=structured)


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class Tools:
    """The tools' entry points: freshness, a thread under the engine's lock, the answer's two renderings."""

    def __init__(self, app: Backstory) -> None:
        self.app = app

    async def call(
        self,
        name: str,
        work: Callable[[Engine], dict[str, Any]],
        render: Callable[[dict[str, Any]], str],
    ) -> CallToolResult:
        try:
            engine = await self.app.open()
            indexer = self.app.indexer
            if indexer is not None:
                await indexer.fresh()

            def locked() -> dict[str, Any]:
                with self.app.lock:
                    return work(engine)

            result = await in_thread(locked)
        except (tools.ToolInputError, HistoryError, StoreError, BadDate) as e:
            return _error(f"{name}: {e}")
        except Exception as e:  # a bug: say so, log it, keep serving
            log.exception("%s failed", name)
            return _error(f"{name}: internal error ({type(e).__name__}: {e}); the server keeps running")
        if indexer is not None:
            status = indexer.snapshot()
            if name == "index_status":  # the shape of `backstory status --json` and the server's status
                result["server"] = status
                result["hint"] = partial_hint(result, status) or result.get("hint")
            elif name != "show_commit":  # read from git, not the index
                meta = result.setdefault("_meta", {})
                meta["indexing"] = status
                meta["hint"] = partial_hint(meta, status) or meta.get("hint")
        return _result(result, render(result))


class BackstoryMCP(MCPServer[Any]):
    """The SDK's server, with arguments the schemas do not name refused (pydantic would drop them silently:
    an agent that misspells ``query`` would get an answer to another question) and argument errors in plain
    words."""

    def __init__(self, allowed: dict[str, set[str]], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allowed = allowed

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = self.allowed.get(name)
        unknown = sorted(set(arguments) - known) if known is not None else []
        if unknown:
            takes = ", ".join(sorted(known or ())) or "no arguments"
            raise ToolError(f"{name}: unknown argument(s) {', '.join(unknown)}; it takes {takes}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                raise ToolError(f"{name}: {argument_errors(e.__cause__)}") from e.__cause__
            raise


def argument_errors(error: ValidationError) -> str:
    """pydantic's report as one line an agent can act on: which argument, what is wrong, what it got."""
    parts = []
    for err in error.errors():
        where = ".".join(str(x) for x in err["loc"]) or "arguments"
        got = f" (got {err['input']!r})" if err["type"] != "missing" else ""
        parts.append(f"{where}: {err['msg']}{got}")
    return "invalid arguments: " + "; ".join(parts)


def build(app: Backstory) -> BackstoryMCP:
    """The MCP server with the four tools over ``app``."""
    t = Tools(app)

    async def find_prior_art(
        query: Annotated[str | None, Field(description=ARGS["query"])] = None,
        path: Annotated[str | None, Field(description=ARGS["path"])] = None,
        line: Annotated[int | None, Field(ge=1, description=ARGS["line"])] = None,
        k: Annotated[int, Field(ge=1, le=tools.MAX_K, description=ARGS["k"])] = tools.DEFAULT_K,
        since: Annotated[str | None, Field(description=ARGS["since"])] = None,
        until: Annotated[str | None, Field(description=ARGS["until"])] = None,
        path_glob: Annotated[str | None, Field(description=ARGS["path_glob"])] = None,
        author: Annotated[str | None, Field(description=ARGS["author"])] = None,
        language: Annotated[str | None, Field(description=ARGS["language"])] = None,
    ) -> CallToolResult:
        def work(engine: Engine) -> dict[str, Any]:
            return tools.find_prior_art(
                engine, query=query, path=path, line=line, k=k, since=since, until=until, path_glob=path_glob,
                author=author, language=language,
            )  # fmt: skip

        return await t.call("find_prior_art", work, text.search_text)

    async def symbol_history(
        path: Annotated[str, Field(description=ARGS["history_path"])],
        line: Annotated[int, Field(ge=1, description=ARGS["history_line"])],
        limit: Annotated[int, Field(ge=1, le=tools.MAX_HISTORY_LIMIT, description=ARGS["limit"])] = tools.HISTORY_LIMIT,
    ) -> CallToolResult:
        def work(engine: Engine) -> dict[str, Any]:
            return tools.symbol_history(engine, path=path, line=line, limit=limit)

        return await t.call("symbol_history", work, text.history_text)

    async def show_commit(
        revision: Annotated[str, Field(description=ARGS["revision"])],
        path: Annotated[str | None, Field(description=ARGS["show_path"])] = None,
        max_lines: Annotated[
            int, Field(ge=20, le=tools.MAX_SHOW_LINES, description=ARGS["max_lines"])
        ] = tools.SHOW_LINES,
    ) -> CallToolResult:
        def work(engine: Engine) -> dict[str, Any]:
            return tools.show_commit(engine, revision=revision, path=path, max_lines=max_lines)

        return await t.call("show_commit", work, lambda r: str(r["text"]))

    async def index_status() -> CallToolResult:
        def render(status: dict[str, Any]) -> str:
            return text.status_text(status)

        return await t.call("index_status", tools.index_status, render)

    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    registered = []
    allowed: dict[str, set[str]] = {}
    for fn in (find_prior_art, symbol_history, show_commit, index_status):
        name = fn.__name__
        tool = Tool.from_function(fn, name=name, description=DESCRIPTIONS[name], annotations=read_only)
        tool.parameters["additionalProperties"] = False
        tool.parameters.pop("title", None)
        for prop in tool.parameters.get("properties", {}).values():
            prop.pop("title", None)
        allowed[name] = set(tool.parameters.get("properties", {}))
        registered.append(tool)

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        await app.start()
        try:
            yield {}
        finally:
            await app.stop()

    return BackstoryMCP(
        allowed, "backstory", version=__version__, instructions=INSTRUCTIONS, tools=registered, lifespan=lifespan,
        log_level="WARNING",
    )  # fmt: skip


def run(repo: str | Path = ".", index_dir: str | None = None) -> None:
    """Serve ``repo`` over stdio until the client closes the connection."""
    logging.basicConfig(level=os.environ.get("BACKSTORY_LOG", "WARNING"), format="%(name)s: %(message)s")
    memory.limit_arenas()  # tools run on threads, as the language server's requests do
    app = Backstory(repo, index_dir)  # None: BACKSTORY_INDEX_DIR or <git dir>/backstory, as everywhere
    build(app).run()
    if app.busy():  # an indexing job did not stop within the grace period: it resumes on the next run
        os._exit(0)
