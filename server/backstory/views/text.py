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


# -- status -----------------------------------------------------------------------------------------------------


def size(n: int | float | None) -> str:
    """Bytes in words: ``12.3 MB``."""
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def _when(iso: str | None, now: float) -> str:
    if not iso:
        return ""
    try:
        stamp = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    local = stamp.astimezone().strftime("%Y-%m-%d %H:%M")
    return f"{local} ({relative_age(int(stamp.timestamp()), now)})"


def _built_with(options: dict[str, Any], dense: dict[str, Any] | None) -> str:
    parts = ["commit messages" if not options.get("no_messages") else "no commit messages"]
    parts.append("symbols" if options.get("symbols", True) else "no symbols")
    if options.get("max_file_bytes"):
        parts.append(f"files up to {size(options['max_file_bytes'])}")
    if dense:
        parts.append(f"model {dense.get('model_id', '?') if isinstance(dense, dict) else dense}")
    return ", ".join(parts)


def _largest_tables(tables: dict[str, dict[str, int]], shown: int = 4) -> str:
    """``hunks 37.0 MB (indexes 4.1 MB), files 12.3 MB, ...``: the largest catalogue tables, the rest summed."""
    totals = sorted(((sum(v.values()), name, v.get("indexes", 0)) for name, v in tables.items()), reverse=True)
    parts = [f"{name} {size(total)}" + (f" (indexes {size(ix)})" if ix else "") for total, name, ix in totals[:shown]]
    rest = totals[shown:]
    if rest:
        parts.append(f"{len(rest)} more {size(sum(t[0] for t in rest))}")
    return ", ".join(parts)


def status_lines(status: dict[str, Any], now: float | None = None) -> list[tuple[str, str]]:
    """``status`` as (label, text) rows: the same facts ``--json`` gives."""
    now = time.time() if now is None else now
    ix = status.get("index", {})
    rows: list[tuple[str, str]] = [("repository", status["repo"])]
    head = ix.get("head")
    rows.append(("HEAD", head[:12] if head else "none (no commits yet)"))
    if "pending" not in status:
        writer = ix.get("indexer_pid")
        if writer is not None:
            rows.append(("index", f"being built now at {ix.get('path')}"))
        elif ix.get("path"):
            rows.append(("index", f"not built yet ({ix['path']})"))
        else:
            rows.append(("index", "none"))
    else:
        pending = status["pending"]
        disk = status.get("disk", {})
        rows.append(("index", f"{ix.get('path')} ({size(status.get('size_bytes'))})"))
        behind = ix.get("commits_behind_head")
        history = f"{ix.get('indexed_commits', 0):,} commits indexed"
        history += ", up to date with HEAD" if behind == 0 else f", {behind:,} behind HEAD" if behind else ""
        history += (
            ", the rest of HEAD's history not counted yet" if behind is None and ix.get("indexed_commits") else ""
        )
        rows.append(("history", history))
        last, when = ix.get("last_indexed_commit"), ix.get("indexed_at")
        if last:
            rows.append(("last indexed", f"{last[:12]}" + (f", run finished {_when(when, now)}" if when else "")))
        if pending.get("interrupted"):
            rows.append(("interrupted", f"{pending['interrupted']:,} commits half-written by a stopped run (redone)"))
        rows.append(("hunks / files", f"{status.get('hunks', 0):,} hunks in {status.get('files', 0):,} file changes"))
        if pending.get("symbols"):
            rows.append(("symbols", f"{pending['symbols']:,} file changes without symbols yet (symbol lanes)"))
        if pending.get("message_index"):
            rows.append(
                (
                    "message index",
                    f"{pending['message_index']:,} commits' messages not searchable yet (the message lane's index)",
                )
            )
        if pending.get("texts"):
            rows.append(
                ("commit texts", f"{pending['texts']:,} commits' texts to store or check (searches are slower)")
            )
        if pending.get("merges"):
            unreadable = pending.get("unreadable_merges") or 0
            rows.append(
                (
                    "merge diffs",
                    f"{pending['merges']:,} merges not diffed yet (exact history)"
                    + (f", {unreadable:,} of them unreadable in git" if unreadable else ""),
                )
            )
        units = status.get("files", 0)
        embedded = status.get("embedded_files", units - pending.get("dense", 0))
        emb = f"{embedded:,} of {units:,} file changes ({embedded / units:.0%})" if units else "nothing to embed"
        if pending.get("dense"):
            emb += f"; {pending['dense']:,} pending"
        rows.append(("embeddings", emb))
        parts = [
            f"catalogue {size(disk.get('catalogue'))}"
            + (f" (of which rerank states {size(disk['rerank_states'])})" if disk.get("rerank_states") else ""),
            f"keyword index {size(disk.get('keyword_index'))}",
            f"vectors {size(disk.get('vectors'))}",
        ]
        rows.append(("disk", ", ".join(parts)))
        if status.get("catalogue_tables"):
            rows.append(("catalogue", _largest_tables(status["catalogue_tables"])))
        rows.append(("built with", _built_with(status.get("options", {}), status.get("dense"))))
        if status.get("skipped_files"):
            skipped = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in status["skipped_files"].items())
            rows.append(("skipped files", f"{skipped} (left out on purpose)"))
    cache = status.get("model_cache")
    if cache:
        rows.append(("model cache", f"{size(cache['bytes'])} in {cache['dir']}"))
    if status.get("hint"):
        rows.append(("hint", status["hint"]))
    if status.get("next"):
        rows.append(("next", status["next"]))
    return rows


def print_status(status: dict[str, Any], out: TextIO, *, color: bool = False) -> None:
    st = Style(color)
    rows = status_lines(status)
    width = max(len(label) for label, _ in rows) + 2
    for label, text in rows:
        shown = st.subject(text) if label == "next" else text
        out.write(f"{st.dim((label + ':').ljust(width))}{shown}\n")
    cache = status.get("model_cache")
    if cache and cache.get("superseded"):
        out.write(
            f"  {size(cache['superseded_bytes'])} of the model cache hold earlier versions of backstory's model, which"
            " this version no longer reads; delete these folders unless another installed backstory uses them:\n"
        )
        out.writelines(f"    {entry['path']}\n" for entry in cache["superseded"])


def unreadable_merges_note(n: int) -> str:
    """What `backstory index` and the language server say about merges git could not read: the same words."""
    merges = "1 merge" if n == 1 else f"{n:,} merges"
    return (
        f"{merges} could not be read from git (a missing object: `git fsck` says which); symbol history through"
        " them stays partial until git can read them, and every `backstory index` tries again"
    )
