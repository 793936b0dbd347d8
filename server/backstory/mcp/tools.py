"""The four tools' work, blocking and synchronous (the server runs it off the event loop): tool arguments in,
the JSON shapes of docs/protocol.md out. Arguments an agent can fix raise :class:`ToolInputError` (or the
``HistoryError`` / ``BadDate`` the features raise), which the server turns into an MCP tool error.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..features.exact_history import symbol_history as feature_symbol_history
from ..features.locate import Position, head_blob
from ..features.prior_art import prior_art
from ..features.show_commit import show
from ..history.repo import HistoryError, repo_relative
from ..index.text_index import Filters
from ..search.options import SearchOptions
from ..search.when import parse_when
from ..symbols.languages import known_languages

if TYPE_CHECKING:
    from ..search.engine import Engine

MAX_K = 20
DEFAULT_K = 5
HISTORY_LIMIT = 20
MAX_HISTORY_LIMIT = 200
SHOW_LINES = 400
MAX_SHOW_LINES = 5000
LONG_LINE = 1000  # characters of one diff line shown (minified code, data files)


class ToolInputError(ValueError):
    """Arguments the agent can fix; the message says how."""


def search_options(
    k: int, since: str | None, until: str | None, path_glob: str | None, author: str | None, language: str | None
) -> SearchOptions:
    """The CLI's filter rules (``backstory query --since/--until/--path/--author/--language``)."""
    if not 1 <= k <= MAX_K:
        raise ToolInputError(f"k must be between 1 and {MAX_K}, got {k}")
    start = parse_when(since) if since else None
    end = parse_when(until, end_of_day=True) if until else None
    if start is not None and end is not None and start > end:
        raise ToolInputError(f"since {since} is after until {until}: no commit can match")
    lang = language.strip().lower() if language else None
    if lang is not None and lang not in known_languages():
        raise ToolInputError(f"unknown language {language!r}; known: {', '.join(sorted(known_languages()))}")
    filters = Filters(since=start, until=end, path_glob=path_glob or None, author=author or None, language=lang)
    return SearchOptions(k=k, filters=filters)


def position(engine: Engine, path: str, line: int) -> tuple[Position, bytes]:
    """``path`` (relative to the repository root, or absolute inside it) and ``line`` (1-based) as a Position,
    with the file's content: as it is on disk (the line numbers an agent sees), else at HEAD."""
    if not path.strip():
        raise ToolInputError("path is empty; give a file path relative to the repository root")
    rel = repo_relative(engine.root, path)
    disk = engine.root / rel
    if disk.is_dir():
        raise ToolInputError(f"{rel} is a directory; give a file")
    if disk.is_file():
        source = disk.read_bytes()
    else:
        try:
            source = head_blob(engine, rel)
        except HistoryError:
            raise ToolInputError(
                f"unknown path {rel}: no such file in the working tree or at HEAD of {engine.root}"
            ) from None
    try:
        pos = Position(rel, line)
    except HistoryError as e:
        raise ToolInputError(str(e)) from None
    n_lines = source.count(b"\n") + (0 if source.endswith(b"\n") or not source else 1)
    if line > max(n_lines, 1):
        raise ToolInputError(f"line {line} is past the end of {rel} ({n_lines} lines)")
    return pos, source


def find_prior_art(
    engine: Engine,
    *,
    query: str | None,
    path: str | None,
    line: int | None,
    k: int,
    since: str | None = None,
    until: str | None = None,
    path_glob: str | None = None,
    author: str | None = None,
    language: str | None = None,
) -> dict[str, Any]:
    """A search result (``backstory query --json``), or with ``path`` + ``line`` prior art at that position
    (``backstory query --at``: the symbol's EXACT history in ``exact``, related commits in ``results``)."""
    opts = search_options(k, since, until, path_glob, author, language)
    text = query if query is not None and query.strip() else None
    if (path is None) != (line is None):
        raise ToolInputError("give path and line together (a position), or only query")
    if path is None or line is None:
        if text is None:
            raise ToolInputError("give query (what to look for, in words or code), or path and line")
        return engine.search(text, opts)
    pos, source = position(engine, path, line)
    return prior_art(engine, pos, opts, source=source, text=text)


def symbol_history(engine: Engine, *, path: str, line: int, limit: int = HISTORY_LIMIT) -> dict[str, Any]:
    """``backstory history PATH:LINE --json``, newest ``limit`` commits (a warning says when there are more)."""
    if not 1 <= limit <= MAX_HISTORY_LIMIT:
        raise ToolInputError(f"limit must be between 1 and {MAX_HISTORY_LIMIT}, got {limit}")
    pos, source = position(engine, path, line)
    result = feature_symbol_history(engine, pos, source)
    total = len(result["commits"])
    if total > limit:
        result["commits"] = result["commits"][:limit]
        more = f"raise limit (up to {MAX_HISTORY_LIMIT})" if limit < MAX_HISTORY_LIMIT else "use git log -L for all"
        result["_meta"]["warnings"].append(f"showing the newest {limit} of {total} commits; {more}")
    result["_meta"]["total_commits"] = total
    return result


def show_commit(
    engine: Engine, *, revision: str, path: str | None = None, max_lines: int = SHOW_LINES
) -> dict[str, Any]:
    """A commit's header, message and diff (the language server's ``backstory.showCommit`` shape), the text cut
    after ``max_lines`` lines with a note saying how much was cut and which files it held."""
    if not revision.strip():
        raise ToolInputError("revision is empty; give a sha (4+ hex digits), a branch, a tag or HEAD~N")
    if not 20 <= max_lines <= MAX_SHOW_LINES:
        raise ToolInputError(f"max_lines must be between 20 and {MAX_SHOW_LINES}, got {max_lines}")
    rel = repo_relative(engine.root, path) if path else None
    shown = dataclasses.asdict(show(engine, revision, rel))
    lines = shown["text"].split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[str] = list(dict.fromkeys(str(h["path"]) for h in shown["hunks"]))
    cut_files = list(dict.fromkeys(str(h["path"]) for h in shown["hunks"] if int(h["line"]) >= max_lines))
    kept = [_short(x) for x in lines[:max_lines]]
    cut = lines[max_lines:]
    note = None
    if cut:
        size = sum(len(x) + 1 for x in cut)
        where = f"; hunks of {', '.join(cut_files)} are in the cut part" if cut_files else ""
        note = (
            f"[cut: {len(cut):,} of {len(lines):,} lines ({size:,} characters) not shown{where}. "
            f"Call show_commit again with path=<one file>, or max_lines up to {MAX_SHOW_LINES}]"
        )
    shown["text"] = "\n".join(kept + ([note] if note else [])) + "\n"
    shown.update(files=files, lines=len(lines), shown_lines=len(kept), truncated=bool(cut), note=note)
    return shown


def _short(line: str) -> str:
    if len(line) <= LONG_LINE:
        return line
    return f"{line[:LONG_LINE]} …[{len(line) - LONG_LINE:,} more characters on this line]"


def index_status(engine: Engine) -> dict[str, Any]:
    """``backstory status --json`` plus the file units still waiting for embeddings."""
    status = engine.status()
    if engine.has_index():
        status["pending_units"] = engine.pending_units()
    return status
