"""How the catalogue compresses its text values: zstd, with dictionaries trained on the index's own history.

Why: the catalogue's largest values are short texts (a file's hunk excerpts, ~1.8 KB raw on git/git; a commit's
body, ~450 bytes; a commit's analysed text, ~2 KB), each compressed alone so that any one reads back alone. Alone,
such a value repeats little of itself, so zlib found little to reuse: what repeats is across values (diff syntax,
the project's identifiers, the words of its messages, the analysed text's JSON). A zstd dictionary holds that,
trained once per index on its newest commits' values (:data:`SAMPLE_COMMITS`): on git/git excerpts 85 -> 71 MB,
bodies 22.5 -> 16.4 MB, analysed texts 50 -> 40 MB, for about zlib's CPU (docs/large-histories.md).

The format says itself: a value is either a zlib stream (every value before schema 15, and a value of a kind
without a dictionary yet: the values written before the index had :data:`MIN_COMMITS` commits, a short
history) or a zstd frame, with a checksum, naming its dictionary by id. The ids are derived from the
dictionary's bytes, so one id never means two dictionaries; a process decompresses with the dictionaries of
every catalogue it opened (:func:`open_catalogue` registers them; one trained later is looked up by id when
first met). Dictionaries are never replaced: a value written with one must stay readable.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path

import zstandard as zstd

log = logging.getLogger(__name__)

#: the kinds of value a dictionary is trained for: a file's excerpts, a commit's body, a commit's analysed text
KINDS = ("excerpts", "text", "terms")
#: a dictionary's size: 16 KB kept most of the gain on git/git, 112 KB added under 1 MB over 64
DICT_BYTES = 64 * 1024
#: zstd's level with a dictionary: on git/git's excerpts 3 -> 77.7 MB, 6 -> 71.0, 9 -> 69.3, 12 -> 67.9 MB, for
#: 1.0, 3.1, 5.3 and 10.4 s of CPU (zlib's level 6: 85.4 MB, 4.8 s)
LEVEL = 9
#: the newest commits a dictionary is trained on (their values are written before it exists: zlib), and how many
#: the catalogue must hold first: a first run's prelude (`build._prelude`) writes the newest 100 commits (git/git:
#: ~60 with hunks; 47 at its 40,000th commit) and its keyword phase trains on them before its readers start. On
#: git/git's values, trained on the newest 25 / 47 / 60 / 120 / 200 commits: excerpts 77.2 / 73.0 / 71.2 / 69.8 /
#: 69.8 MB, bodies 17.3 / 16.8 / 16.4 / 15.5 / 15.2 MB, analysed texts 42.5 / 40.5 / 39.6 / 39.0 / 39.1 MB (zlib:
#: 85.2, 22.4, 49.8). A dictionary is never replaced, so a thin first sample costs for good; waiting for a later
#: run would leave a whole first run's values on zlib
SAMPLE_COMMITS = 200
MIN_COMMITS = 20  # the training threshold (git/git's 40,000th commit's prelude had 47 commits with hunks)
#: values a kind's sample needs at least (zstd's trainer fails on a handful)
MIN_SAMPLES = 16

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_lock = threading.Lock()
_dictionaries: dict[int, zstd.ZstdCompressionDict] = {}  # by id: every dictionary this process has met
_sources: set[Path] = set()  # catalogues this process opened: where a dictionary not met yet is looked up
_local = threading.local()  # per thread: decompressors by dictionary id (a zstd context is not thread-safe)


class Packer:
    """Compression for one index: zstd with the dictionary of each kind that has one, zlib for the others. One
    per thread (a zstd context is not thread-safe): a reader process or the writer each make their own."""

    def __init__(self, dictionaries: Mapping[str, bytes] | None = None) -> None:
        self.dictionaries = dict(dictionaries or {})
        self._compressors: dict[str, zstd.ZstdCompressor] = {}
        for kind, data in self.dictionaries.items():
            d = _remember(data)
            self._compressors[kind] = zstd.ZstdCompressor(level=LEVEL, dict_data=d, write_checksum=True)

    def pack(self, kind: str, raw: bytes) -> bytes:
        compressor = self._compressors.get(kind)
        return zlib.compress(raw, 6) if compressor is None else compressor.compress(raw)


def unpack(data: bytes) -> bytes:
    """A value :meth:`Packer.pack` wrote (or zlib wrote, before dictionaries); ``ValueError`` when it is neither,
    or names a dictionary no catalogue opened in this process holds (a damaged catalogue)."""
    try:
        if data[:4] != ZSTD_MAGIC:
            return zlib.decompress(data)
        dict_id = zstd.get_frame_parameters(data).dict_id
        cache: dict[int, zstd.ZstdDecompressor] | None = getattr(_local, "decompressors", None)
        if cache is None:
            cache = _local.decompressors = {}
        decompressor = cache.get(dict_id)
        if decompressor is None:
            d = _dictionary(dict_id) if dict_id else None
            if dict_id and d is None:
                raise ValueError(f"it was compressed with dictionary {dict_id}, which the catalogue does not hold")
            decompressor = cache[dict_id] = zstd.ZstdDecompressor(dict_data=d) if d else zstd.ZstdDecompressor()
        return bytes(decompressor.decompress(data))
    except (zlib.error, zstd.ZstdError, TypeError) as e:
        raise ValueError(f"a stored value cannot be decompressed ({e})") from None


def open_catalogue(db: sqlite3.Connection, db_path: Path) -> None:
    """A catalogue this process opened: its dictionaries are registered, and a value naming a dictionary not met
    yet (one trained since, by another process) is looked up there."""
    with _lock:
        _sources.add(db_path.resolve())
    try:
        for (data,) in db.execute("SELECT data FROM dictionaries"):
            _remember(bytes(data))
    except sqlite3.Error:  # an older catalogue: no dictionaries
        pass


def load(db: sqlite3.Connection) -> dict[str, bytes]:
    """The catalogue's dictionaries by kind."""
    return {str(kind): bytes(data) for kind, data in db.execute("SELECT kind, data FROM dictionaries")}


