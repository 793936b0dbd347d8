"""The message lane's index: one Tantivy document per commit. The main index's hunk documents carry no message.

Why: carrying each commit's message on every hunk's document (git/git: 408,000 copies of 60,000 messages) made
the message field about a third of the main index's postings (27 MB of 87 on git/git) and of its writer's
work, made searching it the largest step of the keyword lanes (~2 ms of a ~23 ms search), and counted a big
commit's words many times in their document frequency. Here each message is one document (~0.45 ms a search
on git/git), and each commit stands in the lane for its hunks (`search.lanes.commit_lane`).

It is the only home of the message lane, so it is written in step with the main index: each batch of the
keyword phase adds its commits' documents right after the main index commits their hunks, and the same
catalogue transaction that marks the commits indexed records the index as standing for them (:class:`Batches`;
a search never waits for a later phase to find a commit by its message). Purged commits are deleted with the
purge (:func:`delete`). A document also holds what the search filters read, per commit (its author and time,
every path and language of its files), so a filtered search's message lane is this index's too.

The state key holds the next hunk id and the number of indexed commits it was brought up to (:func:`current`).
Whenever it is not current at a run's start (a run killed between the two commits, a purge, a damaged file, a
directory deleted), the run writes no documents with its batches and brings it up to date from the catalogue
at its end (:func:`sync`: the commits written since, found by their hunk ids; all of them again when its count
disagrees with the catalogue's, its files fail their checksums or it cannot be opened; git/git: ~10 s). A
search meanwhile reads what it holds (a document of a commit not indexed finds no hunks and is dropped; a
commit it lacks is not found by its message), and says when there is none to read.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tantivy

from . import integrity
from .analyzer import ANALYZER_NAME, code_text, query_terms
from .progress import Progress
from .store import MESSAGES_VERIFIED, Store
from .text_index import LANE_TOP, add_filter_fields, index_exists, lane_query, open_index, reading_tantivy, top_hits

log = logging.getLogger(__name__)

#: the state key and the form of its value, ``VERSION:<next hunk id>:<indexed commits>`` when brought up to date
STATE, VERSION = "message_index", "2"
#: hunks a document records: the length of the run of ids its commit's hunks start with, at most a lane's length
MAX_HUNKS = LANE_TOP
ADD_BATCH = 500  # documents between cancellation checks and progress reports (and SQL parameters)

# indexed commits with hunks: what the index must hold one document for each of
_INDEXED = "SELECT COUNT(*) FROM commits WHERE state = 'indexed' AND n_hunks > 0"
# every indexed commit: what a purge lowers (an index of the state column answers it: ~2 ms on git/git)
_ALL_INDEXED = "SELECT COUNT(*) FROM commits WHERE state = 'indexed'"


def build_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("uid", stored=False, indexed=False, fast=True)  # the commit's first hunk
    sb.add_unsigned_field("hunks", stored=False, indexed=False, fast=True)  # its run of ids from there (capped)
    sb.add_text_field("sha", stored=False, tokenizer_name="raw", index_option="basic")
    # as the main index's lanes: the same analyzer and statistics, so the same BM25 formula
    sb.add_text_field("message", stored=False, tokenizer_name=ANALYZER_NAME, index_option="freq")
    add_filter_fields(sb)  # what the search filters read, under the main index's names and types
    return sb.build()


def open_messages(directory: Path, *, create: bool) -> tantivy.Index:
    """Open (or create) the message index; Tantivy raises on a damaged one."""
    return open_index(directory, create=create, schema=build_schema())


def _stamp(store: Store) -> str:
    """What the catalogue is now, as far as the message index cares: the next hunk id (every run that adds
    commits reserves ids) and how many commits are indexed (every purge lowers it, an older version's too)."""
    next_uid = int(store.get_state("next_uid") or 1)
    return f"{VERSION}:{next_uid}:{int(store.db.execute(_ALL_INDEXED).fetchone()[0])}"


def current(store: Store) -> bool:
    """Whether the message index stands for exactly the catalogue's indexed commits: it was brought up to date
    when the catalogue was as it is now (:func:`_stamp`; ~2 ms on git/git, so a search's engine asks again
    only when the catalogue changed)."""
    value = store.get_state(STATE)
    return value is not None and value == _stamp(store)


def damaged(store: Store, check: integrity.Verified | None = None) -> bool:
    """Whether a committed file of the message index fails its checksum. Tantivy aborts the whole process when
    a writer meets a damaged segment (a panic in its merge threads, which no caller can catch), so neither a
    writer nor a search opens one; each file is read once, then known by its size and time
    (`integrity.Verified`)."""
    check = check or verified(store)
    return check.tantivy_problem(store.messages_path) is not None


def verified(store: Store) -> integrity.Verified:
    """The message index's own record of checked files (a long-lived reader keeps one: it is read once)."""
    return integrity.Verified(store.path, MESSAGES_VERIFIED)


def built(store: Store) -> bool:
    """Whether this version's message index was ever built for the store (then bringing it up to date is
    adding the few commits written since, not reading every message)."""
    value = store.get_state(STATE)
    return value is not None and value.split(":")[0] == VERSION and index_exists(store.messages_path)


def pending(store: Store) -> int:
    """Indexed commits the message index does not stand for yet: all of them until it is built (or when it is
    damaged), 0 while it is current, else how many more commits the catalogue has (at least 1: it changed)."""
    sound = built(store) and not damaged(store)
    if sound and current(store):
        return 0
    indexed = int(store.db.execute(_INDEXED).fetchone()[0])
    if not sound:
        return indexed
    try:
        with reading_tantivy():
            index = open_messages(store.messages_path, create=False)
            held = int(index.searcher().num_docs)
    except Exception:
        return indexed
    return max(indexed - held, 1)


@dataclass(frozen=True, slots=True)
class CommitDoc:
    """One commit's document: its first hunk's id and the run of ids from there (capped at :data:`MAX_HUNKS`),
    its message as the analyzer reads it (`analyzer.code_text`), and what the filters read."""

    sha: str
    uid: int
    hunks: int
    message: str
    paths: Sequence[str]
    languages: Sequence[str]
    author: str  # "name <email>", lower-cased, as the main index has it
    time: int  # author time


def commit_doc(
    sha: str, uid: int, hunks: int, message: str, files: Iterable[tuple[str, str, str | None]], author: str, when: int
) -> CommitDoc:
    """A commit's document from its ``files`` (path, old path, language) and author ("name <email>"), the way
    the main index's hunk documents have them (the keyword phase and :func:`sync` both build them here)."""
    files = list(files)
    return CommitDoc(
        sha=sha, uid=uid, hunks=hunks, message=message,
        paths=list(dict.fromkeys(p for path, old, _lang in files for p in (path, old))),
        languages=sorted({lang or "" for _p, _o, lang in files}), author=author.lower(), time=int(when),
    )  # fmt: skip


def _add_doc(writer: tantivy.IndexWriter, d: CommitDoc) -> None:
    """Replace the commit's document (a killed run may have left one)."""
    writer.delete_documents_by_term("sha", d.sha)
    doc = tantivy.Document()
    doc.add_unsigned("uid", d.uid)
    doc.add_unsigned("hunks", min(d.hunks, MAX_HUNKS))
    doc.add_text("sha", d.sha)
    doc.add_text("message", d.message)
    for p in d.paths:
        doc.add_text("path_raw", p)
    for lang in d.languages:
        doc.add_text("language", lang)
    doc.add_text("author", d.author)
    doc.add_integer("time", d.time)
    writer.add_document(doc)


class Batches:
    """The message index kept in step with the keyword phase's batches (see the module's docstring).

    While the index is current at the start (:meth:`start`), each batch's documents are added and committed right
    after the main index's (:meth:`add`), and the transaction that marks the batch's commits indexed records the
    index as current (:meth:`mark`). If it is not, or a write fails, nothing is recorded (the index is then not
    current) and the run's closing :func:`sync` brings it up to date from the catalogue."""

    def __init__(self, store: Store, in_step: bool) -> None:
        self.store = store
        self.in_step = in_step

    @classmethod
    def start(cls, store: Store, cancel: threading.Event | None = None) -> Batches:
        """In step when the index stands for the catalogue now (an empty catalogue's is made here: nothing to
        read). One that is missing, damaged or behind is left to the run's closing :func:`sync`, which reports
        its own phase: a repair here would report it before the history phase, which editors read as the
        history being done."""
        if not current(store) and int(store.db.execute(_ALL_INDEXED).fetchone()[0]) == 0:
            sync(store, cancel)
        return cls(store, current(store) and not damaged(store))

    def add(self, docs: Sequence[CommitDoc]) -> None:
        if not self.in_step or not docs:
            return
        try:
            index = open_messages(self.store.messages_path, create=False)
            writer = index.writer(heap_size=15_000_000, num_threads=1)
            try:
                for d in docs:
                    _add_doc(writer, d)
                writer.commit()
            finally:
                writer.wait_merging_threads()
        except Exception as e:  # derived data: the run's closing sync adds what is missing
            log.warning("the message index could not add a batch (%s); it is brought up to date at the end", e)
            self.in_step = False

    def mark(self, db: sqlite3.Connection) -> None:
        """In the transaction that marks the batch's commits indexed (and on ``db``, the store's connection)."""
        if self.in_step:
            self.store.set_state(db, STATE, _stamp(self.store))


@dataclass(frozen=True, slots=True)
class MessageHit:
    """A commit the message lane found: its first hunk's id, the run of ids its hunks start with, its score."""

    uid: int
    hunks: int
    score: float

    def hunk_uids(self) -> range:
        return range(self.uid, self.uid + self.hunks)


def search(
    index: tantivy.Index,
    searcher: tantivy.Searcher,
    text: str,
    limit: int = LANE_TOP,
    filters: tantivy.Query | None = None,
) -> list[MessageHit]:
    """The best ``limit`` commits by BM25 of their message (the query's terms as the message lane takes them:
    change verbs kept), ties by first hunk id; ``filters``: `text_index.filter_query` over this index's schema
    (a commit passes when its author and time do and any of its files' paths and languages do)."""
    q = lane_query(index.schema, "message", query_terms(text, drop_change_verbs=False))
    if q is None:
        return []
    if filters is not None:
        q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q), (tantivy.Occur.Must, filters)])

    def keys(addresses: list[tantivy.DocAddress]) -> list[tuple[int, int] | None]:
        firsts = searcher.fast_field_values("uid", addresses)
        runs = searcher.fast_field_values("hunks", addresses)
        return [None if u is None or n is None else (int(u), int(n)) for u, n in zip(firsts, runs, strict=True)]

    return [MessageHit(uid, hunks, score) for (uid, hunks), score in top_hits(searcher, q, limit, keys)]


