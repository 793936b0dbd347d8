"""Terminal rendering of the JSON results (the JSON is the contract; this is a view of it).

One or two lines per commit by default: short sha and subject, then author, age, where it matched and why in
words. ``hunks=True`` adds each hunk's location and the first lines of its diff. Colours only when asked for
(``use_color``: a terminal, ``NO_COLOR`` unset, or ``--color always``).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Iterable
from typing import Any, TextIO

from .age import relative_age
from .consequences import consequence_line

# what each lane found, in words: (kind, the words of that kind)
_WORDS = {"diff": "the change", "message": "the message", "path": "a file path"}


class Style:
    """ANSI styling that is the identity when colour is off."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def sha(self, text: str) -> str:
        return self._wrap("33", text)  # yellow, as git log shows it

    def subject(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def path(self, text: str) -> str:
        return self._wrap("36", text)

    def exact(self, text: str) -> str:
        return self._wrap("32", text)

    def warn(self, text: str) -> str:
        return self._wrap("33", text)

    def added(self, text: str) -> str:
        return self._wrap("32", text)

    def removed(self, text: str) -> str:
        return self._wrap("31", text)


def use_color(stream: TextIO, mode: str = "auto") -> bool:
    """``always`` / ``never``, or ``auto``: a terminal and no ``NO_COLOR`` (https://no-color.org)."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def _width(out: TextIO) -> int | None:
    """The terminal's width when writing to one (long lines are cut there), else None (never cut)."""
    isatty = getattr(out, "isatty", None)
    if not (isatty and isatty()):
        return None
    return max(shutil.get_terminal_size().columns, 40)


def _cut(text: str, room: int | None) -> str:
    if room is None or len(text) <= room:
        return text
    return text[: max(room - 1, 1)] + "…"


def _age(date: str, now: float) -> str:
    return relative_age(int(dt.datetime.fromisoformat(date).timestamp()), now)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _where(hunks: list[dict[str, Any]], lane: str | None = None) -> str:
    """``path:line (Symbol)`` of the first hunk (the first one ``lane`` found, when given), and how many more
    files the shown hunks touch."""
    if not hunks:
        return ""
    best = next((h for h in hunks if lane and lane in h.get("lanes", {})), hunks[0])
    loc = f"{best['old_path']} (deleted)" if best["change"] == "delete" else f"{best['path']}:{best['new_start']}"
    syms = best.get("symbols") or []
    if syms:
        loc += f" ({syms[0]['name']})"
    others = {h["path"] for h in hunks} - {best["path"]}
    if others:
        loc += f" +{len(others)} file{'s' if len(others) > 1 else ''}"
    return loc


def why_words(r: dict[str, Any], words: str = "your words") -> str:
    """Why a result matched, in words: which lanes found it, best first.

    ``{"diff": 3, "message": 1, "dense": 2}`` reads "your words in the message and the change; a similar
    change in src/x.py". Prior art's query is the definition's code: its matches are "shared words"."""
    if r.get("provenance") == "EXACT":
        return "changed this definition"
    lanes: dict[str, int] = r.get("why", {}).get("lanes", {})
    ordered = sorted(lanes, key=lambda lane: (lanes[lane], lane))
    places = [_WORDS[lane] for lane in ordered if lane in _WORDS]
    parts: list[str] = []
    for lane in ordered:
        if lane in _WORDS and places:
            parts.append(f"{words} in {_and(places)}")
            places = []
        elif lane == "symbol":
            parts.append("a name it changed")
        elif lane == "message_dense":
            parts.append("a message that means it")
        elif lane == "dense":
            hunks = r.get("hunks", [])
            dense_hunk = next((h for h in hunks if "dense" in h.get("lanes", {})), hunks[0] if hunks else None)
            parts.append(f"a similar change in {dense_hunk['path']}" if dense_hunk else "a similar change")
    return "; ".join(parts)


def _commit(
    r: dict[str, Any], out: TextIO, st: Style, now: float, hunks: bool, why: str | None, room: int | None
) -> None:
    c = r["commit"]
    first = f"{st.sha(c['short_sha'])}  {st.subject(_cut(c['subject'], None if room is None else room - 9))}"
    out.write(first + "\n")
    details = [f"{c['author']['name']}, {_age(c['date'], now)}"]
    where = _where(r.get("hunks", []))
    if where and not hunks:
        details.append(where)
    if why:
        reason = why_words(r, why)
        if reason:
            details.append(reason)
    line = " · ".join(details)
    out.write("         " + st.dim(_cut(line, None if room is None else room - 9)) + "\n")
    if r.get("consequences"):
        out.write("         " + consequence_line(r["consequences"]) + "\n")
    if r.get("twins"):
        twins = ", ".join(t["short_sha"] for t in r["twins"])
        out.write("         " + st.dim(f"the same change also as {twins}") + "\n")
    if hunks:
        for h in r.get("hunks", []):
            _hunk(h, out, st)
        out.write("\n")


def _hunk(h: dict[str, Any], out: TextIO, st: Style, excerpt_lines: int = 8) -> None:
    loc = f"{h['path']}:{h['new_start']}" if h["change"] != "delete" else f"{h['old_path']} (deleted)"
    syms = ", ".join(s["name"] for s in h.get("symbols", [])[:3])
    out.write("         " + st.path(loc) + (f"  {syms}" if syms else "") + "\n")
    lines = h["excerpt"].split("\n")[1 : 1 + excerpt_lines]
    for line in lines:
        shown = st.added(line) if line.startswith("+") else st.removed(line) if line.startswith("-") else line
        out.write(f"           {shown}\n")
    if len(h["excerpt"].split("\n")) > 1 + excerpt_lines or h.get("truncated"):
        out.write("           " + st.dim("…") + "\n")


def _commits(
    rows: Iterable[dict[str, Any]],
    out: TextIO,
    st: Style,
    hunks: bool,
    why: str | None = "your words",
    now: float | None = None,
) -> None:
    """Commits, two lines each; ``why`` names what matched ("your words", "shared words"), None = no why."""
    now = time.time() if now is None else now
    room = _width(out)
    for r in rows:
        _commit(r, out, st, now, hunks, why, room)


def notes(meta: dict[str, Any], dense_expected: bool = True) -> list[str]:
    """Warnings, the hint and, when the embedding phase has not finished, how much of the index the dense
    lane could see."""
    lines = [f"warning: {w}" for w in meta.get("warnings", [])]
    index = meta.get("index") or {}
    coverage = index.get("dense_coverage")
    if dense_expected and "dense" in meta.get("lanes", []) and coverage is not None and coverage < 1.0:
        busy = index.get("indexer_pid") is not None
        lines.append(
            f"note: only {coverage:.0%} of the changes are embedded so far, so similar changes may be missing; "
            + ("an indexer is embedding the rest" if busy else "run `backstory index` to embed the rest")
        )
    waiting = index.get("symbols_pending")
    if waiting:
        busy = index.get("indexer_pid") is not None
        lines.append(
            f"note: {waiting:,} changes have no symbols attached yet, so symbol matches may be missing; "
            + ("an indexer is attaching them" if busy else "run `backstory index` to attach them")
        )
    if meta.get("hint"):
        lines.append(f"hint: {meta['hint']}")
    return lines


def print_results(result: dict[str, Any], out: TextIO, *, hunks: bool = False, color: bool = False) -> None:
    """A search or prior-art result. Nothing is printed for an empty one but the notes (the caller says
    "no matching commits" on stderr)."""
    st = Style(color)
    exact = result.get("exact") or []
    related = result.get("results") or []
    if result.get("symbol"):
        s = result["symbol"]
        out.write(st.subject(f"{s['name']}") + st.dim(f"  {s['kind']}, {s['path']}:{s['start']}-{s['end']}") + "\n")
        if exact:
            out.write(st.exact(f"Changes to {s['name']} (exact history, newest first):") + "\n")
    _commits(exact, out, st, hunks, why=None)
    if related:
        if exact or result.get("symbol"):
            out.write(("\n" if exact and not hunks else "") + st.exact("Related elsewhere:") + "\n")
        _commits(related, out, st, hunks, why="shared words" if result.get("symbol") else "your words")
    for line in notes(result.get("_meta", {})):
        out.write(st.warn(line) + "\n")


def print_history(result: dict[str, Any], out: TextIO, *, hunks: bool = False, color: bool = False) -> None:
    st = Style(color)
    if result.get("symbol") is None:
        out.write(f"{result.get('message') or 'no enclosing symbol'}\n")
        return
    s = result["symbol"]
    n = len(result["commits"])
    out.write(
        st.subject(f"History of {s['name']}")
        + st.dim(f"  {s['kind']}, {s['path']}:{s['start']}-{s['end']}; {n} commit{'' if n == 1 else 's'}")
        + ("" if n < 2 else st.dim(", newest first"))
        + "\n"
    )
    _commits(result["commits"], out, st, hunks, why=None)
    if result.get("skipped"):
        shas = ", ".join(x["short_sha"] for x in result["skipped"])
        out.write(st.dim(f"{result.get('message')}: {shas}") + "\n")
    for line in notes(result.get("_meta", {}), dense_expected=False):
        out.write(st.warn(line) + "\n")
