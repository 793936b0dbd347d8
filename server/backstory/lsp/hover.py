"""Hover: "Past changes to `name`" (EXACT history) and "Related elsewhere" (INFERRED, fused, no rerank).

Answered from the catalogue and the keyword lanes only (no model call), cached per (file, symbol, HEAD,
indexed count), so it stays within tens of milliseconds; while the index is not ready it says so in one line.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .. import symbols
from ..search.engine import TEXT_LANES, SearchOptions
from ..search.render import relative_age
from ..symbols_history import Located, exact_commits, symbol_query
from .params import uri_path

if TYPE_CHECKING:
    from .server import BackstoryServer
    from .state import RepoState

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


def compute(ls: BackstoryServer, state: RepoState, uri: str, text: str, pos: types.Position) -> str | None:
    path = uri_path(uri)
    try:
        rel = path.resolve().relative_to(state.root.resolve()).as_posix()
    except ValueError:
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
    defs = symbols.extract_definitions(source, language or "")
    if not defs:
        return None
    d = pick_definition(defs, pos.line + 1, word)
    if d is None:
        return None
    engine = state.engine
    info, _allowed, _hint = engine.freshness()
    key = (rel, d.name, info.get("head"), info.get("indexed_commits"), ls.options.hoverMax)
    cached = state.hover_cache.get(key)
    if cached is not None:
        return str(cached)
    n = ls.options.hoverMax
    exact_all = exact_commits(engine, rel, d.start_line, d.end_line, limit=n + 1, head=info.get("head"))
    query = symbol_query(Located(rel, d.start_line, source, d))
    found = engine.search(query, SearchOptions(k=n + len(exact_all), rerank=False, lanes=TEXT_LANES))
    seen = {e["commit"]["sha"] for e in exact_all}
    related = [r for r in found["results"] if r["commit"]["sha"] not in seen][:n]
    markdown = render_markdown(d.name, exact_all[:n], related, len(exact_all))
    if len(state.hover_cache) > 512:
        state.hover_cache.clear()
    state.hover_cache[key] = markdown
    return markdown


async def hover(ls: BackstoryServer, params: types.HoverParams) -> types.Hover | None:
    if not ls.options.hover:
        return None
    uri = params.text_document.uri
    state = ls.repos.for_path(uri_path(uri), ls.options)
    if state is None:
        return None
    if not state.engine.store.exists() or (state.indexing and state.status.get("phase") == "history"):
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


def register(ls: BackstoryServer) -> None:
    ls.feature(types.TEXT_DOCUMENT_HOVER)(hover)
