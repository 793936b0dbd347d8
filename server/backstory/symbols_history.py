"""Exact symbol history (EXACT provenance) and symbol-at-cursor prior art.

History is answered from the catalogue, not by re-diffing: the definition's line range at HEAD is carried back
through the stored hunks (git's own change blocks) and the merges' stored blocks with ``git log -L``'s rules,
so a cold call is SQLite lookups and a walk over the commit graph. That is what keeps the hover fast.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.objects import Blob, Commit, Tree

from . import symbols
from .history.repo import HistoryError, head_sha
from .index import merge_diffs
from .search import linelog, render

if TYPE_CHECKING:
    from .search.engine import Engine, SearchOptions

EXACT_LIMIT = 50
# every file diff of a path with its hunks' shapes, in hunk order (files_path then hunks_fid indexes)
_FILE_HUNKS = (
    "SELECT f.sha, f.change, f.old_path, h.uid, h.old_start, h.old_lines, h.new_start, h.new_lines, h.ops "
    "FROM files f LEFT JOIN hunks h ON h.fid = f.fid WHERE f.path=? ORDER BY f.fid, h.idx"
)
QUERY_BODY_CHARS = 1200


@dataclasses.dataclass
class Located:
    path: str
    line: int
    source: bytes
    definition: symbols.Definition | None


def parse_position(spec: str) -> tuple[str, int]:
    path, sep, line = spec.rpartition(":")
    if not sep or not path or not line.strip().isdigit():
        raise HistoryError(f"expected PATH:LINE (1-based line), got {spec!r}")
    n = int(line)
    if n < 1:
        raise HistoryError(f"line numbers start at 1, got {n}")
    return path, n


def repo_relative(engine: Engine, path: str) -> str:
    """Accept paths relative to the worktree root, to the current directory, or absolute."""
    p = Path(path)
    root = engine.root.resolve()
    candidates = [p] if p.is_absolute() else [Path.cwd() / p, root / p]
    for c in candidates:
        try:
            return c.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
    raise HistoryError(f"{path} is outside the repository {root}")


def head_blob(engine: Engine, rel: str) -> bytes:
    repo = engine.repo
    commit = repo[head_sha(repo).encode()]
    assert isinstance(commit, Commit)
    obj: Any = repo[commit.tree]
    for part in rel.split("/"):
        if not isinstance(obj, Tree):
            raise HistoryError(f"{rel} is not a file in HEAD")
        try:
            _mode, sha = obj[part.encode("utf-8", "surrogateescape")]
        except KeyError:
            raise HistoryError(f"{rel} is not in HEAD (new or untracked file?)") from None
        obj = repo[sha]
    if not isinstance(obj, Blob):
        raise HistoryError(f"{rel} is a directory, not a file")
    return obj.data


def locate(engine: Engine, path: str, line: int, source: bytes | None = None) -> Located:
    """The innermost definition at ``path:line`` in ``source`` (default: the file at HEAD)."""
    rel = repo_relative(engine, path)
    data = head_blob(engine, rel) if source is None else source
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    if line > max(n_lines, 1):
        raise HistoryError(f"line {line} is past the end of {rel} ({n_lines} lines)")
    language = symbols.language_for_path(rel)
    defs = _definitions(data, language) if language in symbols.supported_languages() else None
    d = symbols.innermost_definition(defs, line) if defs else None
    # the catalogue stores paths decoded with replacement characters (history/reader.py): a file name that is
    # not UTF-8 arrives here surrogate-escaped from the file system, and must be looked up in that form
    return Located(rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), line, data, d)


_PARSED: OrderedDict[tuple[str, bytes], list[symbols.Definition] | None] = OrderedDict()
PARSE_CACHE = 16


def _definitions(data: bytes, language: str | None) -> list[symbols.Definition] | None:
    """Definitions of a file version, memoised by content for the process: the hover and ``history`` ask about
    several symbols of the same file, and parsing a 1,000-line file costs ~10 ms."""
    key = (language or "", data)
    if key in _PARSED:
        _PARSED.move_to_end(key)
        return _PARSED[key]
    defs = symbols.extract_definitions(data, language or "")
    _PARSED[key] = defs
    if len(_PARSED) > PARSE_CACHE:
        _PARSED.popitem(last=False)
    return defs


def _symbol_json(loc: Located) -> dict[str, Any] | None:
    d = loc.definition
    if d is None:
        return None
    return {"name": d.name, "kind": d.kind, "path": loc.path, "start": d.start_line, "end": d.end_line}


def exact_commits(
    engine: Engine, path: str, start: int, end: int, limit: int | None = EXACT_LIMIT, head: str | None = None
) -> list[dict[str, Any]]:
    """Commits whose changes touched lines ``start..end`` of ``path`` at HEAD, following the range back through
    every diff and rename the way ``git log -L start,end:path`` does; newest first.

    The ranges are carried from child to parent through the graph with git's line-log rules (see
    :mod:`.search.linelog`); at a merge, the first parent that did not change them takes them alone, and a merge
    that changed them relative to every parent is listed itself (with no hunks: merges are not indexed).
    """
    if head is None:  # callers that just asked for freshness pass HEAD instead of asking again
        info, _allowed, _hint = engine.freshness()  # first: it may reopen the store after a rebuild
        head = info.get("head")
    if not head:
        return []
    db = engine.store.db
    parents, order = engine.topology(head)
    file_rows: dict[str, dict[str, tuple[str, str, list[Any]]]] = {}
    merge_rows: dict[str, dict[tuple[str, str], str | None]] = {}
    merge_shas: dict[str, set[str]] = {}
    indexed_merges = engine.indexed_merges()

    def changes_of(p: str) -> dict[str, tuple[str, str, list[Any]]]:
        """Non-merge commits that changed ``p``: sha -> (change kind, old path, hunk rows), in one query."""
        rows = file_rows.get(p)
        if rows is None:
            rows = file_rows[p] = {}
            for r in db.execute(_FILE_HUNKS, (p,)):
                entry = rows.get(r[0])
                if entry is None:
                    entry = rows[r[0]] = (r[1], r[2], [])
                if r[3] is not None:
                    entry[2].append(r[3:])
        return rows

    def merge_changes(p: str) -> dict[tuple[str, str], str | None]:
        if p not in merge_rows:
            rows = db.execute("SELECT sha, parent, ops FROM merge_paths WHERE path=?", (p,)).fetchall()
            merge_rows[p] = {(r[0], r[1]): r[2] for r in rows}
            merge_shas[p] = {r[0] for r in rows}
        return merge_rows[p]

    ranges: dict[str, dict[str, linelog.Ranges]] = {head: {path: [(start, end)]}}
    picked: list[tuple[str, list[int]]] = []

    def carry(parent: str, p: str, spans: linelog.Ranges) -> None:
        slot = ranges.setdefault(parent, {})
        old = slot.get(p)
        slot[p] = spans if old is None else linelog.normalize([*old, *spans])

    def pass_on(parent: str, current: dict[str, linelog.Ranges]) -> None:
        """Hand every range unchanged to ``parent`` (the common case: this commit did not touch the files)."""
        if parent not in ranges:
            ranges[parent] = current
            return
        for p, spans in current.items():
            carry(parent, p, spans)

    for sha in order:
        if limit is not None and len(picked) >= limit:
            break  # the walk is newest-first: callers that show a few need not walk to the root
        current = ranges.pop(sha, None)
        if current is None:
            continue
        ps = parents.get(sha, [])
        if len(ps) > 1:
            indexed = sha in indexed_merges
            for p in current:
                if p not in merge_shas:
                    merge_changes(p)
            if indexed and not any(sha in merge_shas[p] for p in current):
                pass_on(ps[0], current)  # identical to every parent in these files: the first takes all
            elif _through_merge(engine, sha, ps, current, merge_changes, indexed, carry):
                picked.append((sha, []))
            continue
        here = False
        for p in current:  # a plain loop: this test runs for every commit of the walk
            rows = file_rows.get(p)
            if sha in (rows if rows is not None else changes_of(p)):
                here = True
                break
        if not here:
            if ps:
                pass_on(ps[0], current)
            continue
        hits: list[int] = []
        for p, spans in current.items():
            row = changes_of(p).get(sha)
            if row is None:
                for parent in ps:
                    carry(parent, p, spans)
                continue
            change, old_path, hunks = row
            shapes = [linelog.HunkShape(h[1], h[2], h[3], h[4], h[5]) for h in hunks]
            touched, mapped = linelog.through(spans, shapes)
            hits.extend(hunks[i][0] for i in touched)
            if mapped and change != "add":
                for parent in ps:
                    carry(parent, old_path, mapped)
        if hits:
            picked.append((sha, hits))
    commits = render.commit_rows(db, [sha for sha, _ in picked])
    hunk_rows = render.hunk_rows(db, [u for _, us in picked for u in us])
    return [
        {
            "provenance": "EXACT",
            "commit": render.commit_json(commits[sha]),
            "hunks": [render.hunk_json(hunk_rows[u]) for u in uids],
        }
        for sha, uids in picked
    ]


def _through_merge(
    engine: Engine,
    merge: str,
    parents: list[str],
    current: dict[str, linelog.Ranges],
    merge_changes: Callable[[str], dict[tuple[str, str], str | None]],
    indexed: bool,
    carry: Callable[[str, str, linelog.Ranges], None],
) -> bool:
    """Carry the ranges through a merge as git's line-log does; True when the merge itself changed them.

    The first parent (in order) whose diff to the merge touches none of the ranges takes all the blame: only it
    is followed, with the ranges mapped to it. When every parent's diff touches them, the merge is part of the
    history and each parent gets its mapped ranges. The diffs were stored at index time (merge_diffs.py); a
    merge indexed without them, or not indexed yet, is diffed now."""
    candidates: list[tuple[str, list[tuple[str, linelog.Ranges]]]] = []
    for parent in parents:
        mapped: list[tuple[str, linelog.Ranges]] = []
        changed = False
        for p, spans in current.items():
            stored = merge_changes(p)
            key = (merge, parent)
            if indexed and key not in stored:
                mapped.append((p, spans))  # the file is identical in the merge and this parent
                continue
            ops = stored.get(key) if indexed else None
            if ops is None or ops in (merge_diffs.UNKNOWN, merge_diffs.NOT_NEEDED):
                ops = _merge_ops(engine, merge, parent, p)
            if ops == merge_diffs.UNKNOWN:
                mapped.append((p, spans))  # objects missing: nothing to compare, as if unchanged
                continue
            if ops == merge_diffs.ADDED:
                changed = True  # every line is new relative to this parent: nothing to carry there
                continue
            source, diff = merge_diffs.parse(ops, p)
            changed = changed or linelog.blocks_touch(spans, diff)
            out = linelog.map_blocks(spans, diff)
            if out:
                mapped.append((source, out))
        if not changed:
            for p, spans in mapped:
                carry(parent, p, spans)
            return False
        candidates.append((parent, mapped))
    for parent, mapped in candidates:
        for p, spans in mapped:
            carry(parent, p, spans)
    return True


_MERGE_OPS: weakref.WeakKeyDictionary[Engine, dict[tuple[str, str, str], str]] = weakref.WeakKeyDictionary()


def _merge_ops(engine: Engine, merge: str, parent: str, path: str) -> str:
    """A merge's change blocks against one parent, diffed now (memoised per engine)."""
    cache = _MERGE_OPS.setdefault(engine, {})
    key = (merge, parent, path)
    if key not in cache:
        if len(cache) > 20_000:
            cache.clear()
        repo = merge_diffs.open_repository(engine.repo.controldir())
        cache[key] = merge_diffs.merge_blocks(repo, merge, parent, path)
    return cache[key]