def train(db: sqlite3.Connection, have: Mapping[str, bytes]) -> dict[str, bytes]:
    """Train a dictionary for each kind without one whose sample is large enough (the values of the newest
    :data:`SAMPLE_COMMITS` indexed commits with hunks, once the catalogue has :data:`MIN_COMMITS`), in ``db``'s
    open transaction; returns the new ones. A kind whose training fails stays on zlib and is tried again next
    run."""
    newest = [
        r[0]
        for r in db.execute(
            "SELECT sha FROM commits WHERE state='indexed' AND n_hunks > 0 ORDER BY commit_time DESC, sha LIMIT ?",
            (SAMPLE_COMMITS,),
        )
    ]
    if len(newest) < MIN_COMMITS:
        return {}
    marks = ",".join("?" * len(newest))
    queries = {
        "excerpts": f"SELECT e.data FROM excerpts e JOIN files f ON f.fid = e.fid WHERE f.sha IN ({marks})",
        "text": f"SELECT CAST(body AS BLOB) FROM commits WHERE sha IN ({marks})",  # as stored (not decompressed)
        "terms": f"SELECT data FROM commit_terms WHERE sha IN ({marks})",
    }
    made: dict[str, bytes] = {}
    for kind in KINDS:
        if kind in have:
            continue
        raw = []
        for (v,) in db.execute(queries[kind], newest):
            try:
                raw.append(unpack(v))
            except ValueError:  # a damaged value is left out of the sample (a search reports it where it is read)
                continue
        sample: list[bytes | bytearray | memoryview] = [s for s in sorted(raw) if s]  # in any order: the same
        if len(sample) < MIN_SAMPLES:
            continue
        try:
            trained = zstd.train_dictionary(DICT_BYTES, sample, dict_id=32768, level=LEVEL, threads=1).as_bytes()
        except zstd.ZstdError as e:
            log.info("no %s dictionary yet (%s); zlib meanwhile", kind, e)
            continue
        # the id in the header (bytes 4-8, little-endian) from the rest of the dictionary: 1-32767 are reserved
        dict_id = 32768 + int.from_bytes(hashlib.sha256(trained[8:]).digest()[:4], "big") % (2**31 - 32768)
        made[kind] = trained[:4] + dict_id.to_bytes(4, "little") + trained[8:]
        db.execute("INSERT INTO dictionaries(kind, id, data) VALUES (?,?,?)", (kind, dict_id, made[kind]))
    return made


def _remember(data: bytes) -> zstd.ZstdCompressionDict:
    d = zstd.ZstdCompressionDict(data)
    with _lock:
        return _dictionaries.setdefault(d.dict_id(), d)


def _dictionary(dict_id: int) -> zstd.ZstdCompressionDict | None:
    with _lock:
        found = _dictionaries.get(dict_id)
        sources = sorted(_sources)
    if found is not None:
        return found
    for path in sources:
        try:
            con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
            try:
                row = con.execute("SELECT data FROM dictionaries WHERE id=?", (dict_id,)).fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            continue
        if row is not None:
            return _remember(bytes(row[0]))
    return None


ZLIB = Packer()  # every value of an index without dictionaries, and of a kind without one
