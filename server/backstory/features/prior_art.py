"""Prior art for a place in the code: the exact history of the definition there, and related commits elsewhere.

One composition (:func:`exact_and_related`) serves both the "find prior art" command and the hover, so the
two always agree on what is exact, what is related and how duplicates between them are dropped.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .exact_history import EXACT_LIMIT, exact_commits
from .locate import Located, Position, locate, symbol_json, why_no_symbol

if TYPE_CHECKING:
    from ..search.engine import Engine
    from ..search.options import SearchOptions

QUERY_BODY_CHARS = 1200


def symbol_query(loc: Located) -> str:
    """Query text for "prior art for this symbol": its name, signature and the start of its body."""
    d = loc.definition
    if d is None:
        return ""
    lines = loc.source.split(b"\n")[d.start_line - 1 : d.end_line]
    body = b"\n".join(lines).decode("utf-8", "replace")[:QUERY_BODY_CHARS]
    return f"{d.name} {d.short_name}\n{body}"


def exact_and_related(
    engine: Engine,
    loc: Located,
    query: str,
    opts: SearchOptions,
    exact_limit: int | None = EXACT_LIMIT,
    head: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The EXACT history of ``loc``'s definition (newest first, at most ``exact_limit``) and the search result
    for ``query`` with those commits left out of its ``opts.k`` results (INFERRED).

    The search asks for ``k`` more results than wanted so that dropping the exact commits still leaves ``k``.
    """
    d = loc.definition
    exact = []
    notes: list[str] = []
    if d is not None and engine.has_index():
        exact = exact_commits(engine, loc.path, d.start_line, d.end_line, exact_limit, head, notes=notes)
    seen = {e["commit"]["sha"] for e in exact}
    result = engine.search(query, dataclasses.replace(opts, k=opts.k + len(seen)))
    result["results"] = [r for r in result["results"] if r["commit"]["sha"] not in seen][: opts.k]
    if notes:
        result["_meta"].setdefault("warnings", []).extend(notes)
    return exact, result


def prior_art(
    engine: Engine, pos: Position, opts: SearchOptions, source: bytes | None = None, text: str | None = None
) -> dict[str, Any]:
    """Related commits for the symbol at ``pos`` (or for ``text``, a selection, when given), with the symbol's
    exact history beside them in ``exact``."""
    loc = locate(engine, pos, source)
    query = text if text is not None else symbol_query(loc)
    if not query.strip():
        lines = loc.source.split(b"\n")
        query = b"\n".join(lines[max(0, pos.line - 3) : pos.line + 2]).decode("utf-8", "replace")
    exact, result = exact_and_related(engine, loc, query, opts)
    result["symbol"] = symbol_json(loc)
    result["exact"] = exact
    result["query"] = query
    if loc.definition is None and text is None:
        why = why_no_symbol(loc)
        result["_meta"]["warnings"].append(
            f"no enclosing symbol at {loc.path}:{pos.line}{why}; searched the nearby lines"
        )
    return result