def _why_no_symbol(loc: Located) -> str:
    """Why a position has no definition, when the reason is not simply "between definitions" (`` (…)`` or "")."""
    from .symbols.extract import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_LENGTH

    language = symbols.language_for_path(loc.path)
    if language not in symbols.supported_languages():
        return f" ({language or 'this file type'} has no symbol parser)"
    if len(loc.source) > DEFAULT_MAX_BYTES:
        return f" (the file is {len(loc.source):,} bytes; symbols are parsed up to {DEFAULT_MAX_BYTES:,})"
    if any(len(row) > DEFAULT_MAX_LINE_LENGTH for row in loc.source.split(b"\n")):
        return f" (a line is longer than {DEFAULT_MAX_LINE_LENGTH:,} characters: minified code is not parsed)"
    return ""


def symbol_history(engine: Engine, position: str, source: bytes | None = None) -> dict[str, Any]:
    path, line = parse_position(position)
    loc = locate(engine, path, line, source)
    info, _allowed, hint = engine.freshness()
    meta: dict[str, Any] = {"repo": str(engine.root), "index": info, "hint": hint, "warnings": []}
    if loc.definition is None:
        return {
            "symbol": None,
            "commits": [],
            "message": f"no enclosing symbol at {loc.path}:{line}{_why_no_symbol(loc)}",
            "_meta": meta,
        }
    d = loc.definition
    exists = engine.store.exists()
    # every commit, as the spec and git log -L do (the hover and prior art cap theirs)
    commits = exact_commits(engine, loc.path, d.start_line, d.end_line, None, info.get("head")) if exists else []
    return {"symbol": _symbol_json(loc), "commits": commits, "message": None, "_meta": meta}


