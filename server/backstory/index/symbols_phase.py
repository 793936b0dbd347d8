"""The symbols phase: tree-sitter definitions attached to hunks that the keyword phase indexed without them.

Parsing every version of every source file is the most expensive part of reading a long history (half the
reader's time on git/git), and nothing but the symbol lanes needs it. So a long run first indexes commits,
diffs and paths (searchable as soon as each batch commits), then reads the same commits again, newest first,
with symbols, and the catalogue's hunks get their definitions. A file waiting for this is marked
``parsed = PENDING``; the dense phase, whose passages name the definitions, leaves it for later.

Where the documents live: the keyword phase puts the documents of the files waiting for symbols (those in a
supported language) into a *staging* Tantivy index beside the main one, and this phase re-reads just those
files (the rest of the commit, often most of its hunks: git/git's tests, documentation and translations, stays
in the main index untouched) and moves their documents to the main index with their symbols. The main index
is only ever added to, so once the phase ends (and the staging index is deleted) its BM25 statistics, and so
every lane's scores, are exactly those of an index built in one pass: replacing documents in place would leave
deleted ones in Tantivy's term statistics until a background merge happened to drop them. Search reads both
indexes while the phase runs. A staging index that holds other files too (an older version staged whole
commits, and may have added to it) is moved as such an index was: whole commits re-read, and every document of
theirs moved.

Crash safety follows the history phase: the main index commits first, then the staging one, then the
catalogue clears the marks; a run killed in between moves the same commits again (deleting whatever an earlier
attempt added: the moved files' documents, or the commit's for a whole-commit staging index), with the same
uids.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace

import tantivy
from dulwich.repo import Repo

from .. import symbols
from ..history.model import CommitDiff, CommitInfo
from ..history.policy import PathPolicy
from . import commit_terms, memory, packing
from .catalog import Catalog
from .packing import Packer
from .parallel import read_all
from .prepare import hunk_docs
from .progress import Progress
from .store import Store, StoreError
from .text_index import HunkDoc, add_docs, index_exists, open_index, others_query, uids_query

PENDING = -1  # files.parsed: in a supported language, symbols not attached yet
DEFER_FROM = 500  # commits in one run from which symbols get a phase of their own
BATCH_COMMITS = 400
BATCH_HUNKS = 8000


class Staging:
    """The staging index's writer, opened when first needed (most runs never need one)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._writer: tantivy.IndexWriter | None = None

    def exists(self) -> bool:
        return index_exists(self.store.staging_path)

    def holds_others(self, languages: frozenset[str]) -> bool:
        """Whether the staging index holds a document of a file in none of ``languages`` (those of the files
        waiting for symbols): the rest of its commit is then not in the main index (an older version staged
        whole commits), and the phase must move whole commits. Asked of the index itself, not of a mark kept
        elsewhere, which an older version sharing the index would not maintain."""
        if not self.exists():
            return False
        index = open_index(self.store.staging_path, create=False)
        return bool(index.searcher().search(others_query(languages), limit=1, count=False).hits)

    def writer(self) -> tantivy.IndexWriter:
        if self._writer is None:
            index = open_index(self.store.staging_path, create=not self.exists())
            self._writer = index.writer(heap_size=48_000_000, num_threads=1)
        return self._writer

    def delete(self, shas: Sequence[str]) -> None:
        """Drop these commits' staged documents (not committed yet)."""
        if self._writer is not None or self.exists():
            writer = self.writer()
            for sha in shas:
                writer.delete_documents_by_term("sha", sha)

    def commit(self) -> None:
        if self._writer is not None:
            self._writer.commit()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None

    def remove(self) -> None:
        """Delete the staging index once nothing waits in it."""
        self.close()
        if self.store.staging_path.exists():
            shutil.rmtree(self.store.staging_path)


def pending(db: sqlite3.Connection) -> list[CommitInfo]:
    """Indexed commits with a file waiting for symbols, in the history phase's order (newest first)."""
    rows = db.execute(
        "SELECT sha, parents, subject, body, author_name, author_email, author_time, author_tz, commit_time,"
        " commit_tz FROM commits WHERE state='indexed' AND sha IN (SELECT sha FROM files WHERE parsed=?)"
        " ORDER BY commit_time DESC, author_time DESC, sha",
        (PENDING,),
    ).fetchall()
    return [CommitInfo(r[0], tuple(json.loads(r[1])), *r[2:]) for r in rows]


def waiting_languages(db: sqlite3.Connection) -> tuple[frozenset[str], frozenset[str]]:
    """The languages of the files waiting for symbols: as the keyword phase staged them, and as this version
    names their paths (a re-read must reach every one of them, should a file name's language have changed)."""
    rows = db.execute("SELECT DISTINCT path, language FROM files WHERE parsed=?", (PENDING,)).fetchall()
    staged = frozenset(str(lang) for _path, lang in rows if lang)
    named = frozenset(lang for path, _lang in rows if (lang := symbols.language_for_path(path)) is not None)
    return staged, staged | named


