"""Catalogue rows -> the JSON shapes of docs/protocol.md (commits, hunks, results), shared by every view; and a
search's ranked candidates -> its results (twins folded, reverted commits hidden on request, the ``why``)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..index.catalog import Catalog
    from .second_stage import Ranked

_UTC = dt.timezone.utc
FIRST = dt.datetime(1, 1, 1, tzinfo=_UTC)
LAST = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=_UTC)
_FIRST_TS, _LAST_TS = int(FIRST.timestamp()), int(LAST.timestamp())


def iso(ts: int, tz_offset: int) -> str:
    """ISO 8601 in the author's own time zone (dulwich stores the offset in seconds east of UTC).

    Git stores what ISO 8601 (and Python's datetime) cannot hold: an offset of ±24 h or more is given in UTC
    (the instant stays right), and a time outside the years 1-9999 as the nearest one inside them, so every
    reader can parse the value back."""
    if not -86400 < tz_offset < 86400:
        tz_offset = 0
    if ts > _LAST_TS or ts + tz_offset > _LAST_TS:
        return LAST.isoformat()
    if ts < _FIRST_TS or ts + tz_offset < _FIRST_TS:
        return FIRST.isoformat()
    return dt.datetime.fromtimestamp(ts, dt.timezone(dt.timedelta(seconds=tz_offset))).isoformat()


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


def collapse_twins(order: Sequence[str], signature: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """``order`` with identical changes (same :meth:`Catalog.change_signatures` digest: cherry-picks,
    backports) shown once, at the best-ranked one's place, each with the shas of its twins, in rank order."""
    first: dict[str, int] = {}
    out: list[tuple[str, list[str]]] = []
    for sha in order:
        digest = signature.get(sha)
        if digest is not None and digest in first:
            out[first[digest]][1].append(sha)
            continue
        if digest is not None:
            first[digest] = len(out)
        out.append((sha, []))
    return out


def consequences_json(catalog: Catalog, shas: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """What became of each commit (docs/protocol.md, "Consequences"): ``{"kind", "by": {commit},
    "after_days"}``, oldest first; commits with none are left out."""
    found = catalog.consequences(shas)
    rows = catalog.commit_rows({s for items in found.values() for _k, s in items} | set(found))
    return {
        sha: [
            {
                "kind": kind,
                "by": commit_json(rows[by]),
                "after_days": round(max(0, rows[by]["commit_time"] - rows[sha]["commit_time"]) / 86400, 1),
            }
            for kind, by in items
            if by in rows and sha in rows
        ]
        for sha, items in found.items()
    }


def attach_consequences(hits: list[dict[str, Any]], catalog: Catalog) -> None:
    """Set ``consequences`` on each hit (``[]`` when nothing is known to have happened to its commit)."""
    found = consequences_json(catalog, [h["commit"]["sha"] for h in hits])
    for h in hits:
        h["consequences"] = found.get(h["commit"]["sha"], [])


def stands_reverted(kinds: Sequence[str]) -> bool:
    """Whether the last of a commit's reverts and re-applications (in time order) is a revert."""
    last = [k for k in kinds if k in ("reverted", "reapplied")]
    return bool(last) and last[-1] == "reverted"


def search_results(catalog: Catalog, ranked: Ranked, k: int, hide_reverted: bool) -> list[dict[str, Any]]:
    """The best ``k`` of ``ranked`` as results: identical changes shown once (:func:`collapse_twins`), commits
    that stand reverted left out with ``hide_reverted``, each with its matched hunks, its ``why`` and what
    became of it (:func:`attach_consequences`)."""
    commits, final = ranked.commits, ranked.final
    by_sha = {c.sha: c for c in ranked.top}
    sizes = Counter(commits[sha]["n_hunks"] for sha in by_sha)  # twins have as many hunks: digest only those
    maybe_twins = [sha for sha in by_sha if commits[sha]["n_hunks"] and sizes[commits[sha]["n_hunks"]] > 1]
    shas = collapse_twins([sha for _s, sha, _f in final], catalog.change_signatures(maybe_twins))
    if hide_reverted:
        fates = catalog.consequences([sha for sha, _twins in shas])
        shas = [t for t in shas if not stands_reverted([kind for kind, _by in fates.get(t[0], [])])]
    shown = shas[:k]
    score_of = {sha: score for score, sha, _f in final}
    hunk_rows = catalog.hunk_rows([u for sha, _twins in shown for u in by_sha[sha].hunks])
    twin_rows = catalog.commit_rows([t for _sha, twins in shown for t in twins])
    out = []
    for sha, twins in shown:
        c = by_sha[sha]
        why = {
            "lanes": c.lanes,
            "fused": round(c.fused, 6),
            "rerank": ranked.rerank.get(sha),
            "learned": ranked.learned.get(sha),
            "recency": round(ranked.factors[sha], 4),
            "decided_by": ranked.decided.get(sha, []),
        }
        hit = result(commits[sha], [hunk_rows[u] for u in c.hunks], c.hunk_lanes, score_of[sha], why)
        hit["twins"] = [commit_json(twin_rows[t]) for t in twins]
        out.append(hit)
    attach_consequences(out, catalog)
    return out