def delete(store: Store, shas: Iterable[str]) -> None:
    """Delete purged commits' documents (before the catalogue forgets them: a run killed in between leaves the
    index holding fewer commits than the catalogue, which the next :func:`sync` notices and repairs)."""
    shas = list(shas)
    if not shas or not index_exists(store.messages_path):
        return
    if damaged(store):
        _discard(store)  # the next sync builds it again
        return
    try:
        index = open_messages(store.messages_path, create=False)
        writer = index.writer(heap_size=15_000_000, num_threads=1)
        for sha in shas:
            writer.delete_documents_by_term("sha", sha)
        writer.commit()
        writer.wait_merging_threads()
    except Exception as e:  # derived data: the next sync builds it again
        log.warning("the message index could not delete purged commits (%s); it will be built again", e)
        _forget(store)


def sync(store: Store, cancel: threading.Event | None = None, progress: Progress | None = None) -> int:
    """Bring the message index up to date with the catalogue's indexed commits (see the module's docstring);
    returns how many documents were added. Runs under the writer lock (nothing else adds commits meanwhile);
    a cancelled sync leaves the index not current, and the next one adds what is missing."""
    stamp = _stamp(store)
    value = store.get_state(STATE)
    index: tantivy.Index | None = None
    since = 0
    if built(store) and value is not None and not damaged(store):
        try:
            with reading_tantivy():
                index = open_messages(store.messages_path, create=False)
            since = int(value.split(":")[1])
        except Exception as e:
            log.warning("the message index cannot be read (%s); building it again", e)
            index = None
    if index is not None and value == stamp and _holds_all(store, index):
        return 0
    added = 0
    for attempt in range(2):
        if index is None:
            index, since = _fresh(store), 0
        added += _add(store, index, since, cancel, progress)
        if cancel is not None and cancel.is_set():
            return added
        if _holds_all(store, index):
            break
        if attempt == 0:  # commits were purged by a version that did not delete their documents: all again
            log.info("the message index disagrees with the catalogue; building it again")
            index = None
    else:
        log.warning("the message index still disagrees with the catalogue; it is built again by the next run")
        return added
    with store.transaction() as db:
        store.set_state(db, STATE, stamp)
    return added


