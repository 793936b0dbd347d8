"""Integrity of the store's parts, checked cheaply enough for every open, named with the fix, repaired by the next
``backstory index`` where the data allow.

Why: the catalogue, the Tantivy directory and the vector file are three files that can be damaged (or deleted)
independently, and each fails differently when it is — a garbled Tantivy file panics inside Rust, a garbled
vector file is read without complaint and silently ranks nonsense, a damaged SQLite page raises on the rows
that happen to sit on it. So every part carries something the reader can check before trusting it:

- **vectors** (``vectors.usearch``): the writer records the file's size, modification time and CRC-32 in the
  catalogue, in two phases so that a crash never makes a good file look damaged: the new file's stamp is
  recorded as *expected* before the file is renamed into place, and becomes the *claimed* stamp in the
  transaction that marks its units embedded. A reader accepts the file when its size and time match either
  stamp (a ``stat``), or when its CRC does (a copy; read once per process). A missing or changed file turns
  the dense lane off with a warning, and the next ``index`` embeds the units again (the token states, kept in
  the catalogue, stay valid).
- **Tantivy**: every file ``meta.json`` names must exist, and each must match the CRC-32 in its own footer
  (Tantivy writes one into every segment file). Segment files never change once written, so each is read
  once and then known by (name, size, modification time): ``verified.json`` keeps that, so later opens cost
  a ``stat`` per file. Damage means ``index --rebuild`` (the changed lines are not kept anywhere else).
- **catalogue**: ``PRAGMA quick_check`` where it pays — before a writer changes anything, and in ``status``
  — and SQLite's "malformed" errors turned into the same message wherever they surface.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .store import StoreError

VECTORS_STAMP = "vectors_stamp"  # catalogue state: the vector file the marked units live in
VECTORS_NEXT = "vectors_next"  # catalogue state: the vector file a writer is about to rename into place
VERIFIED = "verified.json"
REINDEX = "run `backstory index` to repair it"
REBUILD = "run `backstory index --rebuild`"
SEGMENT_FILES = ("idx", "pos", "term", "store", "fast", "fieldnorm")
FOOTER_MAGIC = 1337  # Tantivy's footer: JSON {version, crc} | u32 length | u32 magic, little-endian


class CatalogueDamaged(StoreError):
    """SQLite found damage in ``catalog.sqlite``."""


@dataclass(frozen=True)
class Problem:
    part: str  # "catalogue", "tantivy", "vectors"
    what: str
    fix: str  # REINDEX or REBUILD

    def __str__(self) -> str:
        return f"{self.what}; {self.fix}"


def crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


# -- the catalogue ------------------------------------------------------------------------------------------


def catalogue_damaged(e: sqlite3.DatabaseError) -> CatalogueDamaged:
    """The one message for SQLite's damage errors, whichever query met them."""
    return CatalogueDamaged(f"the index catalogue is damaged ({' '.join(str(e).split())}); {REBUILD}")


def is_damage(e: sqlite3.DatabaseError) -> bool:
    """SQLite's own words for a damaged file (not "locked", not a constraint, not a programming error)."""
    words = ("malformed", "not a database", "corrupt", "disk i/o error")
    return type(e) is sqlite3.DatabaseError or any(w in str(e).lower() for w in words)


@contextlib.contextmanager
def reading_catalogue() -> Iterator[None]:
    """Turn SQLite damage met while reading into :class:`CatalogueDamaged` (other errors pass)."""
    try:
        yield
    except sqlite3.DatabaseError as e:
        if not is_damage(e):
            raise
        raise catalogue_damaged(e) from None


def catalogue_problem(db: sqlite3.Connection) -> Problem | None:
    """``PRAGMA quick_check`` (reads every page: ~0.5 s per 100 MB), or the error opening it raised."""
    try:
        rows = db.execute("PRAGMA quick_check(5)").fetchall()
    except sqlite3.DatabaseError as e:
        return Problem("catalogue", f"the index catalogue is damaged ({e})", REBUILD)
    found = [" ".join(str(r[0]).split()) for r in rows]  # SQLite's lines, each on one line
    if found == ["ok"]:
        return None
    return Problem("catalogue", f"the index catalogue is damaged ({'; '.join(found)[:300]})", REBUILD)


# -- the vector file ----------------------------------------------------------------------------------------


def file_stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "crc32": crc32(path)}


def _stamps(db: sqlite3.Connection) -> list[dict[str, Any]]:
    out = []
    for key in (VECTORS_STAMP, VECTORS_NEXT):
        row = db.execute("SELECT value FROM state WHERE key=?", (key,)).fetchone()
        if row and row[0]:
            with contextlib.suppress(ValueError, TypeError):
                stamp = json.loads(row[0])
                if isinstance(stamp, dict):
                    out.append(stamp)
    return out


def expect_vectors(db: sqlite3.Connection, stamp: dict[str, int]) -> None:
    """Record the stamp of the vector file about to be renamed into place (its own transaction, before)."""
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT OR REPLACE INTO state(key, value) VALUES (?, ?)", (VECTORS_NEXT, json.dumps(stamp)))
    db.execute("COMMIT")


def claim_vectors(tx: sqlite3.Connection) -> None:
    """In the transaction that marks units embedded: the expected file is now the claimed one."""
    row = tx.execute("SELECT value FROM state WHERE key=?", (VECTORS_NEXT,)).fetchone()
    if row and row[0]:
        tx.execute("INSERT OR REPLACE INTO state(key, value) VALUES (?, ?)", (VECTORS_STAMP, row[0]))
        tx.execute("DELETE FROM state WHERE key=?", (VECTORS_NEXT,))


