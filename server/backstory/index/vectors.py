"""The usearch HNSW side of the store: one vector per (commit, file) unit, keyed by the catalogue's ``fid``.

Saved atomically (temp file + rename) before the catalogue marks units as embedded, so after a crash the
catalogue never claims a vector that is not on disk; vectors the catalogue does not claim are overwritten.

Stored as float16 (:data:`DTYPE`): 917 bytes a vector with its graph links instead of float32's 1,684; git/git's
136,013 units took 119 MB instead of 219 (the index's largest file). The rounding (~1e-4 on a cosine) is below
what ranking can see: the development set ranked the same to four places (docs/large-histories.md). A file
saved as float32 by an older version still loads (usearch reads the kind from the file) and the indexer
rewrites it once (:func:`convert`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime  # noqa: F401  # must be loaded before usearch: the reverse order segfaults (usearch 2.26, ort 1.31)
from usearch.index import Index

DTYPE = "f16"
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128


def new_index(dim: int) -> Index:
    return Index(
        ndim=dim,
        metric="cos",
        dtype=DTYPE,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


def load(path: Path, dim: int, *, view: bool = False) -> Index:
    """Open the saved index (memory-mapped when ``view``), or a new empty one when there is no file yet."""
    index = new_index(dim)
    if path.exists():
        if view:
            index.view(str(path))
        else:
            index.load(str(path))
        if index.ndim != dim:
            raise ValueError(f"vector index has dimension {index.ndim}, expected {dim}")
    return index


def stored_as(index: Index) -> str:
    """The scalar kind the index holds (``"f16"``, ``"f32"``, ...): a loaded file keeps the kind it was saved with."""
    return str(index.dtype).rsplit(".", 1)[-1].lower()


def convert(index: Index, order: Sequence[int]) -> Index:
    """A new :data:`DTYPE` index with ``index``'s vectors, added in ``order`` (the keys it holds, in the order a
    fresh build adds them, so the graph is the one a fresh build makes); keys it lacks are skipped."""
    out = new_index(int(index.ndim))
    keys = [k for k in order if index.contains(k)]
    for start in range(0, len(keys), 4096):
        chunk = np.asarray(keys[start : start + 4096], dtype=np.uint64)
        out.add(chunk, np.asarray(index.get(chunk), dtype=np.float32), threads=1)
    return out


def save(index: Index, path: Path, before_replace: Callable[[Path], None] | None = None) -> None:
    """Write the index to a temporary file, make it durable, call ``before_replace`` with it (the writer records
    its stamp), then rename it into place."""
    tmp = path.with_suffix(".tmp")
    index.save(str(tmp))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    if before_replace is not None:
        before_replace(tmp)
    os.replace(tmp, path)


def upsert(index: Index, keys: Sequence[int], vectors: np.ndarray) -> None:
    """Add vectors, replacing any left by an interrupted run under the same keys (single thread: deterministic)."""
    arr = np.asarray(keys, dtype=np.uint64)
    present = [k for k in arr.tolist() if index.contains(k)]
    if present:
        index.remove(np.asarray(present, dtype=np.uint64))
    index.add(arr, vectors.astype(np.float32, copy=False), threads=1)


def remove(index: Index, keys: Sequence[int]) -> None:
    present = [k for k in keys if index.contains(k)]
    if present:
        index.remove(np.asarray(present, dtype=np.uint64))


def search(index: Index, query: np.ndarray, count: int) -> list[tuple[int, float]]:
    """(key, cosine similarity) best first; ties by key for determinism."""
    if len(index) == 0:
        return []
    m = index.search(query.astype(np.float32), count, threads=1, exact=False)
    hits = [(int(k), 1.0 - float(d)) for k, d in zip(m.keys.tolist(), m.distances.tolist(), strict=False)]
    hits.sort(key=lambda h: (-round(h[1], 6), h[0]))
    return hits


def exact_search(index: Index, keys: Sequence[int], query: np.ndarray, count: int) -> list[tuple[int, float]]:
    """Brute-force cosine over an allowed key set: how filters apply to the dense lane without losing k."""
    present = [k for k in keys if index.contains(k)]
    if not present:
        return []
    mat = np.asarray(index.get(np.asarray(present, dtype=np.uint64)), dtype=np.float32)
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
    sims = mat @ (query / max(float(np.linalg.norm(query)), 1e-12))
    order = sorted(range(len(present)), key=lambda i: (-round(float(sims[i]), 6), present[i]))[:count]
    return [(present[i], float(sims[i])) for i in order]
