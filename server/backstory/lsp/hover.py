"""Hover: "Past changes to `name`" (EXACT history) and "Related elsewhere" (INFERRED, fused, no rerank).

Answered from the catalogue and the keyword lanes only (no model call), cached per (file, symbol, HEAD,
indexed count), and prewarmed in the background for the definitions of each opened document, so the hovers a
reader does are usually cache hits; while the index is not ready it says so in one line.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .. import symbols
from ..features.locate import Located
from ..features.prior_art import exact_and_related, symbol_query
from ..history.repo import HistoryError, repo_relative
from ..search.options import TEXT_LANES, SearchOptions
from ..views.age import relative_age
from .base import BackstoryServer
from .params import uri_path

if TYPE_CHECKING:
    from .state import RepoState

log = logging.getLogger(__name__)
HOVER_CACHE_SIZE = 4096
PREWARM_MAX = 200  # definitions per document
PREWARM_PAUSE = 0.002
_cache_lock = threading.Lock()
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def word_at(line: str, character: int) -> str | None:
    for m in _IDENT.finditer(line):
        if m.start() <= character <= m.end():
            return m.group(0)
    return None


def pick_definition(defs: list[symbols.Definition], line: int, word: str) -> symbols.Definition | None:
    """The definition the hovered identifier names (preferring one around the cursor), else the enclosing one."""
    around = symbols.enclosing_definitions(defs, line)
    for d in reversed(around):
        if d.short_name == word:
            return d
    named = [d for d in defs if d.short_name == word]
    if named:
        return named[0]
    return around[-1] if around else None


def _line(entry: dict[str, Any], now: float, with_path: bool = False) -> str:
    c = entry["commit"]
    age = relative_age(int(dt.datetime.fromisoformat(c["date"]).timestamp()), now)
    subject = c["subject"].replace("`", "'")[:80]
    where = ""
    if with_path and entry.get("hunks"):
        where = f" ({entry['hunks'][0]['path']})"
    return f"- `{c['short_sha']}` {subject} — {c['author']['name']}, {age}{where}"


def render_markdown(name: str, exact: list[dict[str, Any]], related: list[dict[str, Any]], total_exact: int) -> str:
    now = time.time()
    out = [f"**Past changes to `{name}`**", ""]
    if exact:
        out += [_line(e, now) for e in exact]
        if total_exact > len(exact):
            out.append("- … and older changes (symbol history shows them all)")
    else:
        out.append("_No indexed commit changed it._")
    if related:
        out += ["", "**Related elsewhere**", ""]
        out += [_line(r, now, with_path=True) for r in related]
    return "\n".join(out)


def _definitions(source: bytes, language: str) -> list[symbols.Definition]:
    return symbols.definitions(source, language) or []


def _relative(state: RepoState, uri: str) -> str | None:
    try:
        return repo_relative(state.root, uri_path(uri).resolve())
    except HistoryError:
        return None


def _markdown(ls: BackstoryServer, state: RepoState, rel: str, d: symbols.Definition, source: bytes) -> str:
    """The hover block for one definition, cached per (file, symbol, HEAD, indexed count, size)."""
    engine = state.engine
    info, _allowed, _hint = engine.freshness()
    n = ls.options.hoverMax
    key = (rel, d.name, info.get("head"), info.get("indexed_commits"), n)
    cache = state.hover_cache
    cached = cache.get(key)
    if cached is not None:
        return str(cached)
    loc = Located(rel, d.start_line, source, d)
    opts = SearchOptions(k=n, rerank=False, lanes=TEXT_LANES)  # keyword lanes only: no model call in a hover
    exact_all, found = exact_and_related(engine, loc, symbol_query(loc), opts, exact_limit=n + 1, head=info.get("head"))
    markdown = render_markdown(d.name, exact_all[:n], found["results"], len(exact_all))
    with _cache_lock:  # hovers and the prewarm thread share the cache
        while len(cache) >= HOVER_CACHE_SIZE:
            del cache[next(iter(cache))]  # oldest first: dicts keep insertion order
        cache[key] = markdown
    return markdown


def compute(ls: BackstoryServer, state: RepoState, uri: str, text: str, pos: types.Position) -> str | None:
    rel = _relative(state, uri)
    if rel is None:
        return None
    language = symbols.language_for_path(rel)
    if language not in symbols.supported_languages():
        return None
    lines = text.split("\n")
    if pos.line >= len(lines):
        return None
    word = word_at(lines[pos.line], pos.character)
    if word is None:
        return None
    source = text.encode("utf-8")
    d = pick_definition(_definitions(source, language or ""), pos.line + 1, word)
    if d is None:
        return None
    return _markdown(ls, state, rel, d, source)


# -- prewarming ---------------------------------------------------------------------------------------------
# A first hover on a symbol walks its history; doing that for an opened document's definitions in the
# background (one thread, newest request per document wins, stops when the index starts changing) makes the
# hovers a reader actually does cache hits.

_PREWARM = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backstory-hover-prewarm")
_generation: dict[str, int] = {}


def _ready(state: RepoState) -> bool:
    return state.engine.has_index() and not (state.indexing and state.status.get("phase") in ("history", "merges"))


def prewarm_document(ls: BackstoryServer, state: RepoState, uri: str, generation: int) -> int:
    """Compute the hover of every definition in ``uri`` (up to PREWARM_MAX); returns how many were computed."""
    rel = _relative(state, uri)
    language = symbols.language_for_path(rel) if rel else None
    if rel is None or language not in symbols.supported_languages():
        return 0
    try:
        source = ls.workspace.get_text_document(uri).source.encode("utf-8")
    except Exception:
        return 0
    done = 0
    for d in _definitions(source, language or "")[:PREWARM_MAX]:
        if _generation.get(uri) != generation or not _ready(state) or not ls.options.hover:
            break
        _markdown(ls, state, rel, d, source)
        done += 1
        time.sleep(PREWARM_PAUSE)  # let foreground requests have the interpreter between definitions
    return done


def schedule_prewarm(ls: BackstoryServer, uri: str) -> None:
    """Queue prewarming of ``uri``'s hovers (superseding any queued run for the same document)."""
    if not ls.options.hover or not ls.options.hoverPrewarm:
        return
    state = ls.repos.for_path(uri_path(uri), ls.options)
    if state is None or not _ready(state):
        return
    generation = _generation.get(uri, 0) + 1
    _generation[uri] = generation
    future = _PREWARM.submit(prewarm_document, ls, state, uri, generation)
    future.add_done_callback(_log_failure)