def _holds_all(store: Store, index: tantivy.Index) -> bool:
    index.reload()
    return int(index.searcher().num_docs) == int(store.db.execute(_INDEXED).fetchone()[0])


def _fresh(store: Store) -> tantivy.Index:
    _discard(store)
    return open_messages(store.messages_path, create=True)


def _discard(store: Store) -> None:
    """No message index: first not current (a search checks that again after opening it), then no files."""
    _forget(store)
    if store.messages_path.exists():
        shutil.rmtree(store.messages_path)


def _forget(store: Store) -> None:
    with store.transaction() as db:
        db.execute("DELETE FROM state WHERE key=?", (STATE,))


def _add(
    store: Store, index: tantivy.Index, since: int, cancel: threading.Event | None, progress: Progress | None
) -> int:
    """Add a document for every indexed commit whose hunks have ids from ``since`` on (a commit's ids are
    reserved together, so it has all of them there or none), replacing any a killed sync left for it."""
    db = store.db
    runs: dict[str, list[int]] = {}  # sha -> [first id, length of the run of ids from it]
    sql = "SELECT f.sha, h.uid FROM hunks h JOIN files f ON f.fid = h.fid WHERE h.uid >= ? ORDER BY h.uid"
    for sha, uid in db.execute(sql, (since,)):
        run = runs.get(sha)
        if run is None:
            runs[sha] = [uid, 1]
        elif run[0] + run[1] == uid and run[1] < MAX_HUNKS:
            run[1] += 1
    shas = sorted(runs, key=lambda s: runs[s][0])
    if progress and shas:
        progress("message_index", 0, len(shas))
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    added = 0
    try:
        for start in range(0, len(shas), ADD_BATCH):
            if cancel is not None and cancel.is_set():
                break
            chunk = shas[start : start + ADD_BATCH]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                "SELECT sha, subject, body, author_name, author_email, author_time FROM commits"
                f" WHERE state = 'indexed' AND sha IN ({marks})",
                chunk,
            ).fetchall()
            files: dict[str, list[tuple[str, str, str | None]]] = {}
            for sha, path, old_path, language in db.execute(
                f"SELECT sha, path, old_path, language FROM files WHERE sha IN ({marks}) ORDER BY fid", chunk
            ):
                files.setdefault(sha, []).append((path, old_path, language))
            for sha, subject, body, name, email, when in rows:
                doc = commit_doc(
                    sha, runs[sha][0], runs[sha][1], code_text(f"{subject}\n{body}"), files.get(sha, []),
                    f"{name} <{email}>", when,
                )  # fmt: skip
                _add_doc(writer, doc)
            added += len(rows)
            if progress:
                progress("message_index", min(start + ADD_BATCH, len(shas)), len(shas))
        writer.commit()
    finally:
        writer.wait_merging_threads()
    return added
