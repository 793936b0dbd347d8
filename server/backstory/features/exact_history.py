"""Exact symbol history (EXACT provenance): every commit that changed a definition, like ``git log -L``.

History is answered from the catalogue, not by re-diffing: the definition's line range at HEAD is carried back
through the stored hunks (git's own change blocks) and the merges' stored blocks with ``git log -L``'s rules,
so a cold call is SQLite lookups and a walk over the commit graph. That is what keeps the hover fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..history import linelog
from ..history.repo import shallow_roots
from ..index import merge_diffs
from ..search import results
from .locate import Position, locate, symbol_json, why_no_symbol

if TYPE_CHECKING:
    from ..search.engine import Engine

EXACT_LIMIT = 50


def exact_commits(
    engine: Engine,
    path: str,
    start: int,
    end: int,
    limit: int | None = EXACT_LIMIT,
    head: str | None = None,
    skipped: list[str] | None = None,
    notes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Commits whose changes touched lines ``start..end`` of ``path`` at HEAD, following the range back through
    every diff and rename the way ``git log -L start,end:path`` does; newest first (author date).

    A shallow clone's boundary commit is where the known history ends, not a change: its diff is against
    nothing, so it would otherwise "add" every line of every file. When the walk reaches it, the walk stops
    there and ``notes`` gets a sentence saying so.

    The ranges are carried from child to parent through the graph with git's line-log rules (see
    :mod:`backstory.history.linelog`); at a merge, the first parent that did not change them takes them alone,
    and a merge that changed them relative to every parent is listed itself (with no hunks: merges are not indexed).
    Commits the project lists as formatting-only (:meth:`Engine.ignored_revisions`) are followed through but not
    listed; their shas go to ``skipped``.
    """
    if head is None:  # callers that just asked for freshness pass HEAD instead of asking again
        info, _allowed, _hint = engine.freshness()  # first: it may reopen the store after a rebuild
        head = info.get("head")
    if not head:
        return []
    catalog = engine.catalog
    parents, order = engine.topology(head)
    file_rows: dict[str, dict[str, tuple[str, str, list[Any]]]] = {}
    merge_rows: dict[str, dict[tuple[str, str], str | None]] = {}
    merge_shas: dict[str, set[str]] = {}
    indexed_merges = engine.indexed_merges()

    def changes_of(p: str) -> dict[str, tuple[str, str, list[Any]]]:
        """Non-merge commits that changed ``p``: sha -> (change kind, old path, hunk rows), in one query."""
        rows = file_rows.get(p)
        if rows is None:
            with engine.catalogue_lock:
                rows = file_rows[p] = catalog.path_changes(p)
        return rows

    def merge_changes(p: str) -> dict[tuple[str, str], str | None]:
        if p not in merge_rows:
            with engine.catalogue_lock:
                merge_rows[p] = catalog.merge_changes(p)
            merge_shas[p] = {sha for sha, _parent in merge_rows[p]}
        return merge_rows[p]

    ignored = engine.ignored_revisions()
    ranges: dict[str, dict[str, linelog.Ranges]] = {head: {path: [(start, end)]}}
    picked: list[tuple[str, list[int]]] = []
    shallow = shallow_roots(engine.repo)

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
        if sha in shallow:
            if notes is not None:
                notes.append(
                    f"the history stops at the shallow clone's boundary ({sha[:7]}); "
                    "`git fetch --unshallow` brings the older changes"
                )
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
        if hits and sha in ignored:
            if skipped is not None:
                skipped.append(sha)
        elif hits:
            picked.append((sha, hits))
    commits = catalog.commit_rows([sha for sha, _ in picked])
    hunk_rows = catalog.hunk_rows([u for _, us in picked for u in us])
    # the walk is children-first; shown newest first by the date shown (author date), the walk's order breaking ties
    picked.sort(key=lambda p: -commits[p[0]]["author_time"])
    out = [
        {
            "provenance": "EXACT",
            "commit": results.commit_json(commits[sha]),
            "hunks": [results.hunk_json(hunk_rows[u]) for u in uids],
        }
        for sha, uids in picked
    ]
    results.attach_consequences(out, catalog)
    return out


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
    for i, parent in enumerate(parents):
        mapped: list[tuple[str, linelog.Ranges]] = []
        changed = False
        for p, spans in current.items():
            stored = merge_changes(p)
            key = (merge, parent)
            # a row is stored only when the file differs from this parent and every earlier one
            # (`merge_diffs.list_paths`): no row behind parents that all differ means identical; behind an
            # identical one, nothing is known
            if indexed and key not in stored and all((merge, q) in stored for q in parents[:i]):
                mapped.append((p, spans))  # the file is identical in the merge and this parent
                continue
            ops = stored.get(key) if indexed else None
            if ops is None or ops == merge_diffs.UNKNOWN:
                ops = engine.merge_blocks(merge, parent, p)
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


def symbol_history(engine: Engine, pos: Position, source: bytes | None = None) -> dict[str, Any]:
    """Every commit that changed the definition enclosing ``pos`` (EXACT), like ``git log -L :name:path``."""
    loc = locate(engine, pos, source)
    info, _allowed, hint = engine.freshness()
    meta: dict[str, Any] = {"repo": str(engine.root), "index": info, "hint": hint, "warnings": []}
    if loc.definition is None:
        return {
            "symbol": None,
            "commits": [],
            "message": f"no enclosing symbol at {loc.path}:{pos.line}{why_no_symbol(loc)}",
            "_meta": meta,
        }
    d = loc.definition
    exists = engine.has_index()
    # every commit, as the spec and git log -L do (the hover and prior art cap theirs)
    skipped: list[str] = []
    head = info.get("head")
    notes = meta["warnings"]
    commits = (
        exact_commits(engine, loc.path, d.start_line, d.end_line, None, head, skipped, notes=notes) if exists else []
    )
    message = None
    if skipped:
        n = len(skipped)
        message = f"{n} formatting commit{'s' if n != 1 else ''} skipped (listed in the repository's ignore-revs file)"
    return {
        "symbol": symbol_json(loc), "commits": commits, "message": message,
        "skipped": [{"sha": sha, "short_sha": sha[:7]} for sha in skipped], "_meta": meta,
    }  # fmt: skip


__all__ = ["EXACT_LIMIT", "exact_commits", "symbol_history"]
