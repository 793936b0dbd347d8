"""Terminal rendering of ``backstory status`` (its JSON is the contract; this is a view of it), and the sentences
the CLI and the language server share about the index's state.

Its own module because status reports the index (sizes, pending phases, the model cache), where
:mod:`.text` renders search and history results; they share only :class:`~.text.Style`.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, TextIO

from .age import relative_age
from .text import Style


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
