"""The keyword phase's writer: one batch of read commits into the catalogue, the Tantivy indexes and the message
index, in the order that makes a batch crash-safe (see ``store``); and the purge of commits no longer reachable.

Split from ``build`` (which decides what to read and when): this is the one place that knows the rows a commit
leaves, so writing them and forgetting them stay side by side.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import tantivy

from .. import symbols
from ..history.model import CommitDiff, CommitInfo
from . import commit_terms, message_index, relations, symbols_phase
from .graph import GRAPH_CHANGED
from .packing import Packer
from .prepare import first_uids, hunk_docs, prepared
from .store import Store, bump_counter
from .symbols_phase import PENDING
from .text_index import HunkDoc, add_docs
from .values import pack_text


@dataclass
class Written:
    """What :func:`write_batch` wrote: commits, hunks, and the files it left out by reason."""

    commits: int
    hunks: int
    skipped: dict[str, int] = field(default_factory=dict)


def purge(store: Store, writer: tantivy.IndexWriter, staging: symbols_phase.Staging, shas: Iterable[str]) -> None:
    shas = list(shas)
    with store.transaction() as db:  # first no longer trusted (their hunks and documents go next, in that order)
        db.executemany("UPDATE commits SET state='pending' WHERE sha=?", [(sha,) for sha in shas])
        bump_counter(db, GRAPH_CHANGED)  # readers' commit graphs (search/topology.py)
    for sha in shas:
        writer.delete_documents_by_term("sha", sha)
    writer.commit()
    staging.delete(shas)
    staging.commit()
    message_index.delete(store, shas)
    with store.transaction() as db:
        forget_rows(db, shas)
        for sha in shas:
            db.execute("DELETE FROM commits WHERE sha=?", (sha,))
        relations.purge(db, shas)
        orphans = "SELECT fid FROM files WHERE embedded<>-1 AND sha NOT IN (SELECT sha FROM commits)"
        db.execute(f"DELETE FROM excerpts WHERE fid IN ({orphans})")
        db.execute(f"DELETE FROM files WHERE fid IN ({orphans})")


def with_rows(db: sqlite3.Connection, shas: list[str]) -> list[str]:
    """Those of ``shas`` that have file rows (one lookup a chunk: a batch's commits almost never do)."""
    found: list[str] = []
    for start in range(0, len(shas), 500):
        chunk = shas[start : start + 500]
        sql = f"SELECT DISTINCT sha FROM files WHERE sha IN ({','.join('?' * len(chunk))})"
        found += [r[0] for r in db.execute(sql, chunk)]
    return found


def forget_rows(db: sqlite3.Connection, shas: Iterable[str]) -> None:
    """Drop the catalogue's rows of these commits' changes (not the commit rows). Files that were embedded stay
    as tombstones (embedded=-1) until the dense phase removes their vectors."""
    for sha in shas:
        db.execute("UPDATE files SET embedded=-1 WHERE sha=? AND embedded=1", (sha,))
        db.execute("DELETE FROM hunks WHERE fid IN (SELECT fid FROM files WHERE sha=?)", (sha,))
        db.execute("DELETE FROM excerpts WHERE fid IN (SELECT fid FROM files WHERE sha=?)", (sha,))
        db.execute("DELETE FROM files WHERE sha=? AND embedded<>-1", (sha,))
        db.execute("DELETE FROM merge_paths WHERE sha=?", (sha,))
        db.execute("DELETE FROM merges_unlisted WHERE sha=?", (sha,))
        db.execute("DELETE FROM commit_terms WHERE sha=?", (sha,))


def commit_row(c: CommitInfo, state: str, packer: Packer) -> tuple[Any, ...]:
    return (
        c.sha, json.dumps(list(c.parents)), c.subject, pack_text(c.body, packer), c.author_name, c.author_email,
        c.author_time, c.author_tz, c.commit_time, c.commit_tz, int(c.is_merge), state,
    )  # fmt: skip


def write_batch(
    store: Store,
    writer: tantivy.IndexWriter,
    staging: symbols_phase.Staging,
    batch: list[CommitDiff | CommitInfo],
    *,
    no_messages: bool,
    symbols_later: bool,
    messages: message_index.Batches | None,
    packer: Packer,
) -> Written:
    """Write one batch of read commits durably: the catalogue reserves, the Tantivy indexes commit, the catalogue
    marks them indexed (crash-safe in that order, see ``store``).

    ``symbols_later``: symbols are attached later (`symbols_phase`): the documents of files whose language has
    them go to the staging index until then, the rest to the main one; otherwise everything goes to the main
    index. ``messages``: the message index, written in step (None for a message-blind index); ``packer``: how
    the commits' bodies are compressed (the readers compressed the rest)."""
    infos = [b.commit if isinstance(b, CommitDiff) else b for b in batch]
    diffs = [b for b in batch if isinstance(b, CommitDiff)]
    n_hunks = sum(len(f.hunks) for cd in diffs for f in cd.files)
    n_files = sum(len(cd.files) for cd in diffs)
    # 1. commits become pending and ids are reserved (durable before Tantivy sees anything). Both are handed out
    # in file then hunk order, so within a commit uid order is (fid, idx) order: catalogue reads rely on it to get
    # hunk order from the files_sha and hunks_fid indexes without a sort (Catalog.commit_hunk_texts)
    with store.transaction() as db:
        # what a purge killed before it deleted the rows of a commit left (it was reachable again since): its
        # hunks would stand beside the new ones (none otherwise: rows come last, in one transaction)
        forget_rows(db, with_rows(db, [c.sha for c in infos]))
        db.executemany(
            "INSERT OR REPLACE INTO commits(sha, parents, subject, body, author_name, author_email, author_time,"
            " author_tz, commit_time, commit_tz, is_merge, state) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [commit_row(c, "pending", packer) for c in infos],
        )
        uid = store.reserve_uids(db, n_hunks)
        fid = int(store.get_state("next_fid", "1") or 1)
        store.set_state(db, "next_fid", str(fid + n_files))
    # 2. Tantivy: drop whatever a killed run left for these commits, add the hunks, commit
    for c in infos:
        writer.delete_documents_by_term("sha", c.sha)
    staging.delete([c.sha for c in infos])  # a killed run may have staged them
    docs: list[HunkDoc] = []
    staged: list[HunkDoc] = []
    hunk_rows: list[tuple[Any, ...]] = []
    file_rows: list[tuple[Any, ...]] = []
    excerpt_rows: list[tuple[int, bytes]] = []
    commit_docs: list[message_index.CommitDoc] = []
    supported = symbols.supported_languages()
    preps = [prepared(cd, no_messages) for cd in diffs]  # the readers' work (made here only for a commit read here)
    for cd, texts in zip(diffs, preps, strict=True):
        c = cd.commit
        n = sum(len(f.hunks) for f in cd.files)
        if messages is not None and n:
            files = [(f.path, f.old_path, f.language) for f in cd.files]
            author = f"{c.author_name} <{c.author_email}>"
            commit_docs.append(message_index.commit_doc(c.sha, uid, n, texts.message, files, author, c.author_time))
        per_file = hunk_docs(cd, first_uids(cd, uid), no_messages)
        for f, ft, file_docs in zip(cd.files, texts.files, per_file, strict=True):
            waits = symbols_later and f.language in supported  # staged until the symbols phase moves it
            (staged if waits else docs).extend(file_docs)
            parsed = PENDING if waits else int(f.parsed)
            file_rows.append((fid, c.sha, f.path, f.old_path, f.change, f.language, parsed, c.author_time))
            if ft.excerpts is not None:
                excerpt_rows.append((fid, ft.excerpts))
            for i, h in enumerate(f.hunks):
                symbols_json = json.dumps([[s.name, s.kind, s.start, s.end] for s in h.symbols])
                hunk_rows.append(
                    (uid, fid, i, h.old_start, h.old_lines, h.new_start, h.new_lines, int(h.truncated),
                     symbols_json, h.ops)
                )  # fmt: skip
                uid += 1
            fid += 1
    add_docs(writer, docs)
    writer.commit()
    if staged:
        add_docs(staging.writer(), staged)
    staging.commit()  # its deletes and documents, if it is open
    if messages is not None:
        messages.add(commit_docs)
    # 3. the catalogue says "indexed" only once Tantivy has committed
    stamp = time.time()
    with store.transaction() as db:
        db.executemany(
            "INSERT INTO files(fid, sha, path, old_path, change, language, parsed, author_time)"
            " VALUES (?,?,?,?,?,?,?,?)",
            file_rows,
        )
        db.executemany("INSERT INTO excerpts(fid, data) VALUES (?,?)", excerpt_rows)
        db.executemany(
            "INSERT INTO hunks(uid, fid, idx, old_start, old_lines, new_start, new_lines, truncated, symbols, ops)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            hunk_rows,
        )
        db.executemany(  # their paths and blocks: the merges phase (`merge_diffs.fill`)
            "INSERT OR IGNORE INTO merges_unlisted(sha) VALUES (?)", [(c.sha,) for c in infos if c.is_merge]
        )
        relations.record(db, infos, [(cd.commit.sha, p.patch) for cd, p in zip(diffs, preps, strict=True)])
        db.executemany(
            commit_terms.STORE_ROWS,
            [(cd.commit.sha, p.terms) for cd, p in zip(diffs, preps, strict=True) if p.terms is not None],
        )
        marks = []
        skipped: dict[str, int] = {}
        for b in batch:
            cd_skipped = b.skipped if isinstance(b, CommitDiff) else {}
            count = sum(len(f.hunks) for f in b.files) if isinstance(b, CommitDiff) else 0
            sha = b.commit.sha if isinstance(b, CommitDiff) else b.sha
            marks.append((stamp, count, json.dumps(cd_skipped, sort_keys=True), sha))
            for k, v in cd_skipped.items():
                skipped[k] = skipped.get(k, 0) + v
        db.executemany("UPDATE commits SET state='indexed', indexed_at=?, n_hunks=?, skipped=? WHERE sha=?", marks)
        bump_counter(db, GRAPH_CHANGED)
        if messages is not None:
            messages.mark(db)
    return Written(len(infos), n_hunks, skipped)
