"""Why a result is shown, in words a reader understands ("same function", "similar change in src/x.py",
"message matches your words") instead of lane ranks and scores. One rule for every view; the language server
puts it in each result's ``reason`` so both editor clients show the same sentence.
"""

from __future__ import annotations

from typing import Any

# when two lanes found a commit at the same rank, the more telling explanation wins
_PREFERENCE = ("symbol", "diff", "message", "path", "message_dense", "dense")


def _best_lane(lanes: dict[str, Any]) -> str | None:
    ranked = [(rank, _PREFERENCE.index(lane) if lane in _PREFERENCE else 9, lane) for lane, rank in lanes.items()]
    ranked = [r for r in ranked if isinstance(r[0], int)]
    return min(ranked)[2] if ranked else None


def _primary_path(item: dict[str, Any]) -> str | None:
    hunks = item.get("hunks") or []
    best = None
    best_rank = None
    for h in hunks:
        ranks = [r for r in (h.get("lanes") or {}).values() if isinstance(r, int)]
        if ranks and (best_rank is None or min(ranks) < best_rank):
            best, best_rank = h, min(ranks)
    h = best or (hunks[0] if hunks else None)
    if h is None:
        return None
    return str(h.get("old_path") if h.get("change") == "delete" and h.get("old_path") else h.get("path"))


def reason(item: dict[str, Any], mode: str, origin_path: str | None = None, kind: str | None = None) -> str:
    """A short phrase for one result. ``mode``: ``words`` (a free-text search), ``code`` (prior art for a
    symbol or a selection: the query is code); ``origin_path`` is the file asked about, ``kind`` the kind of the
    symbol asked about (for the exact history: "same function")."""
    if item.get("provenance") == "EXACT":
        return f"same {kind}" if kind else "same definition"
    lanes = (item.get("why") or {}).get("lanes") or {}
    lane = _best_lane(lanes)
    path = _primary_path(item)
    here = path is not None and path == origin_path
    where = "this file" if here else path
    if mode == "words":
        if lane == "message":
            return "message matches your words"
        if lane == "message_dense":
            return "its message means what you asked"
        if lane == "diff":
            return f"code matches your words, in {where}" if where else "code matches your words"
        if lane == "symbol":
            return f"a name it changed matches your words, in {where}" if where else "a name it changed matches"
        if lane == "path":
            return f"file name matches: {path}" if path else "file name matches"
        return f"similar change in {where}" if where else "similar change"
    if lane == "symbol":
        return f"changed the same names in {where}" if where else "changed the same names"
    if lane == "diff":
        return f"similar code in {where}" if where else "similar code"
    if lane == "message":
        return "its message names this code"
    if lane == "message_dense":
        return "its message is about this code"
    if lane == "path":
        return "same file" if here else (f"changed {path}" if path else "related file")
    return f"similar change in {where}" if where else "similar change"


def add_reasons(
    items: list[dict[str, Any]], mode: str, origin_path: str | None = None, kind: str | None = None
) -> None:
    """Set ``reason`` on each result (in place)."""
    for item in items:
        if isinstance(item, dict):
            item["reason"] = reason(item, mode, origin_path, kind)
