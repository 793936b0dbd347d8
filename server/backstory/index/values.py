"""The catalogue's compressed values: commit bodies (``ZTEXT`` columns) and a file's hunk excerpts, and how they are
read back. How the bytes are compressed is :mod:`.packing`'s; what a value holds is this module's.

Importing it registers the ``ZTEXT`` converter, so every connection opened with ``PARSE_DECLTYPES`` reads those
columns back as text (:mod:`.store` imports it for that).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from . import packing


def pack_text(text: str, packer: packing.Packer | None = None) -> bytes:
    """How a ``ZTEXT`` column stores text: compressed UTF-8 (`packing`; commit bodies: 37.5 MB of git/git's
    messages, 22.5 MB with zlib, 15.3 MB with the index's dictionary). Every read gets text back through the
    converter registered below, so no reader changes (a column must be selected as is, not inside an
    expression, for its declared type to apply)."""
    return (packer or packing.ZLIB).pack("text", text.encode("utf-8", "surrogatepass"))


def unpack_text(data: bytes) -> str:
    try:
        return packing.unpack(data).decode("utf-8", "surrogatepass")
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"the index catalogue is damaged ({e}); run `backstory index --rebuild`") from None


def pack_excerpts(excerpts: Sequence[str], packer: packing.Packer | None = None) -> bytes | None:
    """How the ``excerpts`` table stores a file's hunk excerpts, in hunk order: one compressed value (`packing`)
    of their lengths (one line) and their texts, None for a file without hunks.

    Why one value a file and not one a hunk (as until schema 13): excerpts are the catalogue's largest column, and a
    hunk's excerpt alone (~600 bytes on git/git) is too short for zlib to find much to reuse: git/git's 408,000
    excerpts took 118 MB compressed one by one, 84 MB compressed a file at a time (249 MB raw). A reader of one
    hunk decompresses its file's (~1.8 KB raw on average), once for all the hunks of the file it reads
    (:func:`read_excerpts`)."""
    if not excerpts:
        return None
    head = " ".join(str(len(e)) for e in excerpts)
    return (packer or packing.ZLIB).pack("excerpts", f"{head}\n{''.join(excerpts)}".encode("utf-8", "surrogatepass"))


def unpack_excerpts(data: bytes) -> list[str]:
    """:func:`pack_excerpts`'s inverse; ``ValueError`` when ``data`` is not such a value (a damaged catalogue)."""
    try:
        text = packing.unpack(data).decode("utf-8", "surrogatepass")
        head, _, body = text.partition("\n")
        out: list[str] = []
        at = 0
        for n in map(int, head.split()):
            out.append(body[at : at + n])
            at += n
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a file's stored excerpts ({e})") from None
    if at != len(body):
        raise ValueError("not a file's stored excerpts (their lengths do not add up)")
    return out


def read_excerpts(db: sqlite3.Connection, fids: Iterable[int]) -> dict[int, list[str]]:
    """The stored excerpts of each of ``fids`` that has any (:func:`unpack_excerpts`; ``ValueError`` when one
    is damaged), in one query a few hundred files. Decompressed here, in Python, and not by an SQL function
    inside the query: the catalogue's connection is shared by the language server's threads, and SQLite
    calling back into Python while it holds the connection's lock deadlocked against a thread that held the
    interpreter's lock and asked SQLite for something (a hover and a history request, in the LSP tests)."""
    out: dict[int, list[str]] = {}
    todo = sorted(set(fids))
    for i in range(0, len(todo), 500):
        chunk = todo[i : i + 500]
        sql = f"SELECT fid, data FROM excerpts WHERE fid IN ({','.join('?' * len(chunk))})"
        for fid, data in db.execute(sql, chunk):
            out[int(fid)] = unpack_excerpts(data)
    return out


sqlite3.register_converter("ZTEXT", unpack_text)
