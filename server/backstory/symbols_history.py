"""Exact symbol history (EXACT provenance) and symbol-at-cursor prior art.

History is answered from the catalogue, not by re-diffing: at index time every hunk records the definitions its
changed lines fell in (post-image for added lines, pre-image for removed ones), so "every commit that changed
``Client.send``" is one indexed lookup, followed back through file renames. That is what keeps the hover fast.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.object_store import tree_lookup_path
from dulwich.objects import Blob, Commit, Tree

from . import symbols
from .history.diff import diff_ops
from .history.repo import HistoryError, head_sha
from .search import linelog, render

if TYPE_CHECKING:
    from .search.engine import Engine, SearchOptions

EXACT_LIMIT = 50
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
    defs = symbols.extract_definitions(data, language) if language in symbols.supported_languages() else None
    d = symbols.innermost_definition(defs, line) if defs else None
    return Located(rel, line, data, d)


def _symbol_json(loc: Located) -> dict[str, Any] | None:
    d = loc.definition
    if d is None:
        return None
    return {"name": d.name, "kind": d.kind, "path": loc.path, "start": d.start_line, "end": d.end_line}


def exact_commits(
    engine: Engine, path: str, start: int, end: int, limit: int = EXACT_LIMIT, head: str | None = None
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
    file_rows: dict[str, dict[str, Any]] = {}

    def changes_of(p: str) -> dict[str, Any]:
        if p not in file_rows:
            file_rows[p] = {
                r["sha"]: r for r in db.execute("SELECT fid, sha, change, old_path FROM files WHERE path=?", (p,))
            }
        return file_rows[p]

    merge_rows: dict[str, set[tuple[str, str]]] = {}
    indexed_merges = engine.indexed_merges()

    def merge_changes(p: str) -> set[tuple[str, str]]:
        if p not in merge_rows:
            rows = db.execute("SELECT sha, parent FROM merge_paths WHERE path=?", (p,))
            merge_rows[p] = {(r[0], r[1]) for r in rows}
        return merge_rows[p]

    ranges: dict[str, dict[str, linelog.Ranges]] = {head: {path: [(start, end)]}}
    picked: list[tuple[str, list[int]]] = []

    def carry(parent: str, p: str, spans: linelog.Ranges) -> None:
        slot = ranges.setdefault(parent, {})
        old = slot.get(p)
        slot[p] = spans if old is None else linelog.normalize([*old, *spans])

    for sha in order:
        if len(picked) >= limit:
            break  # the walk is newest-first: callers that show a few need not walk to the root
        current = ranges.pop(sha, None)
        if current is None:
            continue
        ps = parents.get(sha, [])
        if len(ps) > 1:
            if _through_merge(engine, sha, ps, current, merge_changes, sha in indexed_merges, carry):
                picked.append((sha, []))
            continue
        for p, spans in current.items():
            row = changes_of(p).get(sha)
            if row is None:
                for parent in ps:
                    carry(parent, p, spans)
                continue
            hunks = db.execute(
                "SELECT uid, old_start, old_lines, new_start, new_lines, ops FROM hunks WHERE fid=? ORDER BY idx",
                (row["fid"],),
            ).fetchall()
            shapes = [linelog.HunkShape(h[1], h[2], h[3], h[4], h[5]) for h in hunks]
            hit = [hunks[i][0] for i in linelog.touched_hunks(spans, shapes)]
            if hit:
                picked.append((sha, hit))
            mapped = [] if row["change"] == "add" else linelog.set_to_parent(spans, shapes)
            if mapped:
                for parent in ps:
                    carry(parent, row["old_path"], mapped)
    picked = picked[:limit]
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


def _blob_at(engine: Engine, commit: str, path: str) -> bytes | None:
    """The blob id of ``path`` in ``commit`` (None if absent), memoised per engine."""
    key = (commit, path)
    cache = engine.blob_ids
    if key not in cache:
        repo = engine.repo
        try:
            tree = repo[commit.encode()].tree  # type: ignore[attr-defined]
            _mode, sha = tree_lookup_path(repo.object_store.__getitem__, tree, path.encode("utf-8", "surrogateescape"))
            cache[key] = sha
        except KeyError:
            cache[key] = None
    return cache[key]


def _through_merge(
    engine: Engine,
    merge: str,
    parents: list[str],
    current: dict[str, linelog.Ranges],
    merge_changes: Callable[[str], set[tuple[str, str]]],
    indexed: bool,
    carry: Callable[[str, str, linelog.Ranges], None],
) -> bool:
    """Carry the ranges through a merge as git's line-log does; True when the merge itself changed them.

    The first parent (in order) whose diff to the merge touches none of the ranges takes all the blame: only it
    is followed, with the ranges mapped to it. When every parent's diff touches them, the merge is part of the
    history and each parent gets its mapped ranges."""
    candidates: list[tuple[str, list[tuple[str, linelog.Ranges]]]] = []
    for parent in parents:
        mapped: list[tuple[str, linelog.Ranges]] = []
        changed = False
        for p, spans in current.items():
            if indexed and (merge, parent) not in merge_changes(p):
                mapped.append((p, spans))  # the file is identical in the merge and this parent
                continue
            out, touched = _merge_to_parent(engine, merge, parent, p, spans)
            changed = changed or touched
            if out:
                mapped.append((p, out))
        if not changed:
            for p, spans in mapped:
                carry(parent, p, spans)
            return False
        candidates.append((parent, mapped))
    for parent, mapped in candidates:
        for p, spans in mapped:
            carry(parent, p, spans)
    return True


def _merge_to_parent(
    engine: Engine, merge: str, parent: str, path: str, spans: linelog.Ranges
) -> tuple[linelog.Ranges, bool]:
    """A range mapped through a merge to one parent, and whether that diff touched it, from a diff computed now
    (merges are never indexed, and most do not touch a given file)."""
    mine = _blob_at(engine, merge, path)
    theirs = _blob_at(engine, parent, path)
    if mine is None:
        return spans, False
    if theirs is None:
        return [], True  # the file is new relative to this parent: every line was added
    if mine == theirs:
        return spans, False
    diff = engine.merge_shapes.get((theirs, mine))
    if diff is None:
        store = engine.repo.object_store
        ops = diff_ops(store[theirs].as_raw_string(), store[mine].as_raw_string())  # type: ignore[index]
        diff = linelog.blocks([linelog.HunkShape(*op) for op in ops])
        if len(engine.merge_shapes) > 20_000:
            engine.merge_shapes.clear()
        engine.merge_shapes[(theirs, mine)] = diff
    return linelog.map_blocks(spans, diff), linelog.blocks_touch(spans, diff)


def symbol_history(engine: Engine, position: str, source: bytes | None = None) -> dict[str, Any]:
    path, line = parse_position(position)
    loc = locate(engine, path, line, source)
    info, _allowed, hint = engine.freshness()
    meta: dict[str, Any] = {"repo": str(engine.root), "index": info, "hint": hint, "warnings": []}
    if loc.definition is None:
        return {
            "symbol": None,
            "commits": [],
            "message": f"no enclosing symbol at {loc.path}:{line}",
            "_meta": meta,
        }
    d = loc.definition
    exists = engine.store.exists()
    commits = exact_commits(engine, loc.path, d.start_line, d.end_line, head=info.get("head")) if exists else []
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
        result["_meta"]["warnings"].append(f"no enclosing symbol at {loc.path}:{line}; searched the nearby lines")
    return result


__all__ = ["exact_commits", "locate", "prior_art", "symbol_history"]
