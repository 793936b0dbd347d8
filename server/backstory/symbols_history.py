"""Exact symbol history (EXACT provenance) and symbol-at-cursor prior art.

History is answered from the catalogue, not by re-diffing: at index time every hunk records the definitions its
changed lines fell in (post-image for added lines, pre-image for removed ones), so "every commit that changed
``Client.send``" is one indexed lookup, followed back through file renames. That is what keeps the hover fast.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.objects import Blob, Commit, Tree

from . import symbols
from .history.repo import HistoryError, head_sha
from .search import render

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


def exact_commits(engine: Engine, name: str, kind: str, path: str, limit: int = EXACT_LIMIT) -> list[dict[str, Any]]:
    """Commits that changed definition ``name`` (of ``kind``) in ``path``, following renames, newest first.

    The kind matters: a Rust ``struct Point`` and its ``impl Point`` share a name but not a history.
    """
    _info, allowed, _hint = engine.freshness()  # first: it may reopen the store after a rebuild
    db = engine.store.db
    rows = db.execute(
        "SELECT sc.sha, sc.path, sc.uid, c.commit_time FROM symbol_changes sc JOIN commits c ON c.sha = sc.sha"
        " WHERE sc.name = ? AND sc.kind = ? AND c.state = 'indexed'",
        (name, kind),
    ).fetchall()
    if not rows:
        return []
    by_commit: dict[str, list[tuple[str, int]]] = {}
    times: dict[str, int] = {}
    for sha, p, uid, t in rows:
        if allowed is not None and sha not in allowed:
            continue
        by_commit.setdefault(sha, []).append((p, uid))
        times[sha] = t
    renames: dict[str, list[tuple[str, str]]] = {}
    for sha, new, old, t in db.execute(
        "SELECT f.sha, f.path, f.old_path, c.commit_time FROM files f JOIN commits c ON c.sha = f.sha"
        " WHERE f.change = 'rename' AND c.state = 'indexed'"
    ):
        if allowed is None or sha in allowed:
            renames.setdefault(sha, []).append((new, old))
            times.setdefault(sha, t)
    order = sorted(times, key=lambda s: (-times[s], s))
    current = path
    picked: list[tuple[str, list[int]]] = []
    for sha in order:
        uids = [uid for p, uid in by_commit.get(sha, []) if p == current]
        if uids:
            picked.append((sha, uids))
        for new, old in renames.get(sha, []):
            if new == current:
                current = old
                break
        if len(picked) >= limit:
            break
    commits = render.commit_rows(db, [s for s, _ in picked])
    hunks = render.hunk_rows(db, [u for _, us in picked for u in us])
    return [
        {
            "provenance": "EXACT",
            "commit": render.commit_json(commits[sha]),
            "hunks": [render.hunk_json(hunks[u]) for u in sorted(uids, key=lambda u: hunks[u]["idx"])],
        }
        for sha, uids in picked
    ]


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
    commits = exact_commits(engine, d.name, d.kind, loc.path) if engine.store.exists() else []
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
    exact = exact_commits(engine, d.name, d.kind, loc.path) if d is not None and engine.store.exists() else []
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
