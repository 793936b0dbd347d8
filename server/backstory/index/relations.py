"""What became of a commit, from exact provenance only: reverted, fixed, cherry-picked, re-applied.

Written by the history phase, incrementally, with each batch of commits:

- ``commit_refs``: the commits a message names, by rule: ``This reverts commit <sha>`` (reverts), ``(cherry
  picked from commit <sha>)`` (cherry-pick-of), ``Fixes: <sha>`` / "fixes <sha>" / "regression from <sha>"
  (fixes). The target is kept as written (an abbreviated sha) and matched by prefix when read, so the order in
  which commits are indexed (newest first) does not matter.
- ``patch_ids``: a digest of each commit's patch (paths and changed lines per hunk, whitespace ignored, no line
  numbers) and of its exact inverse, so a later commit whose patch is the inverse is a revert and one with the
  same patch is a cherry-pick or backport, whatever their messages say. A commit with a hunk whose changed text
  the indexer capped has no patch id (too large to compare exactly).

Read with :func:`consequences` (through ``Catalog.consequences``): the later commits and what they did.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterable, Sequence

from ..history.model import CommitInfo

DDL = """
CREATE TABLE IF NOT EXISTS patch_ids (sha TEXT PRIMARY KEY, forward TEXT NOT NULL, inverse TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS patch_ids_forward ON patch_ids(forward);
CREATE INDEX IF NOT EXISTS patch_ids_inverse ON patch_ids(inverse);
CREATE TABLE IF NOT EXISTS commit_refs (sha TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS commit_refs_target ON commit_refs(target);
CREATE INDEX IF NOT EXISTS commit_refs_sha ON commit_refs(sha);
"""
VERSION = "1"  # state key "relations": the version whose rows every indexed commit has

_SHA = r"([0-9a-f]{7,40})\b"
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("reverts", re.compile(r"\bThis reverts commit " + _SHA, re.I)),
    ("cherry-pick-of", re.compile(r"\(cherry[- ]picked from commit " + _SHA, re.I)),
    ("fixes", re.compile(r"^\s*Fixes:\s*(?:commit\s+)?" + _SHA, re.I | re.M)),
    ("fixes", re.compile(r"\bfix(?:es|ed)?\s+(?:commit\s+)?" + _SHA, re.I)),
    ("fixes", re.compile(r"\bregression\s+(?:from|in|introduced\s+(?:in|by))\s+(?:commit\s+)?" + _SHA, re.I)),
)


def ensure(db: sqlite3.Connection) -> None:
    """Create the tables (outside any transaction: ``executescript`` commits first)."""
    db.executescript(DDL)


def references(subject: str, body: str) -> list[tuple[str, str]]:
    """(kind, sha prefix) the message names, each once, in rule order."""
    text = f"{subject}\n{body}"
    out: dict[tuple[str, str], None] = {}
    for kind, rule in RULES:
        for m in rule.finditer(text):
            out.setdefault((kind, m.group(1).lower()), None)
    return list(out)


def _norm(line: str) -> str:
    return "".join(line.split())


def _blocks(ops: str, lines: list[str]) -> list[tuple[list[str], list[str]]] | None:
    """(removed, added) lines per change block from a hunk's run-length ops and its changed lines in order;
    None when the lines do not cover the ops (the indexer capped them)."""
    runs = [(int(n), op) for n, op in re.findall(r"(\d+)([=+-])", ops)]
    need = sum(n for n, op in runs if op != "=")
    if need != len(lines):
        return None
    out: list[tuple[list[str], list[str]]] = []
    pos = 0
    current: tuple[list[str], list[str]] | None = None
    for n, op in runs:
        if op == "=":
            current = None
            continue
        if current is None:
            current = ([], [])
            out.append(current)
        (current[0] if op == "-" else current[1]).extend(_norm(x) for x in lines[pos : pos + n])
        pos += n
    return out


def patch_ids(files: Iterable[tuple[str, str, list[tuple[str, list[str]]]]]) -> tuple[str, str] | None:
    """(forward, inverse) digests of a patch given as (path, old path, [(ops, changed lines)] per hunk) per
    file; None for an empty patch or one with a capped hunk."""
    forward: list[str] = []
    inverse: list[str] = []
    for path, old_path, hunks in files:
        fwd = [path]
        inv = [old_path]
        for ops, lines in hunks:
            blocks = _blocks(ops, lines)
            if blocks is None:
                return None
            for removed, added in blocks:
                fwd.append("-" + "\n-".join(removed) + "\n+" + "\n+".join(added))
                inv.append("-" + "\n-".join(added) + "\n+" + "\n+".join(removed))
        forward.append("\0".join(fwd))
        inverse.append("\0".join(inv))
    if not forward:
        return None

    def digest(parts: list[str]) -> str:
        return hashlib.sha256("\1".join(sorted(parts)).encode("utf-8", "surrogatepass")).hexdigest()

    return digest(forward), digest(inverse)


def record(
    db: sqlite3.Connection, infos: Sequence[CommitInfo], patches: Sequence[tuple[str, tuple[str, str] | None]]
) -> None:
    """The relation rows of a batch (inside the transaction that marks it indexed; :func:`ensure` ran):
    references from the messages of ``infos``, and ``patches``, (sha, :func:`patch_ids`) per non-merge commit."""
    shas = [c.sha for c in infos]
    purge(db, shas)  # a batch redone after a crash
    db.executemany(
        "INSERT INTO commit_refs(sha, kind, target) VALUES (?,?,?)",
        [(c.sha, kind, target) for c in infos for kind, target in references(c.subject, c.body)],
    )
    rows = [(sha, *ids) for sha, ids in patches if ids is not None]
    db.executemany("INSERT OR REPLACE INTO patch_ids(sha, forward, inverse) VALUES (?,?,?)", rows)


def purge(db: sqlite3.Connection, shas: Sequence[str]) -> None:
    db.executemany("DELETE FROM commit_refs WHERE sha=?", [(sha,) for sha in shas])
    db.executemany("DELETE FROM patch_ids WHERE sha=?", [(sha,) for sha in shas])


def backfill(db: sqlite3.Connection) -> int:
    """Relation rows for commits indexed before this table existed, from the catalogue (messages; patches from
    hunk excerpts, so a commit with a truncated excerpt gets no patch id). Returns how many commits it read."""
    todo = [
        r[0]
        for r in db.execute(
            "SELECT sha FROM commits WHERE state='indexed' AND sha NOT IN (SELECT DISTINCT sha FROM commit_refs)"
            " AND sha NOT IN (SELECT sha FROM patch_ids)"
        )
    ]
    for sha in todo:
        subject, body = db.execute("SELECT subject, body FROM commits WHERE sha=?", (sha,)).fetchone()
        db.executemany(
            "INSERT INTO commit_refs(sha, kind, target) VALUES (?,?,?)",
            [(sha, kind, target) for kind, target in references(subject, body)],
        )
        files: dict[tuple[str, str], list[tuple[str, list[str]]]] = {}
        truncated = False
        sql = (
            "SELECT f.path, f.old_path, h.ops, h.excerpt, h.truncated FROM files f JOIN hunks h ON h.fid = f.fid"
            " WHERE f.sha=? ORDER BY f.fid, h.uid"  # uid order (see build._write_batch), without a sort
        )
        for path, old_path, ops, excerpt, cut in db.execute(sql, (sha,)):
            truncated = truncated or bool(cut)
            lines = [x[1:] for x in excerpt.split("\n")[1:] if x[:1] in "+-"]
            files.setdefault((path, old_path), []).append((ops, lines))
        ids = None if truncated else patch_ids((p, o, h) for (p, o), h in files.items())
        if ids is not None:
            db.execute("INSERT OR REPLACE INTO patch_ids(sha, forward, inverse) VALUES (?,?,?)", (sha, *ids))
    return len(todo)


def _prefixes(sha: str) -> list[str]:
    return [sha[:n] for n in range(7, len(sha) + 1)]


def _named(db: sqlite3.Connection, kind: str, sha: str) -> set[str]:
    marks = ",".join("?" * (len(sha) - 6))
    sql = f"SELECT sha FROM commit_refs WHERE kind=? AND target IN ({marks})"
    return {r[0] for r in db.execute(sql, (kind, *_prefixes(sha)))}


def _patch(db: sqlite3.Connection, sha: str) -> tuple[str, str] | None:
    row = db.execute("SELECT forward, inverse FROM patch_ids WHERE sha=?", (sha,)).fetchone()
    return None if row is None else (row[0], row[1])


def _with(db: sqlite3.Connection, column: str, value: str) -> set[str]:
    return {r[0] for r in db.execute(f"SELECT sha FROM patch_ids WHERE {column}=?", (value,))}


def _times(db: sqlite3.Connection, shas: Iterable[str]) -> dict[str, int]:
    shas = sorted(set(shas))
    if not shas:
        return {}
    marks = ",".join("?" * len(shas))
    sql = f"SELECT sha, commit_time FROM commits WHERE state='indexed' AND sha IN ({marks})"
    return {r[0]: int(r[1]) for r in db.execute(sql, shas)}


def _reverts_of(db: sqlite3.Connection, sha: str) -> set[str]:
    found = _named(db, "reverts", sha)
    ids = _patch(db, sha)
    if ids is not None:
        found |= _with(db, "forward", ids[1])
    found.discard(sha)
    return found


def consequences(db: sqlite3.Connection, shas: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """For each of ``shas``: (kind, later commit) of what happened to it, oldest first. Kinds: ``reverted``,
    ``reapplied`` (a revert of one of its reverts, or its patch again after a revert), ``fixed``,
    ``cherry-picked`` (a later commit with its patch, or naming it in a cherry-pick trailer)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for sha in dict.fromkeys(shas):
        found: list[tuple[str, str]] = []
        reverts = _reverts_of(db, sha)
        reapplied: set[str] = set()
        for r in reverts:
            reapplied |= _reverts_of(db, r)
        ids = _patch(db, sha)
        same = (_with(db, "forward", ids[0]) - {sha}) if ids is not None else set()
        picked = (same | _named(db, "cherry-pick-of", sha)) - {sha}
        times = _times(db, [sha, *reverts, *reapplied, *same, *picked, *_named(db, "fixes", sha)])
        mine = times.get(sha)
        if mine is None:
            continue
        if reverts:
            first_revert = min(times.get(r, mine) for r in reverts)
            reapplied |= {s for s in same if times.get(s, 0) > first_revert}
        picked -= reapplied
        fixes = _named(db, "fixes", sha)
        groups = (("reverted", reverts), ("reapplied", reapplied), ("fixed", fixes), ("cherry-picked", picked))
        for kind, group in groups:
            found += [(kind, s) for s in group if s in times and times[s] >= mine and s != sha]
        rank = {kind: i for i, (kind, _g) in enumerate(groups)}
        found.sort(key=lambda t: (times[t[1]], rank[t[0]], t[1]))
        if found:
            out[sha] = found
    return out


__all__ = ["backfill", "consequences", "patch_ids", "purge", "record", "references"]