def symbol_query(loc: Located) -> str:
    """Query text for "prior art for this symbol": its name, signature and the start of its body."""
    d = loc.definition
    if d is None:
        return ""
    lines = loc.source.split(b"\n")[d.start_line - 1 : d.end_line]
    body = b"\n".join(lines).decode("utf-8", "replace")[:QUERY_BODY_CHARS]
    return f"{d.name} {d.short_name}\n{body}"


def prior_art(
    engine: Engine, position: str, opts: SearchOptions, source: bytes | None = None, text: str | None = None
) -> dict[str, Any]:
    """Exact history of the symbol at ``position`` first, then related commits elsewhere (de-duplicated).

    ``text`` (a selection) replaces the symbol-derived query when given.
    """
    path, line = parse_position(position)
    loc = locate(engine, path, line, source)
    d = loc.definition
    exact = exact_commits(engine, loc.path, d.start_line, d.end_line) if d is not None and engine.store.exists() else []
    query = text if text is not None else symbol_query(loc)
    if not query.strip():
        lines = loc.source.split(b"\n")
        query = b"\n".join(lines[max(0, line - 3) : line + 2]).decode("utf-8", "replace")
    seen = {e["commit"]["sha"] for e in exact}
    widened = dataclasses.replace(opts, k=opts.k + len(seen))
    result = engine.search(query, widened)
    result["results"] = [r for r in result["results"] if r["commit"]["sha"] not in seen][: opts.k]
    result["symbol"] = _symbol_json(loc)
    result["exact"] = exact
    result["query"] = query
    if loc.definition is None and text is None:
        why = _why_no_symbol(loc)
        result["_meta"]["warnings"].append(f"no enclosing symbol at {loc.path}:{line}{why}; searched the nearby lines")
    return result


__all__ = ["exact_commits", "locate", "prior_art", "symbol_history"]
