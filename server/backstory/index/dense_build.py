"""Second indexing phase: embed (commit, file) units into the usearch index, newest first.

It never blocks search (the keyword lanes answer from the catalogue meanwhile), runs in batches that are
each made durable (vectors saved, then the catalogue marks them and stores their compressed token states in
the same transaction: :mod:`.unit_states`), and can be cancelled between batches.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from typing import Any

import numpy as np

from ..models.passages import RECIPE
from ..models.states import MIN_FIT_TOKENS, REQUANTIZABLE, STATES_RECIPE, StateCodec
from . import integrity, message_vectors, unit_states, vectors
from .catalog import Catalog
from .progress import Progress
from .store import COMPACT_PENDING, Store, StoreError

#: Units per embedding call (and cancellation check): 256 measured ~5 % faster than 64 (texts sort into
#: batches of like length, fewer thread-pool start-ups) and takes ~2 s on 2 cores.
DEFAULT_BATCH = 256
#: The codec is fitted on a prefix of units whose length is a multiple of this (see :func:`fit_cut`): the
#: default batch, so indexes built with the default batch keep the codec they always had.
FIT_STEP = 256
SAVE_EVERY_SECONDS = float(os.environ.get("BACKSTORY_DENSE_SAVE_SECONDS", "20"))  # durability vs save cost

log = logging.getLogger("backstory.index")


def batch_size() -> int:
    """``BACKSTORY_DENSE_BATCH`` (tests kill the phase between small batches), else :data:`DEFAULT_BATCH`."""
    raw = os.environ.get("BACKSTORY_DENSE_BATCH", "").strip()
    if not raw:
        return DEFAULT_BATCH
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"BACKSTORY_DENSE_BATCH must be a whole number of file units ≥ 1, got {raw!r}")
    return int(raw)


def dense_stamp(embedder: Any) -> dict[str, Any]:
    """What the vectors (and the stored token states) were made with; a difference re-embeds, or re-encodes the
    stored states when only their step changed (:func:`restamp`)."""
    return {"model_id": embedder.model_id, "dim": int(embedder.dim), "recipe": RECIPE, "states": STATES_RECIPE}


def restamp(store: Store, embedder: Any) -> None:
    """Make the index's vectors belong to ``embedder``, dropping (with a logged warning) any made otherwise.

    Vectors (and stored token states) made with another model, window or recipe must never be mixed with new
    ones. They are dropped and every file unit is embedded again; the keyword index is kept, since it does not
    depend on the model (upgrading backstory's optimized-model recipe only re-embeds). Crash-safe in this
    order: units marked unembedded and states dropped in one transaction, then the vector file removed, then
    the new stamp written — an interruption anywhere leaves the old stamp, so the next run starts over. When
    only the stored states' step changed, the vectors stay and the states are re-encoded in place.
    """
    manifest = store.read_manifest()
    stamp = manifest.get("dense")
    want = dense_stamp(embedder)
    if stamp == want:
        _compact_if_pending(store)
        return
    if stamp is not None and not _states_step_changed(store, stamp, want):
        log.warning(
            "the vectors were built with %s (%s; states %s), the current model is %s (%s; states %s): "
            "embedding every file unit again (the keyword index is kept)",
            stamp.get("model_id"), stamp.get("recipe"), stamp.get("states"),
            want["model_id"], want["recipe"], want["states"],
        )  # fmt: skip
        unit_states.ensure_tables(store.db)
        with store.transaction() as tx:  # tombstones (embedded=-1) stay: embed_pending removes them as always
            tx.execute("UPDATE files SET embedded=0 WHERE embedded=1")
            tx.execute("DELETE FROM unit_states")
            tx.execute("DELETE FROM state_codec")
            message_vectors.clear(tx)
            integrity.forget_vectors(tx)
        store.vectors_path.unlink(missing_ok=True)
    manifest["dense"] = want
    store.write_manifest(manifest)
    _compact_if_pending(store)


def _states_step_changed(store: Store, stamp: dict[str, Any], want: dict[str, Any]) -> bool:
    """When the stamps differ only in the stored states' step (:data:`~backstory.models.states.REQUANTIZABLE`):
    every stored row re-encoded at the current step, in place, from the codes it holds, then the codec filed
    under the current recipe with a compaction pending (:func:`_compact_if_pending`); True when the caller may
    write the new stamp. Embedding git/git's 136,000 units again would take 10-30 minutes; this takes seconds and
    needs no model (git/git: 7.8 s). Crash-safe: until the codec's recipe changes (one transaction, after every
    row), the next run finds the old recipe and re-encodes every row again, which changes nothing twice; after
    it, the next run only writes the stamp. A damaged codec, or rows without one, is embedded again as before."""
    same = {k: v for k, v in stamp.items() if k != "states"} == {k: v for k, v in want.items() if k != "states"}
    if not same or stamp.get("states") not in REQUANTIZABLE:
        return False
    db = store.db
    unit_states.ensure_tables(db)
    recipe = unit_states.codec_recipe(db)
    if recipe == STATES_RECIPE:  # killed after filing the codec, before the stamp
        return True
    if recipe is None:  # a history too small for a codec has no rows; rows without one are damage
        return not unit_states.has_rows(db)
    if recipe != stamp["states"]:
        return False
    try:
        codec = unit_states.load_codec(db, recipe)
    except StoreError as e:
        log.warning("%s: embedding every file unit again", e)
        return False
    assert codec is not None
    started = time.monotonic()
    done, damaged = unit_states.requantize(store, codec)
    with store.transaction() as tx:
        unit_states.save_codec(tx, STATES_RECIPE, codec)
        store.set_state(tx, COMPACT_PENDING, "1")
    log.info(
        "stored the token states of %d unit(s) at the current step in %.1f s (%d damaged row(s) left as they were)",
        done, time.monotonic() - started, damaged,
    )  # fmt: skip
    return True


def _compact_if_pending(store: Store) -> None:
    """Compact the catalogue once after the stored states or message vectors shrank (:func:`_states_step_changed`,
    :func:`message_vectors.check_recipe`): rows shrink inside their pages, which SQLite does not give back
    (git/git: 682 -> 528 MB, 8-11 s with the states' re-encoding).
    A compaction that fails (no room for SQLite's temporary copy) is logged and tried again by the next run."""
    if store.get_state(COMPACT_PENDING) != "1":
        return
    started = time.monotonic()
    try:
        truncated = store.compact()
    except sqlite3.Error as e:
        log.warning("could not compact the catalogue (%s); the next index run tries again", e)
        return
    with store.transaction() as tx:
        store.set_state(tx, COMPACT_PENDING, "0")
    log.info(
        "compacted the catalogue in %.1f s%s", time.monotonic() - started,
        "" if truncated else " (a reader kept its write-ahead log; it is truncated at a later checkpoint)",
    )  # fmt: skip


def open_vectors(store: Store, dim: int) -> tuple[Any, integrity.Problem | None]:
    """The vector index, repaired if it must be: a missing, damaged or unreadable file (or, in an index from
    before stamps, one that lacks a unit the catalogue claims) is dropped and its units are marked for
    embedding again — their token states stay, they do not depend on the file. Caller holds the write lock."""
    db = store.db
    path = store.vectors_path
    claimed = int(db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0])
    problem = integrity.vectors_problem(db, path, claimed)
    index = None
    if problem is None:
        try:
            index = vectors.load(path, dim)
        except (RuntimeError, ValueError) as e:
            what = f"the vector file {path.name} is unreadable ({e})"
            problem = integrity.Problem("vectors", what, integrity.REINDEX)
    if index is not None and problem is None and claimed and not integrity.has_stamp(db):
        fids = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=1")]
        lost = sum(1 for f in fids if not index.contains(f))
        if lost:
            what = f"the vector file {path.name} lacks {lost:,} of the {claimed:,} embedded file units"
            problem = integrity.Problem("vectors", what, integrity.REINDEX)
        else:
            with store.transaction() as tx:
                integrity.stamp_current(tx, path)
    if problem is not None:
        log.warning("%s: embedding the %d file unit(s) again", problem.what, claimed)
        with store.transaction() as tx:
            tx.execute("UPDATE files SET embedded=0 WHERE embedded=1")
            integrity.forget_vectors(tx)
        path.unlink(missing_ok=True)
        index = vectors.new_index(dim)
    elif index is not None and vectors.stored_as(index) != vectors.DTYPE:
        index = _convert(store, index)
    assert index is not None
    return index, problem


def _convert(store: Store, index: Any) -> Any:
    """Rewrite a vector file saved with another scalar kind (float32, before float16) as :data:`vectors.DTYPE`,
    adding the vectors in a fresh build's order (newest unit first), so the graph is a fresh build's."""
    was = vectors.stored_as(index)
    order = [
        r[0] for r in store.db.execute("SELECT fid FROM files WHERE embedded=1 ORDER BY author_time DESC, fid DESC")
    ]
    log.info("storing the %d vectors as %s instead of %s (once)", len(index), vectors.DTYPE, was)
    converted = vectors.convert(index, order)
    _save(store, converted)
    with store.transaction() as tx:
        integrity.claim_vectors(tx)
    return converted


def _save(store: Store, index: Any) -> None:
    """Save the vector file, its stamp recorded as expected before it is renamed into place (see integrity)."""
    vectors.save(index, store.vectors_path, lambda tmp: integrity.expect_vectors(store.db, integrity.file_stamp(tmp)))


def unit_passages(store: Store, fids: list[int], no_messages: bool) -> list[str]:
    """The dense recipe's text of each unit, in ``fids`` order: what its vector and stored states encode."""
    return Catalog.of(store).unit_passages(fids, no_messages)


def fit_cut(counted: list[int], banked: int, total: int) -> int | None:
    """How many of this run's units the codec is fitted on (with the stateless ones), once that is known.

    The fit takes the first multiple of :data:`FIT_STEP` units (or all ``total``) whose content tokens, with the
    ``banked`` ones of units embedded before, reach :data:`MIN_FIT_TOKENS`; ``counted`` holds the tokens of the
    units embedded so far. Fixed steps make the codec (and so every MaxSim score) the same whatever
    ``BACKSTORY_DENSE_BATCH`` is: the fit used to take whatever the batch that crossed the threshold held."""
    seen = banked
    for cut in [*range(FIT_STEP, total, FIT_STEP), total]:
        if cut > len(counted):
            return None
        seen = banked + sum(counted[:cut])
        if seen >= MIN_FIT_TOKENS:
            return cut
    return None


def embed_pending(
    store: Store,
    embedder: Any,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Embed every file unit not yet embedded; returns how many were embedded. Caller holds the write lock.

    Each unit is embedded once. The same forward pass gives its vector and its content-token states, which
    are stored compressed with the index's codec. The codec (a PCA basis) is fitted once per index and kept
    forever, so it waits for :data:`MIN_FIT_TOKENS` token states: fitted on a few passages' words, its axes
    would not span the words of the history still to come. Until then (a small history) units are marked
    embedded *without* stored states, and the MaxSim rerank runs the model over the ones it needs, scoring
    uncompressed states (:meth:`backstory.search.rerank.Rerank._units`, as it always did for them). We chose this over
    fitting a smaller codec on what there is: that would need either fewer axes than the stamped recipe says
    or axes fitted on too few tokens, and a refit (re-encoding every unit) as the history grows.

    When a later run brings the token count of the stateless units (counted with the tokenizer alone, no
    forward pass) plus its new ones to the threshold, the codec is fitted on all of them, oldest runs
    included, in the order a fresh build embeds them (newest first), and the stateless units' states are
    backfilled: one forward pass over fewer than :data:`MIN_FIT_TOKENS` tokens' worth of units, once.
    """
    batch = batch_size()
    restamp(store, embedder)
    no_messages = bool(store.read_manifest().get("options", {}).get("no_messages"))
    db = store.db
    unit_states.ensure_tables(db)
    index, _problem = open_vectors(store, int(embedder.dim))
    codec = unit_states.load_codec(db, STATES_RECIPE)
    tombstones = [r[0] for r in db.execute("SELECT fid FROM files WHERE embedded=-1")]
    if tombstones:
        vectors.remove(index, tombstones)
        _save(store, index)
        with store.transaction() as tx:
            tx.executemany("DELETE FROM files WHERE fid=?", [(f,) for f in tombstones])
            unit_states.remove(tx, tombstones)
            integrity.claim_vectors(tx)
    rows = db.execute(
        "SELECT f.fid, f.author_time FROM files f JOIN commits c ON c.sha=f.sha"
        " WHERE f.embedded=0 AND f.parsed>=0 AND c.state='indexed' ORDER BY f.author_time DESC, f.fid DESC"
    ).fetchall()
    todo = [r[0] for r in rows]
    order = {r[0]: (-r[1], -r[0]) for r in rows}  # a fresh build's embedding order: the codec's sample order
    stateless: list[int] = []  # embedded before there was a codec: no stored states yet
    banked = 0  # their content tokens
    if codec is None and todo:
        for fid, when in db.execute(
            "SELECT f.fid, f.author_time FROM files f LEFT JOIN unit_states s ON s.fid=f.fid"
            " WHERE f.embedded=1 AND s.fid IS NULL ORDER BY f.author_time DESC, f.fid DESC"
        ):
            stateless.append(fid)
            order[fid] = (-when, -fid)
        for start in range(0, len(stateless), batch):
            chunk = stateless[start : start + batch]
            banked += sum(embedder.count_content_tokens(unit_passages(store, chunk, no_messages)))
    total = len(todo)
    if progress:
        progress("dense", 0, total)
    done = 0
    unsaved: list[int] = []
    backfilled: list[int] = []  # stateless units whose states wait for the next flush
    raw: dict[int, np.ndarray] = {}  # states waiting for the codec
    counted: list[int] = []  # content tokens of each unit of ``todo`` embedded so far, in order
    encoded: dict[int, bytes] = {}
    new_codec = False
    last_save = time.monotonic()

    def flush() -> None:
        nonlocal unsaved, backfilled, last_save, new_codec
        if not unsaved and not backfilled:
            return
        _save(store, index)
        with store.transaction() as tx:
            integrity.claim_vectors(tx)
            if new_codec and codec is not None:
                unit_states.save_codec(tx, STATES_RECIPE, codec)
                new_codec = False
            unit_states.put(tx, [(f, encoded[f]) for f in backfilled + unsaved if f in encoded])
            tx.executemany("UPDATE files SET embedded=1 WHERE fid=? AND embedded=0", [(f,) for f in unsaved])
        for f in backfilled + unsaved:
            encoded.pop(f, None)
            raw.pop(f, None)
        unsaved, backfilled = [], []
        last_save = time.monotonic()

    try:
        for start in range(0, total, batch):
            if cancel is not None and cancel.is_set():
                break
            fids = todo[start : start + batch]
            vecs, states = embedder.embed_with_states(unit_passages(store, fids, no_messages))
            vectors.upsert(index, fids, vecs)
            if codec is None:
                raw.update(zip(fids, states, strict=True))
                counted.extend(len(s) for s in states)
                cut = fit_cut(counted, banked, total)
                if cut is not None:
                    for at in range(0, len(stateless), batch):
                        chunk = stateless[at : at + batch]
                        past = embedder.token_states(unit_passages(store, chunk, no_messages), content_only=True)
                        raw.update(zip(chunk, past, strict=True))
                    fitted = [*stateless, *todo[:cut]]
                    sample = [raw[f] for f in sorted(fitted, key=order.__getitem__) if len(raw[f])]
                    codec, new_codec = StateCodec.fit(np.concatenate(sample)), True
                    encoded.update((f, codec.encode(s)) for f, s in raw.items())
                    raw.clear()
                    backfilled, stateless = stateless, []
                    if backfilled:
                        log.info("stored token states of %d unit(s) embedded before the codec", len(backfilled))
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
    if not no_messages and not (cancel is not None and cancel.is_set()):
        embed_messages(store, embedder, progress=progress, cancel=cancel)
    return done


def embed_messages(
    store: Store,
    embedder: Any,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> int:
    """Embed the message (subject + body) of every indexed non-merge commit that has none yet, for the
    ``message_dense`` lane (:mod:`.message_vectors`); returns how many. Caller holds the write lock.

    Runs after the file units (:func:`embed_pending` calls it), in batches that are each one transaction
    (the rows are the vectors and the "done" mark at once), cancellable between batches. An index without
    messages has none: it returns 0. Rows of commits no longer indexed are deleted first.
    """
    if store.read_manifest().get("options", {}).get("no_messages"):
        return 0
    db = store.db
    message_vectors.ensure_tables(db)
    message_vectors.check_recipe(db)
    _compact_if_pending(store)
    with store.transaction() as tx:
        message_vectors.purge_orphans(tx)
    todo = message_vectors.pending(db)
    batch = batch_size()
    if progress and todo:
        progress("messages", 0, len(todo))
    done = 0
    for start in range(0, len(todo), batch):
        if cancel is not None and cancel.is_set():
            break
        chunk = todo[start : start + batch]
        vecs = embedder.embed([message_vectors.message_text(subject, body) for _sha, subject, body in chunk])
        with store.transaction() as tx:
            message_vectors.put(
                tx, [(sha, message_vectors.encode(v)) for (sha, _s, _b), v in zip(chunk, vecs, strict=True)]
            )
        done += len(chunk)
        if progress:
            progress("messages", done, len(todo))
    return done
