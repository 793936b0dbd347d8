"""Compact text renderings of the tools' JSON for agents that read text content (the JSON is the contract and
travels as structured content beside it): full enough to act on (short shas to pass to ``show_commit``,
provenance, paths and lines, a few diff lines), short enough to keep an agent's context for its work."""

from __future__ import annotations

from typing import Any

EXCERPT_LINES = 4


def _freshness(meta: dict[str, Any]) -> list[str]:
    info = meta.get("index") or {}
    out = []
    if info:
        behind = info.get("commits_behind_head")
        built = "not built yet" if not info.get("indexed_commits") else "the rest of HEAD's history not counted yet"
        state = "up to date" if behind == 0 else (built if behind is None else f"{behind} behind HEAD")
        cover = info.get("dense_coverage")
        dense = f", embeddings {cover:.0%}" if isinstance(cover, (int, float)) and cover < 1 else ""
        dense += f", {info['symbols_pending']:,} changes without symbols yet" if info.get("symbols_pending") else ""
        head = (info.get("head") or "")[:7] or "none"
        out.append(f"index: {info.get('indexed_commits', 0)} commits, HEAD {head}, {state}{dense}")
    out.extend(f"warning: {w}" for w in meta.get("warnings", []))
    if meta.get("hint"):
        out.append(f"hint: {meta['hint']}")
    return out


def _commit(r: dict[str, Any], n: int | None = None) -> list[str]:
    c = r["commit"]
    label = f"{n}. " if n is not None else ("EXACT " if r.get("provenance") == "EXACT" else "")
    line = f"{label}{c['short_sha']} {c['date'][:10]} {c['author']['name']}: {c['subject']}"
    why = r.get("why")
    if why:
        lanes = " ".join(f"{k}#{v}" for k, v in why.get("lanes", {}).items())
        line += f"  (score {r.get('score', 0):.3f}; {lanes or '-'})"
    out = [line]
    for h in r.get("hunks", []):
        where = f"{h['path']}:{h['new_start']}" if h["change"] != "delete" else f"{h['old_path']} (deleted)"
        if h["change"] == "rename" and h.get("old_path") != h["path"]:
            where += f" (renamed from {h['old_path']})"
        syms = ", ".join(s["name"] for s in h.get("symbols", [])[:3])
        out.append(f"   {where}" + (f" [{syms}]" if syms else ""))
        body = [x for x in h.get("excerpt", "").split("\n")[1:] if x.strip()]
        changed = [x for x in body if x[:1] in "+-"] or body
        out.extend(f"     {x[:160]}" for x in changed[:EXCERPT_LINES])
    return out


def _symbol(s: dict[str, Any]) -> str:
    return f"{s['name']} ({s['kind']}, {s['path']}:{s['start']}-{s['end']})"


def search_text(result: dict[str, Any]) -> str:
    """find_prior_art: the exact history (if a position was given), then the related commits."""
    out: list[str] = []
    symbol = result.get("symbol")
    if "exact" in result:
        out.append(f"Prior art for {_symbol(symbol)}" if symbol else "Prior art near the given line (no symbol)")
    else:
        query = result.get("query", "")
        out.append(f"Prior art for: {query[:200]}{'…' if len(query) > 200 else ''}")
    out.extend(_freshness(result.get("_meta", {})))
    exact = result.get("exact") or []
    if exact:
        out.append("")
        out.append(
            f"EXACT history of {symbol['name'] if symbol else 'the symbol'} ({len(exact)} commits, newest first):"
        )
        for r in exact:
            out.extend(_commit(r))
    results = result.get("results") or []
    out.append("")
    if results:
        out.append("Related commits (INFERRED, best first):" if exact or symbol else "Commits (INFERRED, best first):")
        for i, r in enumerate(results, 1):
            out.extend(_commit(r, i))
        out.append("")
        out.append("Next: show_commit(revision=<sha>) for a full diff; symbol_history(path, line) for a definition.")
    elif not exact:
        out.append("No matching commits.")
    return "\n".join(out) + "\n"


def history_text(result: dict[str, Any]) -> str:
    """symbol_history: every commit that changed the definition, newest first."""
    symbol = result.get("symbol")
    out: list[str] = []
    if symbol is None:
        out.append(result.get("message") or "no enclosing symbol")
        out.extend(_freshness(result.get("_meta", {})))
        return "\n".join(out) + "\n"
    out.append(f"EXACT history of {_symbol(symbol)} — like git log -L, newest first")
    out.extend(_freshness(result.get("_meta", {})))
    out.append("")
    for r in result["commits"]:
        out.extend(_commit(r))
    if not result["commits"]:
        out.append("No indexed commit changed it.")
    return "\n".join(out) + "\n"


def status_text(status: dict[str, Any]) -> str:
    """index_status: what is indexed, how fresh, and what the background indexer is doing."""
    ix = status.get("index") or {}
    server = status.get("server") or {}
    out = [f"repository: {status.get('repo')}"]
    out.append(
        f"indexer: {server.get('state', 'unknown')}" + (f" — {server['message']}" if server.get("message") else "")
    )
    head = ix.get("head")
    out.append(f"HEAD: {head or 'none (no commits)'}")
    behind = ix.get("commits_behind_head")
    out.append(
        f"indexed commits: {ix.get('indexed_commits', 0)}; behind HEAD: {'unknown' if behind is None else behind}"
    )
    if ix.get("last_indexed_commit"):
        out.append(f"last indexed: {ix['last_indexed_commit'][:12]} at {ix.get('indexed_at')}")
    if "dense_coverage" in ix:
        pending = status.get("pending_units")
        tail = f" ({pending:,} file units to embed)" if pending else ""
        out.append(f"embeddings: {ix['dense_coverage']:.1%} of file units{tail}")
    if "hunks" in status:
        out.append(
            f"hunks / files: {status['hunks']:,} / {status['files']:,}; size {status['size_bytes'] / 1e6:.1f} MB"
        )
    if status.get("hint"):
        out.append(f"hint: {status['hint']}")
    return "\n".join(out) + "\n"
