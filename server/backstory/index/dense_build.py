"""Second indexing phase: embed (commit, file) units into the usearch index, newest first.

It never blocks search (the keyword lanes answer from the catalogue meanwhile), runs in batches that are
each made durable (vectors saved, then the catalogue marks them), and can be cancelled between batches.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from ..search.passages import RECIPE, file_passage
from . import vectors
from .progress import Progress
from .store import RebuildNeeded, Store

BATCH = 64
SAVE_EVERY_SECONDS = float(os.environ.get("BACKSTORY_DENSE_SAVE_SECONDS", "20"))  # durability vs save cost


def dense_stamp(embedder: Any) -> dict[str, Any]:
    return {"model_id": embedder.model_id, "dim": int(embedder.dim), "recipe": RECIPE}


def check_stamp(store: Store, embedder: Any) -> None:
    """Vectors from another model or recipe must never be mixed with new ones."""
    manifest = store.read_manifest()
    stamp = manifest.get("dense")
    want = dense_stamp(embedder)
    if stamp is None:
        manifest["dense"] = want
        store.write_manifest(manifest)
    elif stamp != want:
        raise RebuildNeeded(
            f"the vectors were built with {stamp.get('model_id')} ({stamp.get('recipe')}), the current model is "
            f"{want['model_id']} ({want['recipe']}); run `backstory index --rebuild`"
        )


def _passages(store: Store, fids: list[int], no_messages: bool) -> list[str]:
    db = store.db
    marks = ",".join("?" * len(fids))
    files = {r["fid"]: r for r in db.execute(f"SELECT * FROM files WHERE fid IN ({marks})", fids)}
    excerpts: dict[int, list[str]] = {}
    syms: dict[int, list[str]] = {}
    for r in db.execute(f"SELECT fid, excerpt, symbols FROM hunks WHERE fid IN ({marks}) ORDER BY fid, idx", fids):
        excerpts.setdefault(r["fid"], []).append(r["excerpt"])
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
        out.append(file_passage(path, syms.get(fid, []), subjects.get(f["sha"]), excerpts.get(fid, [])))
    return out


def embed_pending(
    store: Store,
    embedder: Any,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Embed every file unit not yet embedded; returns how many were embedded. Caller holds the write lock."""
    check_stamp(store, embedder)
    no_messages = bool(store.read_manifest().get("options", {}).get("no_messages"))
    index = vectors.load(store.vectors_path, int(embedder.dim))
    db = store.db
    tombstones = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=-1")]
    if tombstones:
        vectors.remove(index, tombstones)
        vectors.save(index, store.vectors_path)
        with store.transaction() as tx:
            tx.executemany("DELETE FROM files WHERE fid=?", [(f,) for f in tombstones])
    todo = [
        r[0]
        for r in db.execute(
            "SELECT f.fid FROM files f JOIN commits c ON c.sha=f.sha"
            " WHERE f.embedded=0 AND c.state='indexed' ORDER BY f.author_time DESC, f.fid DESC"
        )
    ]
    total = len(todo)
    if progress:
        progress("dense", 0, total)
    done = 0
    unsaved: list[int] = []
    last_save = time.monotonic()

    def flush() -> None:
        nonlocal unsaved, last_save
        if not unsaved:
            return
        vectors.save(index, store.vectors_path)
        with store.transaction() as tx:
            tx.executemany("UPDATE files SET embedded=1 WHERE fid=? AND embedded=0", [(f,) for f in unsaved])
        unsaved = []
        last_save = time.monotonic()

    try:
        for start in range(0, total, BATCH):
            if cancel is not None and cancel.is_set():
                break
            fids = todo[start : start + BATCH]
            vecs = embedder.embed(_passages(store, fids, no_messages))
            vectors.upsert(index, fids, vecs)
            unsaved.extend(fids)
            done += len(fids)
            if progress:
                progress("dense", done, total)
            if time.monotonic() - last_save >= SAVE_EVERY_SECONDS:
                flush()
    finally:
        flush()
    return done