def forget_vectors(tx: sqlite3.Connection) -> None:
    tx.execute("DELETE FROM state WHERE key IN (?, ?)", (VECTORS_STAMP, VECTORS_NEXT))


def has_stamp(db: sqlite3.Connection) -> bool:
    return bool(_stamps(db))


def stamp_current(tx: sqlite3.Connection, path: Path) -> None:
    """Claim the file as it is (an index from before stamps, after its counts were checked)."""
    tx.execute("INSERT OR REPLACE INTO state(key, value) VALUES (?, ?)", (VECTORS_STAMP, json.dumps(file_stamp(path))))


def vectors_problem(
    db: sqlite3.Connection, path: Path, claimed: int, trusted: set[Any] | None = None
) -> Problem | None:
    """Why the vector file cannot be trusted for the ``claimed`` embedded units, or None.

    ``trusted``: (size, mtime) pairs this process already verified by CRC (a copied file is read once)."""
    if claimed <= 0:
        return None
    try:
        st = path.stat()
    except FileNotFoundError:
        what = f"the vector file {path.name} is missing ({claimed:,} file units were embedded)"
        return Problem("vectors", what, REINDEX)
    stamps = _stamps(db)
    if not stamps:
        return None  # an index from before stamps: its writer checks the counts and stamps it on the next run
    key = (st.st_size, st.st_mtime_ns)
    if any((s.get("size"), s.get("mtime_ns")) == key for s in stamps) or (trusted is not None and key in trusted):
        return None
    if any(s.get("size") == st.st_size for s in stamps) and any(s.get("crc32") == crc32(path) for s in stamps):
        if trusted is not None:
            trusted.add(key)
        return None
    return Problem("vectors", f"the vector file {path.name} is damaged (it is not the file backstory wrote)", REINDEX)


# -- Tantivy ------------------------------------------------------------------------------------------------


def tantivy_files(directory: Path) -> list[str]:
    """The files the committed index consists of, from ``meta.json`` (raises ValueError when unreadable)."""
    try:
        meta = json.loads((directory / "meta.json").read_text("utf-8"))
        names = []
        for seg in meta["segments"]:
            sid = str(seg["segment_id"]).replace("-", "")
            names += [f"{sid}.{ext}" for ext in SEGMENT_FILES]
            if seg.get("deletes"):
                names.append(f"{sid}.{int(seg['deletes']['opstamp'])}.del")
        return names
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"meta.json is unreadable ({type(e).__name__}: {e})") from None


def _names_or_empty(directory: Path) -> list[str]:
    try:
        return tantivy_files(directory)
    except ValueError:
        return []


def footer_ok(path: Path) -> bool:
    """Whether the file's bytes match the CRC-32 Tantivy wrote in its footer."""
    data_len = path.stat().st_size
    with open(path, "rb") as fh:
        if data_len < 8:
            return False
        fh.seek(data_len - 8)
        tail = fh.read(8)
        length, magic = int.from_bytes(tail[:4], "little"), int.from_bytes(tail[4:], "little")
        if magic != FOOTER_MAGIC or length + 8 > data_len:
            return False
        fh.seek(data_len - 8 - length)
        try:
            want = int(json.loads(fh.read(length))["crc"])
        except (ValueError, KeyError, TypeError):
            return False
        fh.seek(0)
        crc, left = 0, data_len - 8 - length
        while left > 0:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                return False
            crc = zlib.crc32(chunk, crc)
            left -= len(chunk)
    return crc == want


class Verified:
    """Tantivy files already checked against their footers, known by (name, size, mtime); kept in memory and in
    ``verified.json`` (best effort: a read-only index directory just checks again next time)."""

    def __init__(self, store_path: Path, name: str = VERIFIED) -> None:
        self.path = store_path / name  # one record per Tantivy directory (each check replaces its record)
        self.files: dict[str, list[int]] | None = None

    def _load(self) -> dict[str, list[int]]:
        if self.files is None:
            try:
                raw = json.loads(self.path.read_text("utf-8"))
                self.files = {k: v for k, v in raw.get("tantivy", {}).items() if isinstance(v, list)}
            except (OSError, ValueError, AttributeError):
                self.files = {}
        return self.files

    def tantivy_problem(self, directory: Path, attempt: int = 0) -> Problem | None:
        """Why the committed Tantivy index in ``directory`` cannot be trusted, or None; reads only the files
        not verified before."""
        known = self._load()
        try:
            names = tantivy_files(directory)
        except ValueError as e:
            return Problem("tantivy", f"the Tantivy index is damaged ({e})", REBUILD)
        current: dict[str, list[int]] = {}
        changed = False
        root = os.fspath(directory)
        for name in names:
            try:
                st = os.stat(os.path.join(root, name))  # not pathlib: half of this check's 1 ms a search was Path
            except FileNotFoundError:
                if attempt < 3 and name not in _names_or_empty(directory):
                    return self.tantivy_problem(directory, attempt + 1)  # a writer committed and collected it
                return Problem("tantivy", f"the Tantivy index is damaged ({name} is missing)", REBUILD)
            key = [st.st_size, st.st_mtime_ns]
            if known.get(name) != key:
                if not footer_ok(directory / name):
                    return Problem("tantivy", f"the Tantivy index is damaged ({name} fails its checksum)", REBUILD)
                changed = True
            current[name] = key
        if changed or set(current) != set(known):
            self.files = current
            self._save()
        return None

    def _save(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps({"tantivy": self.files}), "utf-8")
            os.replace(tmp, self.path)
