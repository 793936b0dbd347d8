"""The on-disk store: a SQLite catalogue, a Tantivy index, a usearch index and a manifest, in one directory.

SQLite is the source of truth for which commits are indexed. Writes follow a fixed order (commit rows marked
``pending`` and uids reserved -> Tantivy commit -> rows marked ``indexed``), so a run killed at any point resumes
with no duplicates and no gaps: pending commits are deleted from Tantivy by sha and redone, and uids are never
reused. Readers only trust hunks whose commit row says ``indexed``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from . import (
    lock,
    packing,
    values,  # noqa: F401  # registers the ZTEXT columns' converter: bodies read back as text
)
from .errors import IndexBusy as IndexBusy
from .errors import RebuildNeeded as RebuildNeeded
from .errors import StoreError

if TYPE_CHECKING:
    from dulwich.repo import Repo

SCHEMA_VERSION = 15
MANIFEST = "manifest.json"
DB = "catalog.sqlite"
TANTIVY_DIR = "tantivy"
STAGING_DIR = "tantivy-staging"  # hunks waiting for the symbols phase (index/symbols_phase.py)
MESSAGES_DIR = "tantivy-messages"  # one document per commit message, derived (index/message_index.py)
MESSAGES_VERIFIED = "verified-messages.json"  # its files already checked against their checksums
VECTORS = "vectors.usearch"
LOCK = "write.lock"
#: the catalogue's page size (schema 14; SQLite's default is 4,096). A stored token-state row is ~3 KB
#: (`unit_states`), so a 4 KB page held one and wasted the rest: on git/git that table took 532 MB for 413 MB of
#: states, 467 MB with 16 KB pages (vacuumed; as a build left it, 550 MB until schema 15 appended its rows), and
#: the whole catalogue with embeddings 904 → 814 MB. The search with embeddings measured the same within noise
#: (p50 21.5 → 22.5 ms, p95 30.1 → 29.4 ms, alternated rounds)
PAGE_SIZE = 16384
#: ``state`` key: the catalogue is to be compacted (:meth:`Store.compact`), set in the transaction that shrank or
#: dropped many rows (re-encoded states or message vectors), cleared once done (``index/dense_build.py``)
COMPACT_PENDING = "compact_pending"

_DDL = """
CREATE TABLE IF NOT EXISTS commits (
  sha TEXT PRIMARY KEY, parents TEXT NOT NULL, subject TEXT NOT NULL, body ZTEXT NOT NULL,
  author_name TEXT NOT NULL, author_email TEXT NOT NULL, author_time INTEGER NOT NULL, author_tz INTEGER NOT NULL,
  commit_time INTEGER NOT NULL, commit_tz INTEGER NOT NULL, is_merge INTEGER NOT NULL,
  state TEXT NOT NULL, indexed_at REAL, n_hunks INTEGER NOT NULL DEFAULT 0, skipped TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS commits_state ON commits(state);
CREATE TABLE IF NOT EXISTS files (
  fid INTEGER PRIMARY KEY, sha TEXT NOT NULL, path TEXT NOT NULL, old_path TEXT NOT NULL, change TEXT NOT NULL,
  language TEXT, parsed INTEGER NOT NULL, embedded INTEGER NOT NULL DEFAULT 0, author_time INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS files_sha ON files(sha);
CREATE INDEX IF NOT EXISTS files_embed ON files(embedded, author_time);
-- a hunk's commit, paths, change kind and language are its file's (files.fid): not repeated per hunk (schema 13)
CREATE TABLE IF NOT EXISTS hunks (
  uid INTEGER PRIMARY KEY, fid INTEGER NOT NULL, idx INTEGER NOT NULL,
  old_start INTEGER NOT NULL, old_lines INTEGER NOT NULL, new_start INTEGER NOT NULL, new_lines INTEGER NOT NULL,
  truncated INTEGER NOT NULL, symbols TEXT NOT NULL, ops TEXT NOT NULL
);
-- a file's hunks' excerpts, one value (`pack_excerpts`; schema 14), read with `read_excerpts`; a table of its
-- own, so that the files table stays rows of a few dozen bytes for the queries that walk it
CREATE TABLE IF NOT EXISTS excerpts (fid INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS files_path ON files(path);
CREATE INDEX IF NOT EXISTS files_symbols_pending ON files(fid) WHERE parsed=-1;  -- index/symbols_phase.py
CREATE INDEX IF NOT EXISTS hunks_fid ON hunks(fid);
CREATE TABLE IF NOT EXISTS merge_paths (
  sha TEXT NOT NULL, parent TEXT NOT NULL, path TEXT NOT NULL, ops TEXT  -- ops: index/merge_diffs.py
);
CREATE INDEX IF NOT EXISTS merge_paths_path ON merge_paths(path);
CREATE INDEX IF NOT EXISTS merge_paths_sha ON merge_paths(sha);
-- merges indexed as commits whose paths and blocks the merges phase has not stored yet (index/merge_diffs.py)
CREATE TABLE IF NOT EXISTS merges_unlisted (sha TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- each commit's analysed text for the second stage (index/commit_terms.py); an index built before it has none
-- and the search computes them from the excerpts
CREATE TABLE IF NOT EXISTS commit_terms (sha TEXT PRIMARY KEY, data BLOB NOT NULL);
-- the zstd dictionaries of the compressed values, one a kind (index/packing.py; schema 15)
CREATE TABLE IF NOT EXISTS dictionaries (kind TEXT PRIMARY KEY, id INTEGER NOT NULL, data BLOB NOT NULL);
"""


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


class Store:
    """Handle on one store directory. Cheap to open; the heavy parts (Tantivy, usearch) open lazily elsewhere."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db_path = path / DB
        self.tantivy_path = path / TANTIVY_DIR
        self.staging_path = path / STAGING_DIR
        self.messages_path = path / MESSAGES_DIR
        self.vectors_path = path / VECTORS
        self._db: sqlite3.Connection | None = None
        self._manifest: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    # -- manifest ---------------------------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.path / MANIFEST).exists()

    def read_manifest(self) -> dict[str, Any]:
        """The manifest (a copy: parsed again only when the file changed, which a ``stat`` tells; every search
        reads it to notice a rebuild)."""
        try:
            st = (self.path / MANIFEST).stat()
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            if self._manifest is not None and self._manifest[0] == key:
                return copy.deepcopy(self._manifest[1])
            data = json.loads((self.path / MANIFEST).read_text("utf-8"))
        except FileNotFoundError:
            raise StoreError(f"no index at {self.path}; run `backstory index`") from None
        except (OSError, ValueError) as e:
            raise StoreError(f"the index manifest is unreadable ({e}); run `backstory index --rebuild`") from None
        if not isinstance(data, dict):
            raise StoreError("the index manifest is malformed; run `backstory index --rebuild`")
        self._manifest = (key, data)
        return copy.deepcopy(data)

    def data_version(self) -> tuple[int, int, int]:
        """Changes when the catalogue's content may have: SQLite's ``data_version`` (another connection
        committed) and this connection's own change count. What is derived from the catalogue is cached on it."""
        db = self.db
        return id(db), int(db.execute("PRAGMA data_version").fetchone()[0]), db.total_changes

    def vectors_stat(self) -> tuple[int, int, int] | None:
        """What tells the vector file changed (or appeared, or went) without reading it."""
        try:
            st = self.vectors_path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def write_manifest(self, data: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), "utf-8")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.path / MANIFEST)

    def schema_problem(self, manifest: dict[str, Any] | None = None) -> str | None:
        """Why the index's schema is not this version's (another version built it, or the manifest says
        something that is not a schema number), or None."""
        found = (manifest if manifest is not None else self.read_manifest()).get("schema_version")
        if isinstance(found, bool) or not isinstance(found, int):
            return f"the index manifest is malformed (schema_version is {found!r}, not a number)"
        if found != SCHEMA_VERSION:
            return f"the index was built by another version of backstory (schema {found}, not {SCHEMA_VERSION})"
        return None

    def verdict(self, options: dict[str, Any]) -> str | None:
        """Why the index cannot be trusted with these build options, or None when it can."""
        m = self.read_manifest()
        schema = self.schema_problem(m)
        if schema:
            return schema
        built = m.get("options", {})
        diffs = [f"{k}: {built.get(k)!r} -> {v!r}" for k, v in sorted(options.items()) if built.get(k) != v]
        if diffs:
            return "index was built with different options (" + "; ".join(diffs) + ")"
        return None

    # -- catalogue --------------------------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            if not self.db_path.exists() and self.exists():
                raise StoreError(f"the index catalogue {self.db_path} is missing; run `backstory index --rebuild`")
            self.path.mkdir(parents=True, exist_ok=True)
            try:
                conn = sqlite3.connect(
                    self.db_path, timeout=30, isolation_level=None, check_same_thread=False,
                    detect_types=sqlite3.PARSE_DECLTYPES,  # ZTEXT columns read back as text (see `values.pack_text`)
                )  # fmt: skip
                conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new catalogue only (before WAL and tables)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_DDL)
                packing.open_catalogue(conn, self.db_path)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"the index catalogue is corrupt ({e}); run `backstory index --rebuild`") from None
            conn.row_factory = sqlite3.Row
            self._db = conn
        return self._db

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that must see one state of the catalogue (a version and the rows it stands for): one read
        transaction, or the caller's when it is in one already. Writers (other processes) go on meanwhile."""
        db = self.db
        if db.in_transaction:
            yield db
            return
        db.execute("BEGIN")
        try:
            yield db
        finally:
            if db.in_transaction:
                db.execute("COMMIT")

    def compact(self) -> bool:
        """Rewrite the catalogue without the space left free inside its pages (SQLite's ``VACUUM``), for a change
        that shrank many rows at once: SQLite reuses freed pages, not the free bytes of pages still in use.
        Not inside a transaction; the caller holds the write lock. Readers keep reading (WAL) meanwhile.

        It needs room for about twice the catalogue's size for a moment: SQLite's temporary copy (in its
        temporary directory, ``TMPDIR``) and, in WAL mode, the rewritten file passing through the WAL. The WAL
        is then truncated, or a reader's open connection would keep a file as large as the catalogue beside it
        until every connection closed. Returns whether it was (False: a reader was mid-read throughout the busy
        timeout; a later checkpoint does it)."""
        self.db.execute("VACUUM")
        busy = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        return not busy

    def get_state(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM state WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_state(self, db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute("INSERT OR REPLACE INTO state(key, value) VALUES (?, ?)", (key, value))

    def packer(self, train: bool = False) -> packing.Packer:
        """A :class:`packing.Packer` with the catalogue's dictionaries; ``train``: first train those the
        catalogue can train now (`packing.train`: once it holds enough history; an indexing run, under the write
        lock, where it starts writing compressed values). Each caller gets its own (one per thread)."""
        have = packing.load(self.db)
        if not train or set(have) >= set(packing.KINDS):  # (trained once for good: no write transaction)
            return packing.Packer(have)
        with self.transaction() as db:
            have = packing.load(db)
            have.update(packing.train(db, have))
        return packing.Packer(have)

    def reserve_uids(self, db: sqlite3.Connection, count: int) -> int:
        """Reserve ``count`` ids that will never be handed out again, even if this run dies."""
        start = int(self.get_state("next_uid", "1") or 1)
        self.set_state(db, "next_uid", str(start + count))
        return start

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def seed_from(self, source: Store, options: dict[str, Any]) -> bool:
        """Start this (absent) store as a copy of ``source`` if that index was built with ``options``.

        A linked worktree gets its own index (its HEAD's history, purged and extended on its own), but most of
        that history is the main checkout's: copying its index and then updating is seconds, a fresh build is
        minutes. The copy is taken under the source's writer lock (skipped, not waited for, if it is busy) and
        the manifest is written last, so an interrupted copy leaves no index that claims to exist. Returns
        whether the store was seeded.
        """
        if self.exists() or not source.exists():
            return False
        try:
            if source.verdict(options):
                return False
            with source.write_lock(wait=0.0):
                self.path.mkdir(parents=True, exist_ok=True)
                self.clear_data()
                with (
                    contextlib.closing(sqlite3.connect(source.db_path)) as src,
                    contextlib.closing(sqlite3.connect(self.db_path)) as dst,
                ):
                    src.backup(dst)  # consistent even with a WAL
                for tree, copy in (
                    (source.tantivy_path, self.tantivy_path),
                    (source.staging_path, self.staging_path),
                    (source.messages_path, self.messages_path),
                ):
                    if tree.exists():
                        shutil.copytree(tree, copy, ignore=shutil.ignore_patterns("*.lock"))
                if source.vectors_path.exists():
                    shutil.copy2(source.vectors_path, self.vectors_path)
                self.write_manifest(source.read_manifest())
        except (IndexBusy, StoreError, OSError, sqlite3.Error):
            self.clear_data()
            return False
        return True

    def clear_data(self) -> None:
        """Delete the catalogue, Tantivy and vector files (not the lock): a store with no manifest is absent."""
        self.close()
        for name in (MANIFEST, DB, f"{DB}-wal", f"{DB}-shm", VECTORS, "verified.json", MESSAGES_VERIFIED):
            (self.path / name).unlink(missing_ok=True)
        for tree in (self.tantivy_path, self.staging_path, self.messages_path):
            if tree.exists():
                shutil.rmtree(tree)

    def size_bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.path):
            for f in files:
                with contextlib.suppress(OSError):
                    total += (Path(root) / f).stat().st_size
        return total

    def component_sizes(self) -> dict[str, int]:
        """Bytes on disk per component: ``catalogue`` (SQLite with its WAL), ``keyword_index`` (the Tantivy ones),
        ``vectors`` (usearch) and ``other`` (manifest, lock)."""
        sizes = {"catalogue": 0, "keyword_index": 0, "vectors": 0, "other": 0}
        for root, _dirs, files in os.walk(self.path):
            for f in files:
                p = Path(root) / f
                try:
                    size = p.stat().st_size
                except OSError:
                    continue
                if any(p.is_relative_to(t) for t in (self.tantivy_path, self.staging_path, self.messages_path)):
                    sizes["keyword_index"] += size
                elif f.startswith(DB):
                    sizes["catalogue"] += size
                elif f == VECTORS:
                    sizes["vectors"] += size
                else:
                    sizes["other"] += size
        return sizes

    # -- writer lock ------------------------------------------------------------------------------------------

    def writer_pid(self) -> int | None:
        """The process holding the write lock (an indexer at work), or None when nobody writes."""
        return lock.holder(self.path / LOCK)

    def write_lock(self, wait: float = 0.0) -> contextlib.AbstractContextManager[None]:
        """Exclusive writer lock (flock: released by the kernel even on kill -9)."""
        return lock.hold(self.path / LOCK, wait)


def new_manifest(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "created_at": now_iso(),
        "generation": uuid.uuid4().hex,  # changes on every rebuild, so long-lived readers know to reopen
        "options": options,
    }


def store_for(repo: Repo, index_dir: str | os.PathLike[str] | None = None) -> Store:
    """The store of a repository: ``<git dir>/backstory`` unless configured.

    Each worktree has its own (a linked worktree's git dir is ``.git/worktrees/<name>``): an index follows one
    HEAD, and a shared one would purge and re-add commits every time another worktree's HEAD indexed. A linked
    worktree's index starts as a copy of the main checkout's (`Store.seed_from`), and `git worktree remove`
    deletes it with the worktree.
    """
    if index_dir is None:
        index_dir = os.environ.get("BACKSTORY_INDEX_DIR") or None
    if index_dir is not None:
        return Store(Path(index_dir))
    return Store(Path(repo.controldir()) / "backstory")


def bump_counter(db: sqlite3.Connection, key: str) -> None:
    """Add one to a counter in ``state`` (inside the caller's transaction): readers key caches on it."""
    db.execute(
        "INSERT INTO state(key, value) VALUES (?, '1')"
        " ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
        (key,),
    )