def prewarm_open_documents(ls: BackstoryServer, state: RepoState) -> None:
    """After indexing (which empties the hover cache), prewarm the repository's open documents again."""
    for uri in list(ls.workspace.text_documents):
        if ls.repos.for_path(uri_path(uri), ls.options) is state:
            schedule_prewarm(ls, uri)


def _log_failure(future: Future[int]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("hover prewarm failed: %s", future.exception())


async def hover(ls: BackstoryServer, params: types.HoverParams) -> types.Hover | None:
    if not ls.options.hover:
        return None
    uri = params.text_document.uri
    state = ls.repos.for_path(uri_path(uri), ls.options)
    if state is None:
        return None
    if not _ready(state):
        status = state.status
        done, total = status.get("done"), status.get("total")
        progress = f" ({done:,}/{total:,} commits)" if isinstance(done, int) and total else ""
        value = f"Backstory: indexing history{progress}; past changes will show here when it is done."
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value))
    try:
        text = ls.workspace.get_text_document(uri).source
    except Exception:
        return None
    markdown = await asyncio.to_thread(compute, ls, state, uri, text, params.position)
    if markdown is None:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown))


def did_open(ls: BackstoryServer, params: types.DidOpenTextDocumentParams) -> None:
    schedule_prewarm(ls, params.text_document.uri)


def register(ls: BackstoryServer) -> None:
    ls.feature(types.TEXT_DOCUMENT_HOVER)(hover)
    ls.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.index_listeners.append(prewarm_open_documents)  # indexing empties the hover cache: fill it again
