"""``workspace/executeCommand`` handlers: each returns the JSON documented in docs/protocol.md."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..features.exact_history import symbol_history
from ..features.prior_art import prior_art
from ..features.show_commit import show
from ..history.repo import HistoryError
from ..index.store import StoreError
from ..index.text_index import Filters
from ..search.options import SearchCancelled, SearchOptions
from ..search.when import BadDate, parse_when
from . import constants as C
from .base import BackstoryServer
from .indexing import start_indexing
from .params import document_position, get_int, get_str, invalid, position, range_, single_object, uri_path

if TYPE_CHECKING:
    from .state import RepoState

T = TypeVar("T")


async def run_cancellable(fn: Callable[[Callable[[], bool]], T]) -> T:
    """Run blocking ``fn`` in a thread; if the request is cancelled, tell it to stop at its next stage."""
    flag = threading.Event()
    try:
        return await asyncio.to_thread(fn, flag.is_set)
    except asyncio.CancelledError:
        flag.set()
        raise


def _no_repo(ls: BackstoryServer) -> dict[str, Any]:
    return {
        "results": [],
        "exact": [],
        "_meta": {"hint": "this workspace is not inside a git repository; open a folder that is", "warnings": []},
    }


def _state_for(ls: BackstoryServer, obj: dict[str, Any]) -> RepoState | None:
    uri = obj.get("uri")
    if uri is not None:
        if not isinstance(uri, str):
            raise invalid("'uri' must be a string")
        return ls.repos.for_path(uri_path(uri), ls.options)
    return ls.repos.first()


def _options(ls: BackstoryServer, obj: dict[str, Any]) -> SearchOptions:
    k = get_int(obj, "k", ls.options.k)
    try:
        filters = Filters(
            since=parse_when(obj["since"]) if obj.get("since") else None,
            until=parse_when(obj["until"], end_of_day=True) if obj.get("until") else None,
            path_glob=get_str(obj, "path", required=False),
            author=get_str(obj, "author", required=False),
            language=get_str(obj, "language", required=False),
        )
    except BadDate as e:
        raise invalid(str(e)) from None
    return SearchOptions(
        k=k, filters=filters, rerank=ls.options.rerank and obj.get("rerank", True) is not False,
        recency_weight=ls.options.recencyWeight, second_stage=ls.options.secondStage,
        hide_reverted=obj.get("hideReverted") is True,
    )  # fmt: skip


def _document_text(ls: BackstoryServer, uri: str) -> str | None:
    try:
        return ls.workspace.get_text_document(uri).source
    except Exception:
        return None


def _selection(text: str, r: Any) -> str:
    lines = text.split("\n")
    if r.start.line == r.end.line:
        return lines[r.start.line][r.start.character : r.end.character] if r.start.line < len(lines) else ""
    chunk = lines[r.start.line : r.end.line + 1]
    if chunk:
        chunk[0] = chunk[0][r.start.character :]
        chunk[-1] = chunk[-1][: r.end.character] if r.end.line < len(lines) else chunk[-1]
    return "\n".join(chunk)


async def _guard(fn: Callable[[], Any]) -> Any:
    """Turn user-fixable problems into answers with a hint instead of errors."""
    try:
        return await fn()
    except (HistoryError, StoreError) as e:
        return {"results": [], "exact": [], "_meta": {"hint": str(e), "warnings": []}}


async def find_prior_art(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.FIND_PRIOR_ART, args)
    uri = get_str(obj, "uri")
    assert uri is not None
    has_range = "range" in obj and obj["range"] is not None
    where = range_(obj) if has_range else None
    pos = where.start if where is not None else position(obj)
    state = _state_for(ls, obj)
    if state is None:
        return _no_repo(ls)
    opts = _options(ls, obj)
    text = _document_text(ls, uri)
    source = text.encode("utf-8") if text is not None else None
    selection = _selection(text or "", where) if where is not None and where.start != where.end else None
    where_in_repo = document_position(state.root, uri, pos)

    async def go() -> Any:
        def work(cancelled: Callable[[], bool]) -> Any:
            return prior_art(state.engine, where_in_repo, opts, source=source, text=selection)

        return await run_cancellable(work)

    return await _guard(go)


async def search(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.SEARCH, args)
    query = get_str(obj, "query")
    assert query is not None
    state = _state_for(ls, obj)
    if state is None:
        return _no_repo(ls)
    opts = _options(ls, obj)

    async def go() -> Any:
        try:
            return await run_cancellable(lambda cancelled: state.engine.search(query, opts, cancelled))
        except SearchCancelled:
            return {"query": query, "results": [], "_meta": {"hint": "cancelled", "warnings": []}}

    return await _guard(go)


async def symbol_history_cmd(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.SYMBOL_HISTORY, args)
    uri = get_str(obj, "uri")
    assert uri is not None
    pos = position(obj)
    state = _state_for(ls, obj)
    if state is None:
        return {"symbol": None, "commits": [], "message": "not in a git repository", "_meta": {}}
    text = _document_text(ls, uri)
    source = text.encode("utf-8") if text is not None else None
    where_in_repo = document_position(state.root, uri, pos)
    try:
        return await asyncio.to_thread(symbol_history, state.engine, where_in_repo, source)
    except (HistoryError, StoreError) as e:
        return {"symbol": None, "commits": [], "message": str(e), "_meta": {}}


async def show_commit_cmd(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.SHOW_COMMIT, args)
    sha = get_str(obj, "sha")
    path = get_str(obj, "path", required=False)
    assert sha is not None
    state = _state_for(ls, obj)
    if state is None:
        raise invalid("not in a git repository")
    try:
        shown = await asyncio.to_thread(show, state.engine, sha, path)
    except HistoryError as e:
        raise invalid(str(e)) from None
    return dataclasses.asdict(shown)


async def reindex(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.REINDEX, args)
    rebuild = obj.get("rebuild", False)
    if not isinstance(rebuild, bool):
        raise invalid("'rebuild' must be a boolean")
    state = _state_for(ls, obj)
    if state is None:
        return {"started": False, "message": "not in a git repository"}
    started = start_indexing(ls, state, rebuild=rebuild)
    return {"started": started, "message": None if started else "indexing is already running"}


async def status(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.STATUS, args)
    state = _state_for(ls, obj)
    if state is None:
        return {"state": "no-repo", "message": "this workspace is not inside a git repository"}
    try:
        detail = await asyncio.to_thread(state.engine.status)
    except (HistoryError, StoreError) as e:
        detail = {"hint": str(e)}
    return {**detail, "server": {**ls.status_payload(state), "hovers_cached": len(state.hover_cache)}}


HANDLERS: dict[str, Callable[..., Any]] = {
    C.FIND_PRIOR_ART: find_prior_art,
    C.SEARCH: search,
    C.SYMBOL_HISTORY: symbol_history_cmd,
    C.SHOW_COMMIT: show_commit_cmd,
    C.REINDEX: reindex,
    C.STATUS: status,
}


def register(ls: BackstoryServer) -> None:
    for name, handler in HANDLERS.items():
        ls.command(name)(handler)