def attach(
    store: Store,
    writer: tantivy.IndexWriter,
    staging: Staging,
    repo: Repo,
    policy: PathPolicy,
    no_messages: bool,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> int:
    """Attach symbols to every commit waiting for them; returns how many commits were done."""
    todo = pending(store.db)
    if not todo:
        staging.remove()
        return 0
    total, done = len(todo), 0
    if progress:
        progress("symbols", 0, total)
    # only the files waiting are re-read and moved, unless the staging index holds other files too: then whole
    # commits, as it was made (always right)
    staged, named = waiting_languages(store.db)
    languages = None if staging.holds_others(staged) else named
    batch: list[CommitDiff] = []
    hunks = 0
    for cd in read_all(repo, todo, policy, True, no_messages, documents_only=True, languages=languages):
        if cancel is not None and cancel.is_set():
            break
        batch.append(cd)
        hunks += sum(len(f.hunks) for f in cd.files)
        if len(batch) >= BATCH_COMMITS or hunks >= BATCH_HUNKS:
            _move(store, writer, staging, batch, no_messages, languages)
            done, batch, hunks = done + len(batch), [], 0
            memory.release()
            if progress:
                progress("symbols", done, total)
    if batch and not (cancel is not None and cancel.is_set()):
        _move(store, writer, staging, batch, no_messages, languages)
        done += len(batch)
        if progress:
            progress("symbols", done, total)
    if done == total:
        staging.remove()
    return done


def _move(
    store: Store,
    writer: tantivy.IndexWriter,
    staging: Staging,
    batch: Sequence[CommitDiff],
    no_messages: bool,
    languages: frozenset[str] | None,
) -> None:
    """Move ``batch``'s staged documents to the main index with their symbols. ``languages``: the batch was read
    in just these languages, and only its files waiting for symbols are staged; None: whole commits were read
    and staged (:meth:`Staging.holds_others`)."""
    shas = [cd.commit.sha for cd in batch]
    marks = ",".join("?" * len(shas))
    # not a purged commit's tombstones (files kept until the dense phase drops their vectors, without hunks)
    only = " AND f.embedded <> -1" + ("" if languages is None else f" AND f.parsed = {PENDING}")
    db = store.db
    files: dict[str, list[tuple[int, str, str]]] = {}
    for fid, sha, path, old_path in db.execute(
        f"SELECT fid, sha, path, old_path FROM files f WHERE sha IN ({marks}){only} ORDER BY fid", shas
    ):
        files.setdefault(sha, []).append((fid, path, old_path))
    uids: dict[int, list[int]] = {}
    sql = (
        f"SELECT h.uid, h.fid FROM files f JOIN hunks h ON h.fid = f.fid WHERE f.sha IN ({marks}){only} ORDER BY h.uid"
    )
    for uid, fid in db.execute(sql, shas):
        uids.setdefault(fid, []).append(uid)
    docs: list[HunkDoc] = []
    moved: list[int] = []  # the uids of the moved documents
    hunk_updates: list[tuple[str, int]] = []
    file_updates: list[tuple[int, int]] = []
    for cd in batch:
        stored = files.get(cd.commit.sha, [])
        # the files to move, as the reader read them: with ``languages``, those waiting for symbols (the reader
        # may read more when a grammar came since they were staged: those stay where they are)
        wanted = {(path, old) for _fid, path, old in stored}
        read = [(i, f) for i, f in enumerate(cd.files) if languages is None or (f.path, f.old_path) in wanted]
        shape = [(path, old, len(uids.get(fid, []))) for fid, path, old in stored]
        if shape != [(f.path, f.old_path, len(f.hunks)) for _i, f in read]:
            # the same reader with the same rules read something else (objects changed under the index?): stop
            # before anything moves; what is staged stays searchable
            raise StoreError(
                f"commit {cd.commit.sha[:12]} reads differently than when it was indexed; "
                "run `backstory index --rebuild`"
            )
        firsts = [0] * len(cd.files)
        for (fid, _p, _o), (i, f) in zip(stored, read, strict=True):
            file_updates.append((int(f.parsed), fid))
            firsts[i] = uids[fid][0] if uids.get(fid) else 0
            for uid, h in zip(uids.get(fid, []), f.hunks, strict=True):
                hunk_updates.append((json.dumps([[s.name, s.kind, s.start, s.end] for s in h.symbols]), uid))
        if any(uids.get(fid) for fid, _p, _o in stored):
            if languages is None:
                writer.delete_documents_by_term("sha", cd.commit.sha)  # none, unless a killed attempt added them
            else:
                moved.extend(u for fid, _p, _o in stored for u in uids.get(fid, []))
            per_file = hunk_docs(cd, firsts, no_messages)
            docs.extend(d for i, _f in read for d in per_file[i])
    if moved:
        # what a killed attempt added (none, almost always): one query for the batch, issued before the documents
        # are added again (a query a commit built its term set 400 times a batch: 8.6 s of the phase on git/git)
        writer.delete_documents_by_query(uids_query(moved))
    if docs:
        add_docs(writer, docs)
    writer.commit()
    staging.delete(shas)
    staging.commit()
    with store.transaction() as tx:
        tx.executemany("UPDATE hunks SET symbols=? WHERE uid=?", hunk_updates)
        tx.executemany("UPDATE files SET parsed=? WHERE fid=?", file_updates)
        _rename(tx, Catalog.of(store), shas)


def _rename(tx: sqlite3.Connection, catalog: Catalog, shas: Sequence[str]) -> None:
    """Rewrite the names in the commits' stored texts (`commit_terms.names`) from their hunks' new symbols, in
    the transaction that stores the symbols: a search never reads names that disagree with the hunks. Rows
    stored before they held names are left as they are (the search reads those commits' names itself)."""
    updates: list[tuple[bytes, str]] = []
    packer: Packer | None = None  # the index's dictionaries, read when a row is rewritten
    for sha in shas:
        row = tx.execute("SELECT data FROM commit_terms WHERE sha=?", (sha,)).fetchone()
        try:
            terms = commit_terms.unpack(row[0]) if row is not None else None
        except ValueError:
            continue  # a damaged row: the search computes the commit's text from its hunks
        if terms is None or terms.names is None:
            continue
        names = commit_terms.names_of(catalog, sha)
        if names != terms.names:
            packer = packer or Packer(packing.load(tx))
            updates.append((commit_terms.pack(replace(terms, names=names), packer), sha))
    tx.executemany("UPDATE commit_terms SET data=? WHERE sha=?", updates)
