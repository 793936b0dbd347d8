"""Named reads of the catalogue (``catalog.sqlite``): the only questions the rooms above ``index/`` may ask it.

Why a class of named queries rather than a shared connection: the schema is this room's to change (the large-
history work re-packs shas and merge paths), so no SQL may live outside ``index/``. Search, features and views
ask for rows by what they mean ("the hunks of these files", "the merges the catalogue knows"), and a remote
or differently stored catalogue could answer the same methods.

Rows are ``sqlite3.Row`` objects, read like mappings (``row["sha"]``); lists of ids are fetched in chunks of
500 to stay under SQLite's parameter limit.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ..models.passages import file_passage
from ..models.states import StateCodec
from . import integrity, relations, unit_states
from .catalog_counts import UNREADABLE_MERGES as UNREADABLE_MERGES
from .catalog_counts import Counts
from .store import Store, StoreError
from .values import read_excerpts

F = TypeVar("F", bound=Callable[..., Any])

CHUNK = 500
# every file diff of a path with its hunks' shapes, in hunk order (files_path then hunks_fid indexes)
_FILE_HUNKS = (
    "SELECT f.sha, f.change, f.old_path, h.uid, h.old_start, h.old_lines, h.new_start, h.new_lines, h.ops "
    "FROM files f LEFT JOIN hunks h ON h.fid = f.fid WHERE f.path=? ORDER BY f.fid, h.idx"
)
# a hunk row as readers know it: the hunk's own columns and its file's (commit, paths, change kind, language),
# which the catalogue keeps once per file (schema 13); by uid (primary keys of both tables)
_HUNK_ROWS = (
    "SELECT h.uid, h.fid, f.sha, h.idx, f.path, f.old_path, f.change, h.old_start, h.old_lines, h.new_start,"
    " h.new_lines, f.language, h.truncated, h.symbols, h.ops"
    " FROM hunks h JOIN files f ON f.fid = h.fid WHERE h.uid IN ({marks})"
)
_HUNK_PLACES = (
    "SELECT h.uid, h.fid, f.sha, f.path, h.idx FROM hunks h JOIN files f ON f.fid = h.fid WHERE h.uid IN ({marks})"
)


def _excerpt(texts: dict[int, list[str]], fid: int, idx: int) -> str:
    """Hunk ``idx``'s excerpt among its file's; a file or hunk without one is catalogue damage."""
    try:
        return texts[fid][idx]
    except (KeyError, IndexError):
        msg = f"the index catalogue is damaged (file {fid} has no stored excerpt {idx}); {integrity.REBUILD}"
        raise integrity.CatalogueDamaged(msg) from None


def _chunks(values: Sequence[Any]) -> Iterator[tuple[Sequence[Any], str]]:
    for i in range(0, len(values), CHUNK):
        chunk = values[i : i + CHUNK]
        yield chunk, ",".join("?" * len(chunk))


class Catalog(Counts):
    """Read access to one index's catalogue; ``connect`` returns the store's (lazily opened) connection."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect

    @classmethod
    def of(cls, store: Store) -> Catalog:
        """The catalogue of ``store`` (its connection opens on the first question, and reopens after a
        rebuild closed it)."""
        return cls(lambda: store.db)

    @property
    def _db(self) -> sqlite3.Connection:
        return self._connect()

    def _rows_by_key(self, table: str, key: str, values: Iterable[Any]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for chunk, marks in _chunks(sorted(set(values))):
            for row in self._db.execute(f"SELECT * FROM {table} WHERE {key} IN ({marks})", chunk):
                out[row[key]] = row
        return out

    # -- rows by id -------------------------------------------------------------------------------------------

    def hunk_rows(self, uids: Iterable[int]) -> dict[int, Any]:
        """Each hunk's row with its file's columns (``sha``, ``path``, ``old_path``, ``change``, ``language``)
        and its ``excerpt``."""
        rows = self._hunks_by_uid(_HUNK_ROWS, uids)
        texts = self._excerpts(r["fid"] for r in rows.values())
        return {uid: {**dict(r), "excerpt": _excerpt(texts, r["fid"], r["idx"])} for uid, r in rows.items()}

    def _excerpts(self, fids: Iterable[int]) -> dict[int, list[str]]:
        """The stored excerpts of each file (`values.read_excerpts`); a damaged value is catalogue damage."""
        try:
            return read_excerpts(self._db, fids)
        except ValueError as e:
            raise integrity.CatalogueDamaged(f"the index catalogue is damaged ({e}); {integrity.REBUILD}") from None

    def hunk_places(self, uids: Iterable[int]) -> dict[int, Any]:
        """Where each hunk is: its ``fid``, ``sha``, ``path`` and ``idx``, without the excerpt. Fusion places a
        search's ~1,000 lane hits by these; reading whole rows decompressed every excerpt (11 ms a search on
        git/git)."""
        return self._hunks_by_uid(_HUNK_PLACES, uids)

    def _hunks_by_uid(self, template: str, uids: Iterable[int]) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for chunk, marks in _chunks(sorted(set(uids))):
            for row in self._db.execute(template.format(marks=marks), chunk):
                out[row["uid"]] = row
        return out

    def commit_rows(self, shas: Iterable[str]) -> dict[str, Any]:
        return self._rows_by_key("commits", "sha", shas)

    # -- commits ----------------------------------------------------------------------------------------------

    def commit_state(self, sha: str) -> str | None:
        """``indexed``, ``pending`` or None (not in the catalogue)."""
        row = self._db.execute("SELECT state FROM commits WHERE sha=?", (sha,)).fetchone()
        return None if row is None else str(row[0])

    def indexed_parents(self) -> dict[str, list[str]]:
        """Every indexed commit's parent list (the graph exact history walks). A parent that is itself indexed is
        the same string object as its key: the language server keeps this graph, and on git/git separate copies
        of the parents' shas took 9 MB of its 82,000 commits' 26."""
        own: dict[str, str] = {}
        graph: dict[str, list[str]] = {}
        for sha, p in self._db.execute("SELECT sha, parents FROM commits WHERE state='indexed'"):
            graph[own.setdefault(sha, sha)] = [own.setdefault(parent, parent) for parent in json.loads(p)]
        return graph

    def indexed_shas(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT sha FROM commits WHERE state='indexed'")}

    def indexed_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM commits WHERE state='indexed'").fetchone()[0])

    def indexed_merges(self) -> set[str]:
        """Merges whose changed paths are listed (right after the keyword lanes; their change blocks follow in the
        merges phase, and exact history diffs a listed path without blocks on the fly); exact history diffs the
        merges not listed yet wholly on the fly."""
        sql = (
            "SELECT sha FROM commits WHERE is_merge=1 AND state='indexed'"
            " AND sha NOT IN (SELECT sha FROM merges_unlisted)"
        )
        return {r[0] for r in self._db.execute(sql)}

    def newest_indexed(self, limit: int = 50) -> list[str]:
        """The most recently committed indexed commits, newest first (ties by sha)."""
        sql = "SELECT sha FROM commits WHERE state='indexed' ORDER BY commit_time DESC, sha LIMIT ?"
        return [r[0] for r in self._db.execute(sql, (limit,))]

    def hunk_counts(self, shas: Sequence[str]) -> dict[str, int]:
        """Indexed hunks per commit (for the commit-size prior)."""
        out: dict[str, int] = {}
        for chunk, marks in _chunks(list(shas)):
            out.update(self._db.execute(f"SELECT sha, n_hunks FROM commits WHERE sha IN ({marks})", chunk))
        return out

    def message_row(self, sha: str) -> tuple[int, str, str] | None:
        """(indexed hunk count, subject, body) of a commit, or None."""
        row = self._db.execute("SELECT n_hunks, subject, body FROM commits WHERE sha=?", (sha,)).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), str(row[2]))

    def shas_with_prefix(self, prefix: str, limit: int = 1000) -> list[str]:
        """Catalogued commits whose sha starts with ``prefix`` (a range scan of the primary key); [] when the
        catalogue cannot be read (a damaged or foreign one: the object store answers instead)."""
        try:
            sql = "SELECT sha FROM commits WHERE sha >= ? AND sha < ? ORDER BY sha LIMIT ?"
            return [str(r[0]) for r in self._db.execute(sql, (prefix, prefix + "g", limit))]
        except (sqlite3.Error, StoreError):
            return []

    # -- files and hunks ----------------------------------------------------------------------------------------

    def hunks_of_units(self, fids: Sequence[int]) -> dict[int, list[int]]:
        """Each file unit's hunk uids, in hunk order."""
        out: dict[int, list[int]] = {}
        for chunk, marks in _chunks(list(fids)):
            sql = f"SELECT uid, fid FROM hunks WHERE fid IN ({marks}) ORDER BY fid, idx"
            for uid, fid in self._db.execute(sql, chunk):
                out.setdefault(fid, []).append(uid)
        return out

    def first_hunks_of(self, shas: Sequence[str], per: int) -> dict[str, list[int]]:
        """Each commit's first ``per`` hunk uids, in hunk order (by file, then position, which is uid order within
        a file: see ``batch_writer.write_batch``). One statement, but each commit's read stops after ``per`` hunks (the
        files_sha and hunks_fid indexes give that order without a sort; ``group_concat`` promises no order, uid
        order is hunk order within a commit): reading every hunk of the message lane's 100 commits to keep three
        cost 2-7 ms a search on git/git, where some commits have thousands of hunks."""
        out: dict[str, list[int]] = {}
        for chunk, _marks in _chunks(sorted(set(shas))):
            rows = ",".join("(?)" for _ in chunk)
            sql = (
                "SELECT wanted.column1, (SELECT group_concat(uid) FROM (SELECT h.uid FROM files f JOIN hunks h"
                " ON h.fid = f.fid WHERE f.sha = wanted.column1 ORDER BY f.fid, h.uid LIMIT ?))"
                f" FROM (VALUES {rows}) wanted"
            )
            for sha, uids in self._db.execute(sql, (per, *chunk)):
                if uids:
                    out[sha] = sorted(int(u) for u in uids.split(","))
        return out

    def commits_of_units(self, fids: Sequence[int]) -> list[str]:
        """The distinct commits owning ``fids``, in the order the catalogue returns them."""
        shas: dict[str, None] = {}
        for chunk, marks in _chunks(list(fids)):
            for (sha,) in self._db.execute(f"SELECT DISTINCT sha FROM files WHERE fid IN ({marks})", chunk):
                shas.setdefault(sha, None)
        return list(shas)

    def embedded_units_of(self, shas: Sequence[str]) -> list[tuple[str, int]]:
        """(sha, fid) of every embedded file unit of ``shas``, by fid."""
        out: list[tuple[str, int]] = []
        for chunk, marks in _chunks(list(shas)):
            # `+embedded`: look rows up by sha; on `embedded` SQLite walked every embedded unit (69 ms on git/git)
            sql = f"SELECT sha, fid FROM files WHERE +embedded=1 AND sha IN ({marks}) ORDER BY fid"
            out.extend((sha, fid) for sha, fid in self._db.execute(sql, chunk))
        return out

    def change_signatures(self, shas: Sequence[str]) -> dict[str, str]:
        """A digest of each commit's change as a patch id sees it: every hunk's path and changed lines, without
        line numbers or context, so a cherry-pick or backport of the same patch has the same digest. Only for
        commits that may have a twin among ``shas``: the same paths with as many hunks each, known from the
        indexes alone, so the excerpts read are those of the few candidates that share a shape (reading every
        one's cost ~2 ms a search on git/git). Commits without indexed hunks are left out (nothing to compare)."""
        shapes: dict[str, list[str]] = {}
        for chunk, marks in _chunks(sorted(set(shas))):
            sql = (
                f"SELECT f.sha, f.path, COUNT(*) FROM files f JOIN hunks h ON h.fid = f.fid WHERE f.sha IN ({marks})"
                " GROUP BY f.fid ORDER BY f.sha, f.path, f.fid"
            )
            for sha, path, count in self._db.execute(sql, chunk):
                shapes.setdefault(sha, []).append(f"{path}\0{count}")
        sharing = Counter("\1".join(shape) for shape in shapes.values())
        maybe = [sha for sha, shape in shapes.items() if sharing["\1".join(shape)] > 1]
        parts: dict[str, list[str]] = {}
        for chunk, marks in _chunks(maybe):
            sql = (
                f"SELECT f.sha, f.path, f.fid, h.idx FROM files f JOIN hunks h ON h.fid = f.fid"
                f" WHERE f.sha IN ({marks}) ORDER BY f.sha, f.path, f.fid, h.idx"
            )
            rows = self._db.execute(sql, chunk).fetchall()
            texts = self._excerpts(r[2] for r in rows)
            for sha, path, fid, idx in rows:
                excerpt = _excerpt(texts, fid, idx)
                changed = "\n".join(line for line in excerpt.split("\n")[1:] if line[:1] in "+-")
                parts.setdefault(sha, []).append(f"{path}\0{changed}")
        return {
            sha: hashlib.sha256("\1".join(p).encode("utf-8", "surrogatepass")).hexdigest() for sha, p in parts.items()
        }

    def commit_paths(self, sha: str) -> list[str]:
        """The paths of a commit's file changes, in file order; not the tombstones a purge of an earlier copy of
        the commit left for the dense phase (`batch_writer.forget_rows`)."""
        sql = "SELECT path FROM files WHERE sha=? AND embedded <> -1 ORDER BY fid"
        return [r[0] for r in self._db.execute(sql, (sha,))]

    def commit_hunk_texts(self, sha: str, limit: int) -> list[tuple[str, str, str]]:
        """(path, excerpt, symbols JSON) of a commit's first ``limit`` hunks. (fid, uid) is uid order within a
        commit (see ``batch_writer.write_batch``) and the order the two indexes give: the read stops after
        ``limit`` rows instead of sorting every hunk of a large commit."""
        sql = (
            "SELECT f.path, f.fid, h.idx, h.symbols FROM files f JOIN hunks h ON h.fid = f.fid WHERE f.sha=?"
            " ORDER BY f.fid, h.uid LIMIT ?"
        )
        rows = self._db.execute(sql, (sha, limit)).fetchall()
        texts = self._excerpts(r[1] for r in rows)
        return [(r[0], _excerpt(texts, r[1], r[2]), r[3]) for r in rows]

    def commit_hunk_names(self, sha: str, limit: int) -> list[tuple[str, str]]:
        """(path, symbols JSON) of a commit's first ``limit`` hunks, as :meth:`commit_hunk_texts` orders them,
        without their excerpts."""
        sql = (
            "SELECT f.path, h.symbols FROM files f JOIN hunks h ON h.fid = f.fid WHERE f.sha=?"
            " ORDER BY f.fid, h.uid LIMIT ?"
        )
        return [(r[0], r[1]) for r in self._db.execute(sql, (sha, limit))]

    def commit_terms(self, sha: str) -> tuple[int, bytes | None] | None:
        """(indexed hunk count, stored analysed text or None) of a commit (`index.commit_terms`), or None when
        the commit is not catalogued."""
        sql = "SELECT c.n_hunks, t.data FROM commits c LEFT JOIN commit_terms t ON t.sha = c.sha WHERE c.sha=?"
        row = self._db.execute(sql, (sha,)).fetchone()
        if row is None:
            return None
        return int(row[0]), row[1] if isinstance(row[1], bytes) else None  # not bytes: damaged, computed again

    def path_changes(self, path: str) -> dict[str, tuple[str, str, list[Any]]]:
        """Non-merge commits that changed ``path``: sha -> (change kind, old path, hunk shapes), one query.

        A hunk shape is (uid, old_start, old_lines, new_start, new_lines, ops)."""
        rows: dict[str, tuple[str, str, list[Any]]] = {}
        for r in self._db.execute(_FILE_HUNKS, (path,)):
            entry = rows.get(r[0])
            if entry is None:
                entry = rows[r[0]] = (r[1], r[2], [])
            if r[3] is not None:
                entry[2].append(r[3:])
        return rows

    def merge_changes(self, path: str) -> dict[tuple[str, str], str | None]:
        """(merge, parent) -> the stored change blocks of ``path`` between them (see merge_diffs.py)."""
        rows = self._db.execute("SELECT sha, parent, ops FROM merge_paths WHERE path=?", (path,)).fetchall()
        return {(r[0], r[1]): r[2] for r in rows}

    def unit_passages(self, fids: list[int], no_messages: bool) -> list[str]:
        """The dense recipe's text of each file unit, in ``fids`` order: what its vector and stored token states
        encode (the embedding phase writes them; the rerank recomputes states of units it has not reached)."""
        db = self._db
        marks = ",".join("?" * len(fids))
        files = {r["fid"]: r for r in db.execute(f"SELECT * FROM files WHERE fid IN ({marks})", fids)}
        excerpts = self._excerpts(fids)
        syms: dict[int, list[str]] = {}
        for r in db.execute(f"SELECT fid, symbols FROM hunks WHERE fid IN ({marks}) ORDER BY fid, idx", fids):
            syms.setdefault(r["fid"], []).extend(s[0] for s in json.loads(r["symbols"]))
        subjects: dict[str, str] = {}
        if not no_messages:
            shas = sorted({f["sha"] for f in files.values()})
            m2 = ",".join("?" * len(shas))
            subjects = {r[0]: r[1] for r in db.execute(f"SELECT sha, subject FROM commits WHERE sha IN ({m2})", shas)}
        out = []
        for fid in fids:
            f = files[fid]
            path = f["path"] if f["old_path"] == f["path"] else f"{f['old_path']} -> {f['path']}"
            if fid in syms and fid not in excerpts:
                _excerpt(excerpts, fid, 0)  # a file with hunks and no stored excerpts: catalogue damage
            out.append(file_passage(path, syms.get(fid, []), subjects.get(f["sha"]), excerpts.get(fid, [])))
        return out

    # -- what became of commits ------------------------------------------------------------------------------

    def consequences(self, shas: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """(kind, later commit) of what happened to each commit: reverted, reapplied, fixed, cherry-picked
        (``index/relations.py``); commits with none are left out."""
        try:
            return relations.consequences(self._db, shas)
        except sqlite3.OperationalError:  # a read-only catalogue made before the tables existed
            return {}

    # -- token states ---------------------------------------------------------------------------------------

    def state_codec(self, recipe: str) -> StateCodec | None:
        return unit_states.load_codec(self._db, recipe)

    def unit_states(self, fids: Sequence[int], width: int | None = None) -> dict[int, bytes]:
        return unit_states.get(self._db, fids, width)


def _damage_named(fn: F) -> F:
    @functools.wraps(fn)
    def reading(*args: Any, **kwargs: Any) -> Any:
        with integrity.reading_catalogue():
            return fn(*args, **kwargs)

    return reading  # type: ignore[return-value]


# every question may meet a damaged page: it surfaces as CatalogueDamaged (a StoreError naming the fix); the
# counts' questions too, wrapped here as Catalog's own (Counts itself stays unwrapped)
for _cls in (Counts, Catalog):
    for _name, _fn in list(vars(_cls).items()):
        if inspect.isfunction(_fn) and not _name.startswith("__"):
            setattr(Catalog, _name, _damage_named(_fn))
