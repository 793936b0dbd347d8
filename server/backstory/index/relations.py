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
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from ..history.model import CommitInfo
from .values import read_excerpts

DDL = """
CREATE TABLE IF NOT EXISTS patch_ids (
  sha TEXT PRIMARY KEY, forward INTEGER NOT NULL, inverse INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS patch_ids_forward ON patch_ids(forward);
CREATE INDEX IF NOT EXISTS patch_ids_inverse ON patch_ids(inverse);
CREATE TABLE IF NOT EXISTS commit_refs (sha TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS commit_refs_target ON commit_refs(target);
CREATE INDEX IF NOT EXISTS commit_refs_sha ON commit_refs(sha);
"""
T = TypeVar("T")
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


def patch_ids(files: Iterable[tuple[str, str, list[tuple[str, list[str]]]]]) -> tuple[int, int] | None:
    """(forward, inverse) digests of a patch given as (path, old path, [(ops, changed lines)] per hunk) per
    file; None for an empty patch or one with a capped hunk.

    A digest is the first 64 bits of a SHA-256, as a signed integer (what SQLite stores in 8 bytes; schema 14):
    git/git's 60,000 commits kept theirs as 64-character hex text, 24.7 MB with the two indexes that find a
    patch again, against 11.5 MB now (an index entry of this table without rowids also holds the sha). Two
    different patches share a digest with odds of about n²/2⁶⁵ (10⁻¹⁰ for git/git), and then a commit would be
    called a cherry-pick or revert of the other."""
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

    def digest(parts: list[str]) -> int:
        data = hashlib.sha256("\1".join(sorted(parts)).encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(data[:8], "big", signed=True)

    return digest(forward), digest(inverse)


def record(
    db: sqlite3.Connection, infos: Sequence[CommitInfo], patches: Sequence[tuple[str, tuple[int, int] | None]]
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
            "SELECT f.path, f.old_path, h.ops, f.fid, h.idx, h.truncated FROM files f JOIN hunks h ON h.fid = f.fid"
            " WHERE f.sha=? ORDER BY f.fid, h.uid"  # uid order (see batch_writer.write_batch), without a sort
        )
        rows = db.execute(sql, (sha,)).fetchall()
        try:
            texts = read_excerpts(db, (r[3] for r in rows))
        except ValueError:  # a damaged value: no patch id, as for a capped hunk (the search reports the damage)
            texts = {}
        for path, old_path, ops, fid, idx, cut in rows:
            found = texts.get(fid, [])
            excerpt = found[idx] if idx < len(found) else ""
            truncated = truncated or bool(cut) or idx >= len(found)
            lines = [x[1:] for x in excerpt.split("\n")[1:] if x[:1] in "+-"]
            files.setdefault((path, old_path), []).append((ops, lines))
        ids = None if truncated else patch_ids((p, o, h) for (p, o), h in files.items())
        if ids is not None:
            db.execute("INSERT OR REPLACE INTO patch_ids(sha, forward, inverse) VALUES (?,?,?)", (sha, *ids))
    return len(todo)


def _prefixes(sha: str) -> list[str]:
    return [sha[:n] for n in range(7, len(sha) + 1)]


class _Lookups:
    """The questions :func:`consequences` asks, answered for many commits a few statements at a time (one
    statement per question per commit was ~90 statements, 3-4 ms, for a page of ten results on git/git).
    :meth:`prefetch` loads what the given commits' questions need; anything not prefetched is asked then."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.refs: dict[str, dict[str, set[str]]] = {}  # sha -> kind -> commits naming it (by any prefix)
        self.patches: dict[str, tuple[int, int] | None] = {}
        self.forward: dict[int, set[str]] = {}  # forward patch id -> commits with it

    def prefetch(self, shas: Iterable[str]) -> None:
        todo = sorted({s for s in shas if s not in self.patches})
        if not todo:
            return
        by_target: dict[str, list[tuple[str, str]]] = {}
        for chunk in _chunked(sorted({p for sha in todo for p in _prefixes(sha)})):
            sql = f"SELECT sha, kind, target FROM commit_refs WHERE target IN ({','.join('?' * len(chunk))})"
            for sha, kind, target in self.db.execute(sql, chunk):
                by_target.setdefault(target, []).append((sha, kind))
        for sha in todo:
            kinds = self.refs[sha] = {}
            for prefix in _prefixes(sha):
                for by, kind in by_target.get(prefix, ()):
                    kinds.setdefault(kind, set()).add(by)
            self.patches[sha] = None
        for chunk in _chunked(todo):
            sql = f"SELECT sha, forward, inverse FROM patch_ids WHERE sha IN ({','.join('?' * len(chunk))})"
            for sha, forward, inverse in self.db.execute(sql, chunk):
                self.patches[sha] = (forward, inverse)
        wanted = sorted({i for sha in todo if (p := self.patches[sha]) for i in p} - set(self.forward))
        for value in wanted:
            self.forward[value] = set()
        for ids in _chunked(wanted):
            sql = f"SELECT sha, forward FROM patch_ids WHERE forward IN ({','.join('?' * len(ids))})"
            for sha, forward in self.db.execute(sql, ids):
                self.forward[forward].add(sha)

    def named(self, kind: str, sha: str) -> set[str]:
        self.prefetch([sha])
        return set(self.refs[sha].get(kind, ()))

    def patch(self, sha: str) -> tuple[int, int] | None:
        self.prefetch([sha])
        return self.patches[sha]

    def with_forward(self, value: int) -> set[str]:
        if value not in self.forward:
            self.forward[value] = {r[0] for r in self.db.execute("SELECT sha FROM patch_ids WHERE forward=?", (value,))}
        return set(self.forward[value])

    def reverts_of(self, sha: str) -> set[str]:
        found = self.named("reverts", sha)
        ids = self.patch(sha)
        if ids is not None:
            found |= self.with_forward(ids[1])
        found.discard(sha)
        return found


def _chunked(values: Sequence[T], size: int = 900) -> Iterator[Sequence[T]]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


def _times(db: sqlite3.Connection, shas: Iterable[str]) -> dict[str, int]:
    """Commit times of the indexed ones among ``shas``. `+state`: from five shas on, SQLite preferred walking
    every indexed commit through ``commits_state`` (~4 ms a statement on git/git)."""
    shas = sorted(set(shas))
    out: dict[str, int] = {}
    for chunk in _chunked(shas):
        sql = f"SELECT sha, commit_time FROM commits WHERE +state='indexed' AND sha IN ({','.join('?' * len(chunk))})"
        out.update((r[0], int(r[1])) for r in db.execute(sql, chunk))
    return out


def consequences(db: sqlite3.Connection, shas: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """For each of ``shas``: (kind, later commit) of what happened to it, oldest first. Kinds: ``reverted``,
    ``reapplied`` (a revert of one of its reverts, or its patch again after a revert), ``fixed``,
    ``cherry-picked`` (a later commit with its patch, or naming it in a cherry-pick trailer)."""
    look = _Lookups(db)
    shas = list(dict.fromkeys(shas))
    look.prefetch(shas)
    reverts_of = {sha: look.reverts_of(sha) for sha in shas}
    look.prefetch(r for found in reverts_of.values() for r in found)  # their own reverts: reapplications
    gathered = {}
    for sha in shas:
        reverts = reverts_of[sha]
        reapplied: set[str] = set()
        for r in reverts:
            reapplied |= look.reverts_of(r)
        ids = look.patch(sha)
        same = (look.with_forward(ids[0]) - {sha}) if ids is not None else set()
        picked = (same | look.named("cherry-pick-of", sha)) - {sha}
        fixes = look.named("fixes", sha)
        gathered[sha] = (reverts, reapplied, same, picked, fixes)
    times = _times(db, [s for sha, groups in gathered.items() for s in (sha, *(x for g in groups for x in g))])
    out: dict[str, list[tuple[str, str]]] = {}
    for sha, (reverts, reapplied, same, picked, fixes) in gathered.items():
        mine = times.get(sha)
        if mine is None:
            continue
        if reverts:
            first_revert = min(times.get(r, mine) for r in reverts)
            reapplied |= {s for s in same if times.get(s, 0) > first_revert}
        picked -= reapplied
        groups = (("reverted", reverts), ("reapplied", reapplied), ("fixed", fixes), ("cherry-picked", picked))
        found: list[tuple[str, str]] = []
        for kind, group in groups:
            found += [(kind, s) for s in group if s in times and times[s] >= mine and s != sha]
        rank = {kind: i for i, (kind, _g) in enumerate(groups)}
        found.sort(key=lambda t: (times[t[1]], rank[t[0]], t[1]))
        if found:
            out[sha] = found
    return out


__all__ = ["backfill", "consequences", "patch_ids", "purge", "record", "references"]
