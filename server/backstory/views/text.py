"""Human-readable terminal rendering of the JSON results (the JSON itself is the contract; this is a view)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, TextIO

from .consequences import consequence_line


def _age(date: str) -> str:
    from .age import relative_age

    return relative_age(int(dt.datetime.fromisoformat(date).timestamp()), time.time())


def _why(why: dict[str, Any]) -> str:
    lanes = ", ".join(f"{k}#{v}" for k, v in why.get("lanes", {}).items())
    parts = [lanes or "-"]
    if why.get("rerank") is not None:
        parts.append(f"rerank {why['rerank']:.3f}")
    if why.get("learned") is not None:
        parts.append(f"learned {why['learned']:.3f}")
    return "; ".join(parts)


def _hunk_line(h: dict[str, Any]) -> str:
    loc = f"{h['path']}:{h['new_start']}" if h["change"] != "delete" else f"{h['old_path']} (deleted)"
    syms = ", ".join(s["name"] for s in h.get("symbols", [])[:3])
    return f"    {loc}" + (f"  [{syms}]" if syms else "")


def _commit_block(r: dict[str, Any], out: TextIO, excerpt_lines: int = 6) -> None:
    c = r["commit"]
    tag = "EXACT " if r.get("provenance") == "EXACT" else ""
    out.write(f"{tag}{c['short_sha']}  {c['subject']}\n")
    out.write(f"    {c['author']['name']}, {_age(c['date'])}  ({c['date'][:10]})")
    if "why" in r:
        out.write(f"  why: {_why(r['why'])}")
    out.write("\n")
    if r.get("consequences"):
        out.write(f"    {consequence_line(r['consequences'])}\n")
    for h in r.get("hunks", []):
        out.write(_hunk_line(h) + "\n")
        for line in h["excerpt"].split("\n")[1 : 1 + excerpt_lines]:
            out.write(f"      {line}\n")
    out.write("\n")


def _meta_footer(meta: dict[str, Any], out: TextIO) -> None:
    for w in meta.get("warnings", []):
        out.write(f"warning: {w}\n")
    if meta.get("hint"):
        out.write(f"hint: {meta['hint']}\n")


def print_results(result: dict[str, Any], out: TextIO) -> None:
    if result.get("symbol"):
        s = result["symbol"]
        out.write(f"Symbol {s['name']} ({s['kind']}, {s['path']}:{s['start']}-{s['end']})\n\n")
    for r in result.get("exact", []):
        _commit_block(r, out)
    if result.get("results"):
        if result.get("exact"):
            out.write("Related elsewhere:\n\n")
        for r in result["results"]:
            _commit_block(r, out)
    elif not result.get("exact"):
        out.write("no matching commits\n")
    _meta_footer(result.get("_meta", {}), out)


def print_history(result: dict[str, Any], out: TextIO) -> None:
    if result.get("symbol") is None:
        out.write(f"{result.get('message') or 'no enclosing symbol'}\n")
        return
    s = result["symbol"]
    out.write(f"History of {s['name']} ({s['kind']}, {s['path']}:{s['start']}-{s['end']})\n\n")
    for r in result["commits"]:
        _commit_block(r, out, excerpt_lines=8)
    if not result["commits"]:
        out.write("no indexed commit changed it\n")
    _meta_footer(result.get("_meta", {}), out)


def print_status(status: dict[str, Any], out: TextIO) -> None:
    ix = status.get("index", {})
    out.write(f"repository:        {status['repo']}\n")

    def shown(value: Any, missing: str = "none yet") -> str:
        return missing if value is None else str(value)

    out.write(f"index:             {shown(ix.get('path'), 'not built yet (run `backstory index`)')}\n")
    out.write(f"HEAD:              {shown(ix.get('head'), 'none (no commits)')}\n")
    out.write(f"indexed commits:   {shown(ix.get('indexed_commits'), '0')}\n")
    out.write(f"behind HEAD:       {shown(ix.get('commits_behind_head'), 'unknown')}\n")
    last, when = ix.get("last_indexed_commit"), ix.get("indexed_at")
    out.write(f"last indexed:      {f'{last} at {when}' if last else 'nothing yet'}\n")
    if "hunks" in status:
        out.write(f"hunks / files:     {status['hunks']} / {status['files']}\n")
        out.write(f"dense coverage:    {ix.get('dense_coverage', 0.0):.1%}\n")
        out.write(f"index size:        {status['size_bytes'] / 1e6:.1f} MB\n")
        if status.get("states_bytes"):
            out.write(f"rerank states:     {status['states_bytes'] / 1e6:.1f} MB (inside the catalogue)\n")
        out.write(f"build options:     {status['options']}\n")
        if status.get("dense"):
            out.write(f"dense model:       {status['dense']}\n")
        if status.get("skipped_files"):
            out.write(f"skipped files:     {status['skipped_files']}\n")
    cache = status.get("model_cache")
    if cache:
        out.write(f"model cache:       {cache['bytes'] / 1e6:.1f} MB in {cache['dir']}\n")
        if cache["superseded"]:
            out.write(
                f"  {cache['superseded_bytes'] / 1e6:.1f} MB of it hold earlier versions of backstory's model, which"
                " this version no longer reads; delete these folders unless another installed backstory uses them:\n"
            )
            out.writelines(f"    {entry['path']}\n" for entry in cache["superseded"])
    if status.get("hint"):
        out.write(f"hint: {status['hint']}\n")
