"""What the writer needs from a commit, computed where the commit is read (the reader processes).

On a long history the writer (one process: SQLite and Tantivy) was the bottleneck of the keyword phase, and
most of its time was Python text work, not I/O: rewriting every hunk's text for the analyzer (`code_text`,
11.8 s of 62 s on git/git's first 20,000 commits) and hashing patches for the relations (7.5 s); compressing
the excerpts the catalogue stores is the same kind of work. All depend on the commit alone, so the readers do
them in parallel and the writer only adds documents and rows. Analysing each commit's text for the second stage
(`commit_terms`) is such work too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..history.model import CommitDiff, by_position
from . import commit_terms
from .analyzer import code_text
from .packing import Packer
from .relations import patch_ids
from .text_index import HunkDoc, distinct_tokens
from .values import pack_excerpts


@by_position
@dataclass(frozen=True, slots=True)
class FileTexts:
    path: str  # the file's path(s), analyzer-ready
    siblings: str
    hunks: tuple[tuple[str, str], ...]  # (changed lines, touched symbols) per hunk, analyzer-ready
    excerpts: bytes | None  # the hunks' excerpts as the catalogue stores them (`values.pack_excerpts`)


@by_position
@dataclass(frozen=True, slots=True)
class Prepared:
    message: str
    files: tuple[FileTexts, ...]
    patch: tuple[int, int] | None  # (forward, inverse) patch ids (`relations.patch_ids`)
    terms: bytes | None  # the analysed text the second stage reads (`commit_terms.pack`); None without hunks,
    # for the symbols phase (``documents_only``) and for a long run's keyword phase (the texts phase stores them)


def prepare(
    cd: CommitDiff, no_messages: bool, documents_only: bool = False, terms: bool = True, packer: Packer | None = None
) -> Prepared:
    """``documents_only``: just what :func:`hunk_docs` reads, for the symbols phase, whose commits' excerpts and
    relations are already in the catalogue (the patch ids and the excerpts' compression were ~10 % of its
    readers' CPU on git/git). ``terms=False``: without the analysed text (a long run stores it after its
    symbols phase, `texts_phase`: ~15 % of the keyword phase's readers' CPU on git/git). ``packer``: how the
    excerpts and the analysed text are compressed (the index's dictionaries; zlib without)."""
    c = cd.commit
    files = tuple(
        FileTexts(
            path=code_text(" ".join([f.path] if f.old_path == f.path else [f.path, f.old_path]).replace("/", " ")),
            siblings=distinct_tokens(" ".join(f.sibling_symbols)),
            hunks=tuple((code_text(h.changed_text), code_text(" ".join(s.name for s in h.symbols))) for h in f.hunks),
            excerpts=None if documents_only else pack_excerpts([h.excerpt for h in f.hunks], packer),
        )
        for f in cd.files
    )
    patch = packed = None
    if not documents_only:
        patch = patch_ids(
            (f.path, f.old_path, [(h.ops, h.changed_text.split("\n")) for h in f.hunks]) for f in cd.files if f.hunks
        )
        if terms and any(f.hunks for f in cd.files):
            excerpts = (h.excerpt for f in cd.files for h in f.hunks)  # the first MAX_HUNKS are read
            hunks = ((f.path, [s.name for s in h.symbols]) for f in cd.files for h in f.hunks)
            text = commit_terms.commit_terms(excerpts, c.subject, c.body)
            packed = commit_terms.pack(commit_terms.with_names(text, [f.path for f in cd.files], hunks), packer)
    return Prepared("" if no_messages else code_text(f"{c.subject}\n{c.body}"), files, patch, packed)


def prepared(cd: CommitDiff, no_messages: bool) -> Prepared:
    """The reader's preparation of ``cd`` (or one made now, for a commit read in this process)."""
    p = cd.prepared
    return p if isinstance(p, Prepared) else prepare(cd, no_messages)


def first_uids(cd: CommitDiff, first_uid: int) -> list[int]:
    """Each file's first hunk uid when the commit's hunks are numbered from ``first_uid`` in file and hunk order
    (the order the history phase hands uids out in)."""
    out: list[int] = []
    for f in cd.files:
        out.append(first_uid)
        first_uid += len(f.hunks)
    return out


def hunk_docs(cd: CommitDiff, firsts: Sequence[int], no_messages: bool) -> list[list[HunkDoc]]:
    """The Tantivy documents of a commit's hunks, per file, each file's numbered in hunk order from its entry
    of ``firsts`` (its first hunk's uid in the catalogue): the history phase adds them, the symbols phase moves
    those of the files it re-read (not contiguous in the commit's numbering: files between them are not
    re-read) once their symbols are known."""
    c = cd.commit
    texts = prepared(cd, no_messages)
    author = f"{c.author_name} <{c.author_email}>".lower()
    out: list[list[HunkDoc]] = []
    for f, ft, first in zip(cd.files, texts.files, firsts, strict=True):
        paths = [f.path] if f.old_path == f.path else [f.path, f.old_path]
        out.append(
            [
                HunkDoc(
                    uid=first + i,
                    sha=c.sha,
                    diff=diff,
                    path=ft.path,
                    symbol=symbol,
                    siblings=ft.siblings,
                    paths=paths,
                    language=f.language or "",
                    author=author,
                    time=c.author_time,
                )
                for i, (diff, symbol) in enumerate(ft.hunks)
            ]
        )
    return out
