"""``workspace/executeCommand`` handlers: each returns the JSON documented in docs/protocol.md."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..features.exact_history import symbol_history
from ..features.prior_art import prior_art
from ..features.revision import file_at
from ..features.show_commit import show
from ..history.repo import HistoryError
from ..index.store import StoreError
from ..index.text_index import Filters
from ..search.options import SearchCancelled, SearchOptions
from ..search.when import BadDate, parse_when
from ..views.reasons import add_reasons
from . import constants as C
from . import hover as hover_feature
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
    since, until = get_str(obj, "since", required=False), get_str(obj, "until", required=False)
    rerank = obj.get("rerank", True)
    if not isinstance(rerank, bool):
        raise invalid("'rerank' must be a boolean")
    try:
        filters = Filters(
            since=parse_when(since) if since else None,
            until=parse_when(until, end_of_day=True) if until else None,
            path_glob=get_str(obj, "path", required=False),
            author=get_str(obj, "author", required=False),
            language=get_str(obj, "language", required=False),
        )
    except BadDate as e:
        raise invalid(str(e)) from None
    branch = get_str(obj, "branch", required=False)
    everywhere = obj.get("allBranches", ls.options.allBranches)
    if not isinstance(everywhere, bool):
        raise invalid("'allBranches' must be a boolean")
    return SearchOptions(
        k=k, filters=filters, rerank=ls.options.rerank and rerank,
        recency_weight=ls.options.recencyWeight, second_stage=ls.options.secondStage,
        hide_reverted=obj.get("hideReverted") is True,
        branch=branch, all_branches=everywhere and not branch,
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


def label_partial(state: RepoState, result: Any) -> Any:
    """Say in ``_meta`` whether the answer is partial, and give advice that fits what the server is doing.

    ``_meta.partial`` is true while the history is being indexed (the first index, a rebuild, new commits) or
    when the index is behind HEAD; ``_meta.hint`` then says so with the progress ("indexing history
    1,000/1,522 commits: results are partial until it finishes"), never "run `backstory index`" while the
    server is indexing. ``_meta.indexing`` carries the server's progress (phase, done, total) while it runs."""
    if not isinstance(result, dict):
        return result
    meta = result.setdefault("_meta", {})
    if not isinstance(meta, dict):
        return result
    status = state.status
    info: dict[str, Any] = meta["index"] if isinstance(meta.get("index"), dict) else {}
    behind = info.get("commits_behind_head")
    phase = status.get("phase") if state.indexing else None
    done, total = status.get("done"), status.get("total")
    if state.indexing:
        meta["indexing"] = {"phase": phase, "done": done, "total": total}
    partial = False
    counted = f" {done:,}/{total:,} commits" if isinstance(done, int) and isinstance(total, int) and total else ""
    if phase == "history" or (state.indexing and not state.engine.has_index()):
        partial = True
        meta["hint"] = f"indexing history{counted}: results are partial until it finishes"
    elif phase == "symbols":
        partial = True
        meta["hint"] = f"attaching symbols{counted}: symbol matches are partial until it finishes"
    elif isinstance(behind, int) and behind > 0:
        partial = True
        n = f"{behind:,} newer commit{'' if behind == 1 else 's'}"
        if state.indexing:
            meta["hint"] = f"indexing {n}: results are partial until it finishes"
        elif state.waiting_for is not None:  # another process holds the write lock: the server goes on after it
            meta["hint"] = (
                f"indexing {n} as soon as another indexer ({state.waiting_for}) is done: results are partial until then"
            )
        else:
            failed = status.get("message") if status.get("state") == "error" else None
            why = f" (indexing failed: {failed})" if failed else ""
            meta["hint"] = f"{n} not indexed yet{why}: results are partial; reindex to include them"
    elif phase == "dense" and isinstance(done, int) and isinstance(total, int) and total:
        meta.setdefault("warnings", []).append(
            f"embedding {done:,}/{total:,} files: related commits may rank better when it finishes"
        )
    meta["partial"] = partial
    return result


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
            result = prior_art(state.engine, where_in_repo, opts, source=source, text=selection)
            kind = (result.get("symbol") or {}).get("kind")
            add_reasons(result.get("exact") or [], "code", where_in_repo.path, kind)
            add_reasons(result.get("results") or [], "code", where_in_repo.path, kind)
            return result

        return await run_cancellable(work)

    return label_partial(state, await _guard(go))


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
            result = await run_cancellable(lambda cancelled: state.engine.search(query, opts, cancelled))
        except SearchCancelled:
            return {"query": query, "results": [], "_meta": {"hint": "cancelled", "warnings": []}}
        add_reasons(result.get("results") or [], "words")
        return result

    return label_partial(state, await _guard(go))


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
        result = await asyncio.to_thread(symbol_history, state.engine, where_in_repo, source)
    except (HistoryError, StoreError) as e:
        return {"symbol": None, "commits": [], "message": str(e), "_meta": {}}
    add_reasons(result.get("commits") or [], "code", where_in_repo.path, (result.get("symbol") or {}).get("kind"))
    return label_partial(state, result)


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


async def file_at_revision(ls: BackstoryServer, *args: Any) -> Any:
    """``{sha, path, uri?}`` -> ``{sha, path, exists, binary, text}``: the file in that revision (``sha`` may be
    ``<sha>^`` for the parent); an empty, non-existent side when the revision has no such file."""
    obj = single_object(C.FILE_AT_REVISION, args)
    rev = get_str(obj, "sha")
    path = get_str(obj, "path")
    assert rev is not None and path is not None
    state = _state_for(ls, obj)
    if state is None:
        raise invalid("not in a git repository")
    try:
        found = await asyncio.to_thread(file_at, state.engine, rev, path.lstrip("/"))
    except HistoryError as e:
        raise invalid(str(e)) from None
    return dataclasses.asdict(found)


async def hover_info(ls: BackstoryServer, *args: Any) -> Any:
    """``{uri, position}`` -> what the hover there shows, as JSON (``symbol`` null where no hover shows)."""
    obj = single_object(C.HOVER_INFO, args)
    uri = get_str(obj, "uri")
    assert uri is not None
    pos = position(obj)
    state = _state_for(ls, obj)
    text = _document_text(ls, uri)
    if state is None or text is None:
        return {"symbol": None, "commits": [], "related": [], "total": 0, "more": False}
    result = await asyncio.to_thread(hover_feature.info_at, ls, state, uri, text, pos)
    path = (result.get("symbol") or {}).get("path")
    kind = (result.get("symbol") or {}).get("kind")
    add_reasons(result.get("commits") or [], "code", path, kind)
    add_reasons(result.get("related") or [], "code", path, kind)
    return label_partial(state, result)


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
        detail = await asyncio.to_thread(state.engine.status, False)  # polled by editors: no page-by-page check
    except (HistoryError, StoreError) as e:
        detail = {"hint": str(e)}
    server = {
        **ls.status_payload(state),
        "hovers_cached": len(state.hover_cache),
        "definitions_ready": hover_feature.definitions_ready(state),
        "requests_in_flight": ls.protocol.in_flight(),
        "heap_releases": ls.heap_releases,
    }
    return {**detail, "server": server}


HANDLERS: dict[str, Callable[..., Any]] = {
    C.FIND_PRIOR_ART: find_prior_art,
    C.SEARCH: search,
    C.SYMBOL_HISTORY: symbol_history_cmd,
    C.SHOW_COMMIT: show_commit_cmd,
    C.FILE_AT_REVISION: file_at_revision,
    C.HOVER_INFO: hover_info,
    C.REINDEX: reindex,
    C.STATUS: status,
}


def register(ls: BackstoryServer) -> None:
    for name, handler in HANDLERS.items():
        ls.command(name)(handler)
