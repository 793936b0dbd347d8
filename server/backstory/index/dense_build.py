"""Second indexing phase: embed (commit, file) units into the usearch index, newest first.

It never blocks search (the keyword lanes answer from the catalogue meanwhile), runs in batches that are
each made durable (vectors saved, then the catalogue marks them and stores their compressed token states in
the same transaction: :mod:`.unit_states`), and can be cancelled between batches.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import numpy as np

from ..models.states import MIN_FIT_TOKENS, STATES_RECIPE, StateCodec
from ..search.passages import RECIPE, file_passage
from . import unit_states, vectors
from .progress import Progress
from .store import RebuildNeeded, Store

#: Units per embedding call (and cancellation check): 256 measured ~5 % faster than 64 (texts sort into
#: batches of like length, fewer thread-pool start-ups) and takes ~2 s on 2 cores. Tests that kill the
#: phase between batches set smaller ones.
BATCH = int(os.environ.get("BACKSTORY_DENSE_BATCH", "256"))
SAVE_EVERY_SECONDS = float(os.environ.get("BACKSTORY_DENSE_SAVE_SECONDS", "20"))  # durability vs save cost


def dense_stamp(embedder: Any) -> dict[str, Any]:
    """What the vectors (and the stored token states) were made with; any difference is a rebuild verdict."""
    return {"model_id": embedder.model_id, "dim": int(embedder.dim), "recipe": RECIPE, "states": STATES_RECIPE}


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


def unit_passages(store: Store, fids: list[int], no_messages: bool) -> list[str]:
    """The dense recipe's text of each unit, in ``fids`` order: what its vector and stored states encode."""
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
    """Embed every file unit not yet embedded; returns how many were embedded. Caller holds the write lock.

    The same forward pass gives each unit's vector and its content-token states; the states are stored
    compressed with the index's codec. The codec is fitted on the first :data:`MIN_FIT_TOKENS` token states
    of the first run that sees that many; until then units are embedded without states, and a later run
    re-embeds them (a small history: a few dozen units) so that every unit ends up with states.
    """
    check_stamp(store, embedder)
    no_messages = bool(store.read_manifest().get("options", {}).get("no_messages"))
    index = vectors.load(store.vectors_path, int(embedder.dim))
    db = store.db
    unit_states.ensure_tables(db)
    codec = unit_states.load_codec(db, STATES_RECIPE)
    tombstones = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=-1")]
    if tombstones:
        vectors.remove(index, tombstones)
        vectors.save(index, store.vectors_path)
        with store.transaction() as tx:
            tx.executemany("DELETE FROM files WHERE fid=?", [(f,) for f in tombstones])
            unit_states.remove(tx, tombstones)
    if codec is None:  # units embedded before there was a codec have no states: embed them again
        with store.transaction() as tx:
            tx.execute("UPDATE files SET embedded=0 WHERE embedded=1")
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
    raw: dict[int, np.ndarray] = {}  # states waiting for the codec (first run only)
    encoded: dict[int, bytes] = {}
    new_codec = False
    last_save = time.monotonic()

    def flush() -> None:
        nonlocal unsaved, last_save, new_codec
        if not unsaved:
            return
        vectors.save(index, store.vectors_path)
        with store.transaction() as tx:
            if new_codec and codec is not None:
                unit_states.save_codec(tx, STATES_RECIPE, codec)
                new_codec = False
            unit_states.put(tx, [(f, encoded[f]) for f in unsaved if f in encoded])
            tx.executemany("UPDATE files SET embedded=1 WHERE fid=? AND embedded=0", [(f,) for f in unsaved])
        for f in unsaved:
            encoded.pop(f, None)
            raw.pop(f, None)
        unsaved = []
        last_save = time.monotonic()

    try:
        for start in range(0, total, BATCH):
            if cancel is not None and cancel.is_set():
                break
            fids = todo[start : start + BATCH]
            vecs, states = embedder.embed_with_states(unit_passages(store, fids, no_messages))
            vectors.upsert(index, fids, vecs)
            if codec is None:
                raw.update(zip(fids, states, strict=True))
                sample = [s for s in raw.values() if len(s)]
                if sum(len(s) for s in sample) >= MIN_FIT_TOKENS:
                    codec, new_codec = StateCodec.fit(np.concatenate(sample)), True
                    encoded.update((f, codec.encode(s)) for f, s in raw.items())
                    raw.clear()
            else:
                encoded.update((f, codec.encode(s)) for f, s in zip(fids, states, strict=True))
            unsaved.extend(fids)
            done += len(fids)
            if progress:
                progress("dense", done, total)
            if codec is not None and time.monotonic() - last_save >= SAVE_EVERY_SECONDS:
                flush()
    finally:
        flush()
    return done
