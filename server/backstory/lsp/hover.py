"""Hover: the past changes of the definition a user points at, with actions.

Only where a user asks about a definition: the name at a definition site, or a reference that resolves to one
(same file first, then HEAD's definitions; see ``features/resolve``). Never on keywords, comments, strings,
literals, parameters or locals, and never on a name that could mean several definitions.

The markdown lists the newest changes ("Past changes to `name`", EXACT history) and related commits elsewhere
(INFERRED, keyword lanes only: no model call in a hover). With the ``hoverLinks`` option (VS Code sets it) each
short sha is a command link that opens the commit at that change, followed by "Open changes" (a native diff of
the newest change), "Show all N changes" and "Find prior art"; other clients get the same model as JSON from
``backstory.hoverInfo`` and offer those entries in their own UI.

Answers are cached per (file, definition, HEAD, indexed count), compressed, and prewarmed in the background for the
definitions of each opened document; while the history is being indexed the hover says so in one line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import urllib.parse
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .. import symbols
from ..features.exact_history import EXACT_LIMIT
from ..features.locate import Located
from ..features.prior_art import exact_and_related, symbol_query
from ..features.resolve import HEAD_DEFINITIONS, Resolved, resolve
from ..history.repo import HistoryError, repo_relative
from ..search.options import TEXT_LANES, SearchOptions
from ..symbols.cursor import utf16_to_byte_column
from ..views.age import age_of
from ..views.consequences import consequence_line
from . import constants as C
from .base import BackstoryServer
from .params import uri_path

if TYPE_CHECKING:
    from .state import RepoState

log = logging.getLogger(__name__)
HOVER_CACHE_SIZE = 4096
PREWARM_MAX = 200  # definitions per document
PREWARM_PAUSE = 0.002
SUBJECT_CHARS = 72
_cache_lock = threading.Lock()


# -- the model -------------------------------------------------------------------------------------------------


def _name_position(source: bytes, d: symbols.Definition) -> dict[str, int]:
    """The LSP position (UTF-16) of ``d``'s name on its first line, for commands that act on the definition."""
    lines = source.split(b"\n")
    text = lines[d.start_line - 1].decode("utf-8", "replace") if d.start_line - 1 < len(lines) else ""
    col = text.find(d.short_name)
    col = max(col, 0)
    return {"line": d.start_line - 1, "character": len(text[:col].encode("utf-16-le")) // 2}


def _model(ls: BackstoryServer, state: RepoState, rel: str, d: symbols.Definition, source: bytes) -> dict[str, Any]:
    """What the hover of ``d`` shows, as JSON (cached per file, definition, HEAD, indexed count, size)."""
    engine = state.engine
    info, _allowed, hint = engine.freshness()
    n = ls.options.hoverMax
    key = (rel, d.name, d.start_line, d.end_line, info.get("head"), info.get("indexed_commits"), n)
    cache = state.hover_cache
    cached = cache.get(key)
    if cached is not None:
        return _thawed(cached)
    loc = Located(rel, d.start_line, source, d)
    opts = SearchOptions(k=n, rerank=False, lanes=TEXT_LANES)  # keyword lanes only: no model call in a hover
    exact_all, found = exact_and_related(engine, loc, symbol_query(loc), opts, EXACT_LIMIT, info.get("head"))
    model: dict[str, Any] = {
        "symbol": {"name": d.name, "kind": d.kind, "path": rel, "start": d.start_line, "end": d.end_line},
        "uri": (state.root / rel).as_uri(),
        "position": _name_position(source, d),
        "commits": exact_all[:n],
        "total": len(exact_all),
        "more": len(exact_all) >= EXACT_LIMIT,
        "related": found["results"],
        "_meta": {"index": info, "hint": hint},
    }
    frozen = _frozen(model)
    with _cache_lock:  # hovers and the prewarm thread share the cache
        while len(cache) >= HOVER_CACHE_SIZE:
            del cache[next(iter(cache))]  # oldest first: dicts keep insertion order
        cache[key] = frozen
    return _thawed(frozen)


def _frozen(model: dict[str, Any]) -> bytes:
    """A hover's model as the cache keeps it: compressed JSON. Why: a model is ~39 KB as Python objects on git/git
    (its related commits carry their hunks and reasons), and the cache holds up to :data:`HOVER_CACHE_SIZE` of
    them, prewarmed for every opened document: 160 MB at the cap, ~6 KB a model compressed. A hit decodes it
    again (well under a millisecond); the model is JSON to begin with (``backstory.hoverInfo`` sends it)."""
    return zlib.compress(json.dumps(model, separators=(",", ":")).encode("utf-8"), 1)


def _thawed(frozen: bytes) -> dict[str, Any]:
    model: dict[str, Any] = json.loads(zlib.decompress(frozen))
    return model


def _relative(state: RepoState, uri: str) -> str | None:
    try:
        return repo_relative(state.root, uri_path(uri))  # resolves; a symbolic link loop is a HistoryError
    except HistoryError:
        return None


def resolve_at(state: RepoState, uri: str, text: str, pos: types.Position) -> Resolved | None:
    """The definition the identifier at ``pos`` asks about (see ``features.resolve``), or None."""
    rel = _relative(state, uri)
    if rel is None or symbols.language_for_path(rel) not in symbols.supported_languages():
        return None
    lines = text.split("\n")
    if pos.line >= len(lines):
        return None
    column = utf16_to_byte_column(lines[pos.line], pos.character)
    info, _allowed, _hint = state.engine.freshness()
    return resolve(state.engine, rel, text.encode("utf-8"), pos.line + 1, column, info.get("head"))


def info_at(ls: BackstoryServer, state: RepoState, uri: str, text: str, pos: types.Position) -> dict[str, Any]:
    """``backstory.hoverInfo``'s answer: the hover's model, or ``{"symbol": null}`` where no hover shows."""
    found = resolve_at(state, uri, text, pos)
    if found is None:
        return {"symbol": None, "commits": [], "related": [], "total": 0, "more": False}
    return _model(ls, state, found.path, found.definition, found.source)


# -- markdown --------------------------------------------------------------------------------------------------

# only what would change the markdown's structure (code spans, links, HTML): other escapes show literally in
# clients that render markdown plainly (Neovim's hover float shows `\_`)
_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`[]<>"})


def _escape(text: str) -> str:
    return text.translate(_MD_SPECIAL)


def _subject(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= SUBJECT_CHARS:
        return text
    cut = text[: SUBJECT_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def command_link(label: str, command: str, arg: dict[str, Any], title: str) -> str:
    args = urllib.parse.quote(json.dumps([arg], separators=(",", ":")))
    return f'[{label}](command:{command}?{args} "{title}")'


def _row(entry: dict[str, Any], now: float, links: bool, origin: str, with_path: bool) -> str:
    c = entry["commit"]
    hunk = (entry.get("hunks") or [{}])[0]
    sha = f"`{c['short_sha']}`"
    if links:
        arg = {"sha": c["sha"], "path": hunk.get("path"), "newStart": hunk.get("new_start"), "uri": origin}
        sha = command_link(sha, C.UI_OPEN_COMMIT, {k: v for k, v in arg.items() if v is not None}, "Open this change")
    where = f" · {_escape(hunk['path'])}" if with_path and hunk.get("path") else ""
    by = f"{_escape(c['author']['name'])}, {age_of(c['date'], now)}"
    return f"- {sha} {_escape(_subject(c['subject']))} — {by}{where}"


def render_markdown(model: dict[str, Any], links: bool, here: str | None = None, partial: str | None = None) -> str:
    """The hover text of a model; ``here``: the hovered document's repository-relative path."""
    now = time.time()
    s = model["symbol"]
    origin = model["uri"]
    total, more = model["total"], model["more"]
    count = f"{total}{'+' if more else ''} change{'' if total == 1 else 's'}"
    elsewhere = f" in {_escape(s['path'])}" if here is not None and s["path"] != here else ""
    out = [f"**Past changes to `{s['name']}`**{elsewhere} · {count if total else 'no changes indexed'}", ""]
    if partial:
        out += [f"_Partial: {_escape(partial)}_", ""]
    commits = model["commits"]
    fate = [c for c in (commits[0].get("consequences") or []) if c["kind"] in ("reverted", "fixed")] if commits else []
    if fate:  # what became of the newest change matters before touching the code again
        out += [f"_Its last change was {_escape(consequence_line(fate))}._", ""]
    if commits:
        out += [_row(e, now, links, origin, with_path=False) for e in commits]
        if total > len(commits):
            older = total - len(commits)
            out.append(f"- … {older}{'+' if more else ''} older change{'' if older == 1 else 's'}")
    else:
        out.append("_No indexed commit changed it._")
    related = model["related"]
    if related:
        out += ["", "**Related elsewhere**", ""]
        out += [_row(r, now, links, origin, with_path=True) for r in related]
    if links:
        at = {"uri": model["uri"], "position": model["position"]}
        actions = []
        if commits:
            newest = commits[0]
            hunk = (newest.get("hunks") or [{}])[0]
            arg = {"sha": newest["commit"]["sha"], "path": hunk.get("path") or s["path"], "uri": origin}
            if hunk.get("old_path") and hunk.get("old_path") != arg["path"]:
                arg["oldPath"] = hunk["old_path"]
            title = "Side-by-side diff of the newest change"
            actions.append(command_link("Open changes", C.UI_OPEN_CHANGES, arg, title))
        if total:
            actions.append(command_link(f"Show all {count}", C.UI_SYMBOL_HISTORY, at, "Every commit that changed it"))
        actions.append(command_link("Find prior art", C.UI_FIND_PRIOR_ART, at, "Related commits elsewhere"))
        out += ["", " · ".join(actions)]
    return "\n".join(out)


def partial_note(state: RepoState, model: dict[str, Any]) -> str | None:
    """A sentence when the history behind the hover is incomplete (the index is behind HEAD)."""
    behind = (model.get("_meta", {}).get("index") or {}).get("commits_behind_head")
    if isinstance(behind, int) and behind > 0:
        doing = "indexing them now" if state.indexing else "reindex to include them"
        return f"{behind:,} newer commit{'' if behind == 1 else 's'} not indexed yet ({doing})"
    return None


def compute(ls: BackstoryServer, state: RepoState, uri: str, text: str, pos: types.Position) -> str | None:
    found = resolve_at(state, uri, text, pos)
    if found is None:
        return None
    model = _model(ls, state, found.path, found.definition, found.source)
    return render_markdown(model, ls.options.hoverLinks, _relative(state, uri), partial_note(state, model))


# -- prewarming ---------------------------------------------------------------------------------------------
# A first hover on a symbol walks its history; doing that for an opened document's definitions in the
# background (one thread, newest request per document wins, stops when the index starts changing) makes the
# hovers a reader actually does cache hits. The same thread builds HEAD's definitions table, which resolving
# references to other files needs.

_PREWARM = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backstory-hover-prewarm")
_generation: dict[str, int] = {}


def _ready(state: RepoState) -> bool:
    return state.engine.has_index() and not (state.indexing and state.status.get("phase") == "history")


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
    for d in (symbols.definitions(source, language or "") or [])[:PREWARM_MAX]:
        if _generation.get(uri) != generation or not _ready(state) or not ls.options.hover:
            break
        _model(ls, state, rel, d, source)
        done += 1
        time.sleep(PREWARM_PAUSE)  # let foreground requests have the interpreter between definitions
    return done


def _build_definitions(state: RepoState) -> None:
    if _ready(state):
        HEAD_DEFINITIONS.build(state.engine)


def schedule_prewarm(ls: BackstoryServer, uri: str) -> None:
    """Queue prewarming of ``uri``'s hovers (superseding any queued run for the same document)."""
    if not ls.options.hover:
        return
    state = ls.repos.for_path(uri_path(uri), ls.options)
    if state is None or not _ready(state):
        return
    if ls.options.hoverPrewarm:
        generation = _generation.get(uri, 0) + 1
        _generation[uri] = generation
        _PREWARM.submit(prewarm_document, ls, state, uri, generation).add_done_callback(_log_failure)
    _PREWARM.submit(_build_definitions, state).add_done_callback(_log_failure)


def prewarm_open_documents(ls: BackstoryServer, state: RepoState) -> None:
    """After indexing (which empties the hover cache), prewarm the repository's open documents again."""
    for uri in list(ls.workspace.text_documents):
        if ls.repos.for_path(uri_path(uri), ls.options) is state:
            schedule_prewarm(ls, uri)
    if ls.options.hover and _ready(state):
        _PREWARM.submit(_build_definitions, state).add_done_callback(_log_failure)


def _log_failure(future: Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("hover prewarm failed: %s", future.exception())


def definitions_ready(state: RepoState) -> bool:
    """Whether HEAD's definitions table (cross-file references) is built for the current HEAD."""
    try:
        return HEAD_DEFINITIONS.ready(state.engine, state.engine.head()) is not None
    except Exception:
        return False


def indexing_line(state: RepoState) -> str:
    status = state.status
    done, total = status.get("done"), status.get("total")
    progress = f" ({done:,}/{total:,} commits)" if isinstance(done, int) and total else ""
    return f"Backstory: indexing history{progress}; past changes will show here when it is done."


async def hover(ls: BackstoryServer, params: types.HoverParams) -> types.Hover | None:
    if not ls.options.hover:
        return None
    uri = params.text_document.uri
    state = ls.repos.for_path(uri_path(uri), ls.options)
    if state is None:
        return None
    try:
        text = ls.workspace.get_text_document(uri).source
    except Exception:
        return None
    if not _ready(state):
        # say so only where a hover would show history: on a definition's name or a resolvable reference
        found = await asyncio.to_thread(resolve_at, state, uri, text, params.position)
        if found is None:
            return None
        value = indexing_line(state)
    else:
        markdown = await asyncio.to_thread(compute, ls, state, uri, text, params.position)
        if markdown is None:
            return None
        value = markdown
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value))


def did_open(ls: BackstoryServer, params: types.DidOpenTextDocumentParams) -> None:
    schedule_prewarm(ls, params.text_document.uri)


def register(ls: BackstoryServer) -> None:
    ls.feature(types.TEXT_DOCUMENT_HOVER)(hover)
    ls.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.index_listeners.append(prewarm_open_documents)  # indexing empties the hover cache: fill it again
