"""Catalogue rows -> the JSON shapes of docs/protocol.md (shared by the CLI and the language server)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any


def _rows_by_key(db: sqlite3.Connection, table: str, key: str, values: Iterable[Any]) -> dict[Any, Any]:
    """Catalogue rows (``sqlite3.Row``, read like mappings) by primary key, fetched in chunks of 500."""
    out: dict[Any, Any] = {}
    ordered = sorted(set(values))
    for i in range(0, len(ordered), 500):
        chunk = ordered[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for row in db.execute(f"SELECT * FROM {table} WHERE {key} IN ({marks})", chunk):
            out[row[key]] = row
    return out


def hunk_rows(db: sqlite3.Connection, uids: Iterable[int]) -> dict[int, Any]:
    return _rows_by_key(db, "hunks", "uid", uids)


def commit_rows(db: sqlite3.Connection, shas: Iterable[str]) -> dict[str, Any]:
    return _rows_by_key(db, "commits", "sha", shas)


def iso(ts: int, tz_offset: int) -> str:
    """ISO 8601 in the author's own time zone (dulwich stores the offset in seconds east of UTC)."""
    tz = dt.timezone(dt.timedelta(seconds=tz_offset))
    return dt.datetime.fromtimestamp(ts, tz).isoformat()


def commit_json(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "sha": row["sha"],
        "short_sha": row["sha"][:7],
        "subject": row["subject"],
        "body": row["body"],
        "author": {"name": row["author_name"], "email": row["author_email"]},
        "date": iso(row["author_time"], row["author_tz"]),
        "commit_date": iso(row["commit_time"], row["commit_tz"]),
    }


def hunk_json(row: Mapping[str, Any], lanes: Mapping[str, int] | None = None) -> dict[str, Any]:
    return {
        "path": row["path"],
        "old_path": row["old_path"],
        "change": row["change"],
        "old_start": row["old_start"],
        "old_lines": row["old_lines"],
        "new_start": row["new_start"],
        "new_lines": row["new_lines"],
        "language": row["language"],
        "symbols": [{"name": n, "kind": k, "start": s, "end": e} for n, k, s, e in json.loads(row["symbols"])],
        "excerpt": row["excerpt"],
        "truncated": bool(row["truncated"]),
        "lanes": dict(lanes or {}),
    }


def result(
    commit: Mapping[str, Any],
    hunks: list[Mapping[str, Any]],
    hunk_lanes: Mapping[int, Mapping[str, int]],
    score: float,
    why: dict[str, Any],
    provenance: str = "INFERRED",
) -> dict[str, Any]:
    return {
        "provenance": provenance,
        "score": round(score, 6),
        "commit": commit_json(commit),
        "why": why,
        "hunks": [hunk_json(h, hunk_lanes.get(h["uid"])) for h in hunks],
    }


def relative_age(ts: int, now: float) -> str:
    days = (now - ts) / 86400
    if days < 1:
        hours = int(days * 24)
        return "just now" if hours < 1 else f"{hours}h ago"
    if days < 60:
        return f"{int(days)}d ago"
    if days < 730:
        return f"{int(days / 30)}mo ago"
    return f"{int(days / 365)}y ago"
