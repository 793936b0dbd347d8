"""The texts phase: the analysed text of each commit that lacks one (`commit_terms`), stored from the catalogue.

A long run's readers leave it out of the keyword phase (~15 % of their CPU on git/git: the keyword lanes are
complete sooner) and this phase computes it after the symbols phase, from the excerpts the catalogue holds and
with the names of the symbols just attached, so a row never needs rewriting. It also fills an index built
before the rows existed, and checks the rows an older version may have left behind (`commit_terms.STATE`).
Until a commit has its row, the search computes the same terms from the catalogue (`commit_terms.
from_catalogue`), so results are the same before and after; searches get faster.

Computing a row is pure Python (~0.5 ms a commit on git/git, 27-32 s for its 60,642 in one process), so two
processes compute them when there are many, each reading the catalogue itself (SQLite's WAL lets readers run
beside the writer); the writer stores each chunk as it comes back, in order, in a short transaction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Sequence
from dataclasses import replace
from pathlib import Path

from . import commit_terms
from .catalog import Catalog
from .commit_terms import DEFERRED, MISSING, STATE, STORE_ROWS, VERSION
from .packing import Packer
from .parallel import worker_pool, workers
from .progress import Progress
from .store import Store

log = logging.getLogger(__name__)

FILL_BATCH = 256  # commits a transaction
PARALLEL_FROM = 2_000  # missing rows from which reader processes compute them

_worker: dict[str, tuple[Catalog, Packer]] = {}


def defer(store: Store) -> None:
    """Say that commits about to be written come without their rows (a long run's readers leave them here)."""
    with store.transaction() as tx:
        store.set_state(tx, DEFERRED, "1")


def fill_missing(
    store: Store, catalog: Catalog, cancel: threading.Event | None = None, progress: Progress | None = None
) -> int:
    """Store the rows indexed commits lack (a long run's, or an index built before they existed), from the
    catalogue's excerpts, and unless the state says every stored row is current, bring every stored row's paths
    and names to what the catalogue says (rows stored without them, or by an older version's symbols phase),
    newest first, a short transaction per :data:`FILL_BATCH` commits so that a search reads the
    catalogue meanwhile and a cancelled run keeps what it stored. Returns how many rows were written."""
    if cancel is not None and cancel.is_set():
        return 0
    order = " ORDER BY c.commit_time DESC, c.sha"
    missing = [str(r[0]) for r in store.db.execute(f"SELECT c.sha {MISSING}{order}")]
    checked: list[str] = []
    if store.get_state(STATE) != VERSION:  # else every stored row is current
        stored = "FROM commits c JOIN commit_terms t ON t.sha = c.sha WHERE c.state = 'indexed'"
        checked = [str(r[0]) for r in store.db.execute(f"SELECT c.sha {stored}{order}")]
    total = len(missing) + len(checked)
    if total:
        log.info("storing or checking the analysed text of %d commits", total)
        if progress:
            progress("texts", 0, total)
    done = written = 0
    chunks = _chunks(store, catalog, missing, checked)
    try:
        for chunk, rows in chunks:
            with store.transaction() as tx:
                tx.executemany(STORE_ROWS, rows)
            done += chunk
            written += len(rows)
            if progress:
                progress("texts", done, total)
            if cancel is not None and cancel.is_set():
                return written  # what was stored stays; the next run stores the rest
    finally:
        chunks.close()  # stops the workers of a cancelled fill
    with store.transaction() as tx:
        store.set_state(tx, STATE, VERSION)
        store.set_state(tx, DEFERRED, "")
    return written


def _chunks(
    store: Store, catalog: Catalog, missing: list[str], checked: list[str]
) -> Generator[tuple[int, list[tuple[str, bytes]]], None, None]:
    """(commits looked at, rows to store) per chunk, in order: the missing rows (computed in reader processes
    when there are :data:`PARALLEL_FROM` of them or more), then the stored rows that need other names. An index
    without a dictionary for these rows yet (a long first run's readers left them all here) stores its first
    chunk, the newest commits', without one, then trains it on them (`packing`) for the rest."""
    chunks = [missing[i : i + FILL_BATCH] for i in range(0, len(missing), FILL_BATCH)]
    packer = store.packer()
    if chunks and "terms" not in packer.dictionaries:
        first = chunks.pop(0)
        yield len(first), _rows(catalog, first, packer)
        packer = store.packer(train=True)
    n = workers()
    if n > 1 and len(chunks) * FILL_BATCH >= PARALLEL_FROM:
        pool = worker_pool(n)
        try:
            futures = [pool.submit(_computed, str(store.path), c) for c in chunks]
            for c, f in zip(chunks, futures, strict=True):
                yield len(c), f.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        for c in chunks:
            yield len(c), _rows(catalog, c, packer)
    for i in range(0, len(checked), FILL_BATCH):
        c = checked[i : i + FILL_BATCH]
        yield len(c), _rechecked(store, catalog, c, packer)


def _rows(catalog: Catalog, shas: Sequence[str], packer: Packer) -> list[tuple[str, bytes]]:
    return [(sha, commit_terms.pack(commit_terms.from_catalogue(catalog, sha), packer)) for sha in shas]


def _rechecked(store: Store, catalog: Catalog, shas: Sequence[str], packer: Packer) -> list[tuple[str, bytes]]:
    """The stored rows among ``shas`` whose paths or names differ from the catalogue's, brought up to date."""
    out: list[tuple[str, bytes]] = []
    for sha in shas:
        row = store.db.execute("SELECT data FROM commit_terms WHERE sha=?", (sha,)).fetchone()
        try:
            terms = commit_terms.unpack(row[0])
        except ValueError:
            continue  # a damaged row: the search computes this commit's text from its hunks
        files = tuple(catalog.commit_paths(sha))
        names_ = commit_terms.names_of(catalog, sha)
        if terms.files != files or terms.names != names_:
            out.append((sha, commit_terms.pack(replace(terms, files=files, names=names_), packer)))
    return out


def _computed(store_path: str, shas: Sequence[str]) -> list[tuple[str, bytes]]:
    """A worker's rows for ``shas``, from its own connection to the catalogue (and its dictionaries)."""
    found = _worker.get(store_path)
    if found is None:
        store = Store(Path(store_path))
        found = _worker[store_path] = (Catalog.of(store), store.packer())
    return _rows(found[0], shas, found[1])
