"""What the catalogue holds and what is still pending, counted: the questions ``status``, progress reports and the
freshness of every answer ask. Apart from :mod:`.catalog`'s reads of rows so that each stays readable; a
:class:`~.catalog.Catalog` answers both (and turns a damaged page met by either into a named error).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from . import commit_terms, integrity, unit_states

#: the state key holding the merges the last complete run could not read, a JSON list of shas (`build`)
UNREADABLE_MERGES = "unreadable_merges"


class Counts:
    """The counting half of :class:`~.catalog.Catalog` (which provides ``_db``)."""

    @property
    def _db(self) -> sqlite3.Connection:
        raise NotImplementedError

    # -- commits and merges -------------------------------------------------------------------------------------

    def pending_commits(self) -> int:
        """Commits a killed run left half-written (``pending``): the next run redoes them."""
        return int(self._db.execute("SELECT COUNT(*) FROM commits WHERE state='pending'").fetchone()[0])

    def pending_merge_diffs(self) -> int:
        """Merges whose paths or diffs against their parents are not stored yet (`merge_diffs`)."""
        unlisted = self._db.execute("SELECT COUNT(*) FROM merges_unlisted").fetchone()[0]
        undiffed = self._db.execute("SELECT COUNT(DISTINCT sha) FROM merge_paths WHERE ops IS NULL").fetchone()[0]
        return int(unlisted) + int(undiffed)

    def unlisted_merges(self) -> list[str]:
        """Merges whose paths are not listed yet; after a complete merges phase, those git could not read."""
        return [r[0] for r in self._db.execute("SELECT sha FROM merges_unlisted ORDER BY sha")]

    def unreadable_merges(self) -> int:
        """Merges the last complete run could not read from git (a missing object, recorded by sha) that are
        still unlisted: a later run that read them listed them, a purge took them away."""
        sql = (
            f"SELECT COUNT(*) FROM merges_unlisted WHERE sha IN (SELECT value FROM json_each(("
            f"SELECT value FROM state WHERE key='{UNREADABLE_MERGES}' AND json_valid(value))))"
        )
        return int(self._db.execute(sql).fetchone()[0])

    def pending_symbol_files(self) -> int:
        """Files the symbols phase has not attached definitions to yet (see symbols_phase.py)."""
        return int(self._db.execute("SELECT COUNT(*) FROM files WHERE parsed=-1").fetchone()[0])

    def skipped_totals(self) -> dict[str, int]:
        """Files left out on purpose, summed over commits by reason."""
        totals: dict[str, int] = {}
        for (raw,) in self._db.execute("SELECT skipped FROM commits WHERE skipped<>'{}'"):
            for k, v in json.loads(raw).items():
                totals[k] = totals.get(k, 0) + v
        return dict(sorted(totals.items()))

    # -- files, hunks and units ------------------------------------------------------------------------------

    def hunk_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM hunks").fetchone()[0])

    def unit_count(self) -> int:
        """File units the dense phase embeds (skipped ones, ``embedded < 0``, left out)."""
        return int(self._db.execute("SELECT COUNT(*) FROM files WHERE embedded>=0").fetchone()[0])

    def pending_units(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM files WHERE embedded=0").fetchone()[0])

    def embedded_count(self) -> int:
        """File units the catalogue says are in the vector file."""
        return int(self._db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0])

    def vectors_problem(self, path: Path, trusted: set[Any] | None = None) -> integrity.Problem | None:
        """Why the vector file cannot serve the units the catalogue says it holds (missing, damaged), or None."""
        return integrity.vectors_problem(self._db, path, self.embedded_count(), trusted)

    def quick_check(self) -> integrity.Problem | None:
        """SQLite's own check of every page (``PRAGMA quick_check``): ~0.5 s per 100 MB of catalogue."""
        return integrity.catalogue_problem(self._db)

    def table_sizes(self) -> dict[str, dict[str, int]] | None:
        """Bytes of catalogue pages per table, its indexes apart: ``{table: {"table": b, "indexes": b}}``,
        largest first (free pages are in no table). Reads every page, like :meth:`quick_check`. None where this
        SQLite lacks the ``dbstat`` table (built without SQLITE_ENABLE_DBSTAT_VTAB): unknown, not zero."""
        owner = dict(self._db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type='index'").fetchall())
        try:
            rows = self._db.execute("SELECT name, pgsize FROM dbstat WHERE aggregate=TRUE").fetchall()
        except sqlite3.OperationalError:
            return None
        sizes: dict[str, dict[str, int]] = {}
        for name, pgsize in rows:
            entry = sizes.setdefault(owner.get(name, name), {"table": 0, "indexes": 0})
            entry["indexes" if name in owner else "table"] += int(pgsize or 0)
        return dict(sorted(sizes.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])))

    def indexed_hunks(self) -> tuple[int, int]:
        """(hunks of indexed commits, commits pending): what the Tantivy index must hold at least / may hold more."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(CASE WHEN state='indexed' THEN n_hunks END), 0),"
            " SUM(CASE WHEN state<>'indexed' THEN 1 ELSE 0 END) FROM commits"
        ).fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def dense_coverage(self) -> float:
        """Share of file units embedded, to four places."""
        row = self._db.execute(
            "SELECT COUNT(*), SUM(CASE WHEN embedded=1 THEN 1 ELSE 0 END) FROM files WHERE embedded>=0"
        ).fetchone()
        total, done = row[0] or 0, row[1] or 0
        return round(done / total, 4) if total else 0.0

    # -- stored commit texts and token states ----------------------------------------------------------------

    def commit_texts_stored(self) -> bool:
        """Whether every indexed commit has its analysed text stored, as this version keeps it (a long run stores
        its commits' after its symbols phase, `texts_phase`; an index built before those rows lacks
        them until an indexing run stores them)."""
        return self._commit_texts_current() and not self._commit_texts_deferred()

    def _commit_texts_current(self) -> bool:
        row = self._db.execute("SELECT value FROM state WHERE key=?", (commit_terms.STATE,)).fetchone()
        return row is not None and row[0] == commit_terms.VERSION

    def _commit_texts_deferred(self) -> bool:
        row = self._db.execute("SELECT value FROM state WHERE key=?", (commit_terms.DEFERRED,)).fetchone()
        return row is not None and row[0] == "1"

    def _missing_commit_texts(self) -> int:
        return int(self._db.execute(f"SELECT COUNT(*) {commit_terms.MISSING}").fetchone()[0])

    def pending_commit_texts(self) -> int:
        """Indexed commits whose analysed text the next run stores or checks: those without a row while every
        stored row is current, else every indexed commit with hunks (`texts_phase` checks the
        stored rows too: which of them an older version left behind, only reading them all tells)."""
        if self._commit_texts_current():
            return self._missing_commit_texts() if self._commit_texts_deferred() else 0
        return int(self._db.execute("SELECT COUNT(*) FROM commits WHERE state='indexed' AND n_hunks > 0").fetchone()[0])

    def states_bytes(self) -> int:
        return unit_states.size_bytes(self._db)
