"""A commit's analysed text, as the second stage reads it, computed once where the commit is read.

Why at index time: the learned second stage counts query terms in each candidate commit's added, removed and
context lines and message (`search.features`). Reading a commit's excerpts back from the catalogue and
analysing them cost ~0.6-1.3 ms a commit, ~23 candidates a search: on git/git about a third of a search with
embeddings, pure Python no thread can overlap. None of it depends on the query, so each commit is analysed
once and the catalogue keeps the result, ~0.8 KB a commit compressed: by a short run's readers (in parallel,
from the excerpts they have just made), and for a long run by the texts phase after its symbols phase, from
the catalogue (`texts_phase`: the keyword lanes are complete sooner). Since the ninth pass the row also holds
the commit's paths and the terms of the paths and touched symbols of its first hunks (reading and analysing
them was ~1.2 ms of the ~2.9 ms a search on git/git spent on its candidates' texts). A row stored before its
commit's symbols (by the ninth pass's version, whose long runs stored rows first) has its names rewritten by
the symbols phase in the transaction that stores the symbols (:func:`with_names`), so the row always says what
the catalogue's hunks say. A row written before the ninth pass has neither, and the search reads them from
the catalogue as it did.

The same :func:`commit_terms` serves a commit without a stored row (an index built before these rows
existed): the search computes it from the catalogue's excerpts, so both give the same features, and the next
`backstory index` stores the missing rows from those excerpts (`texts_phase`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .analyzer import term_counts, term_set
from .packing import ZLIB, Packer
from .packing import unpack as unpack_value

if TYPE_CHECKING:
    from .catalog import Catalog


#: The hunks of a commit whose text is analysed (the first ones, in file and hunk order): one huge commit
#: costs no more than this
MAX_HUNKS = 40

#: An excerpt's added, removed and context lines, each without its first character (regular expressions: a
#: Python loop over the lines cost as much as analysing them)
_LINE_KINDS = (
    ("add", re.compile(r"^\+(.*)$", re.M)),
    ("rem", re.compile(r"^-(.*)$", re.M)),
    ("ctx", re.compile(r"^(?!@@|[+-]).?(.*)$", re.M)),
)


#: A word that looks like code: a dot, underscore, parenthesis, digit or inner capital (the search's identifiers)
IDENTIFIER_LIKE = re.compile(r"[_.]|[a-z][A-Z]|\(|\d")


@dataclass(frozen=True)
class CommitTerms:
    """What the second stage needs of one commit's text, independent of any query."""

    counts: dict[str, Counter[str]]  # "add" / "rem" -> term counts of the added / removed lines
    context: frozenset[str]  # terms of the context lines that no changed line has (only presence is asked)
    changed: str  # the changed lines' distinct code-like words as written, one a line (verbatim identifiers)
    message: frozenset[str]  # terms of the subject and body
    subject: frozenset[str]  # terms of the subject alone
    files: tuple[str, ...] | None = None  # the commit's paths, in file order (None: a row from before them)
    names: frozenset[str] | None = None  # terms of the paths and touched symbols of its first hunks (`names`)


def names(hunks: Iterable[tuple[str, Iterable[str]]]) -> frozenset[str]:
    """The terms of the paths and touched symbols' names of a commit's first :data:`MAX_HUNKS` hunks, given as
    (path, symbol names) in hunk order."""
    words: list[str] = []
    for i, (path, symbols) in enumerate(hunks):
        if i == MAX_HUNKS:
            break
        words.append(path)
        words.extend(symbols)
    return term_set(" ".join(words))


def with_names(terms: CommitTerms, files: Sequence[str], hunks: Iterable[tuple[str, Iterable[str]]]) -> CommitTerms:
    """``terms`` with the commit's paths and :func:`names` (``hunks``: (path, symbol names) in hunk order)."""
    return replace(terms, files=tuple(files), names=names(hunks))


def commit_terms(excerpts: Iterable[str], subject: str, body: str) -> CommitTerms:
    """The terms of a commit's first :data:`MAX_HUNKS` hunk excerpts (as the catalogue stores them) and of its
    message (without its paths and names: :func:`with_names`).

    ``changed`` keeps each whitespace-separated word once, and only those that look like code
    (:data:`IDENTIFIER_LIKE`): the search looks for a query's identifier-like words in it, verbatim and
    bounded (`search.features.verbatim`). Such a word has no whitespace, so it occurs in the changed lines
    exactly when it does in one of their words, and that word has the character (or the lower-upper pair)
    that made the query word look like code, so it is kept. The full text was the largest part of a row."""
    lines: dict[str, list[str]] = {"add": [], "rem": [], "ctx": []}
    for i, excerpt in enumerate(excerpts):
        if i == MAX_HUNKS:
            break
        for kind, pattern in _LINE_KINDS:  # each line without its first character; not the "@@" header
            lines[kind] += pattern.findall(excerpt)
    texts = {kind: "\n".join(lines[kind]) for kind in ("add", "rem")}
    counts = {kind: term_counts(text) for kind, text in texts.items()}
    context = term_set("\n".join(lines["ctx"])).difference(counts["add"], counts["rem"])
    # distinct words first, then the test (one split in C, one regex test a distinct word, not one an occurrence)
    words = [w for w in dict.fromkeys(f"{texts['add']}\n{texts['rem']}".split()) if IDENTIFIER_LIKE.search(w)]
    subject_terms = term_set(subject)
    return CommitTerms(counts, context, "\n".join(words), subject_terms | term_set(body), subject_terms)


def pack(terms: CommitTerms, packer: Packer | None = None) -> bytes:
    """The stored form: compressed JSON (sorted, so the same commit always gives the same bytes; `packing`, with
    the index's dictionary when ``packer`` has one); six fields, and two more with the paths and names."""
    data: list[object] = [
        dict(sorted(terms.counts["add"].items())),
        dict(sorted(terms.counts["rem"].items())),
        sorted(terms.context),
        terms.changed,
        sorted(terms.subject),
        sorted(terms.message - terms.subject),
    ]
    if terms.files is not None and terms.names is not None:
        data += [list(terms.files), sorted(terms.names)]
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return (packer or ZLIB).pack("terms", text.encode("utf-8", "surrogatepass"))


def unpack(data: bytes) -> CommitTerms:
    """:func:`pack`'s inverse; ``ValueError`` when ``data`` is not a stored row (a damaged catalogue: the
    search then computes the commit's terms from its excerpts)."""
    try:
        data = json.loads(unpack_value(data).decode("utf-8", "surrogatepass"))
        if not isinstance(data, list) or len(data) not in (6, 8):
            raise ValueError("not six or eight fields")
        added, removed, context, changed, subject, body = data[:6]
        files, names_ = data[6:] if len(data) == 8 else (None, None)
        if not (_counts(added) and _counts(removed) and _words(context) and _words(subject) and _words(body)):
            raise ValueError("a field of the wrong type")
        if not isinstance(changed, str):
            raise ValueError("the changed words are not text")
        if files is not None and not (_words(files) and _words(names_)):
            raise ValueError("the paths or names are not text")
    except (ValueError, TypeError, RecursionError) as e:
        raise ValueError(f"not a stored commit text ({e})") from None
    subject_terms = frozenset(subject)
    return CommitTerms(
        {"add": Counter(added), "rem": Counter(removed)},
        frozenset(context),
        changed,
        subject_terms | frozenset(body),
        subject_terms,
        None if files is None else tuple(files),
        None if names_ is None else frozenset(names_),
    )


def _counts(value: object) -> bool:  # keys: JSON's are text; the types' set in C, not a Python loop
    return isinstance(value, dict) and set(map(type, value.values())) <= {int}


def _words(value: object) -> bool:
    return isinstance(value, list) and set(map(type, value)) <= {str}


def from_catalogue(catalog: Catalog, sha: str) -> CommitTerms:
    """A commit's terms, paths and names as the catalogue's rows give them (one read of its first hunks): for
    a commit without a stored row, or a damaged one, the same as the stored row would say."""
    _n, subject, body = catalog.message_row(sha) or (0, "", "")
    texts = catalog.commit_hunk_texts(sha, MAX_HUNKS)
    terms = commit_terms((text for _path, text, _symbols in texts), subject, body)
    return with_names(terms, catalog.commit_paths(sha), hunk_names((path, symbols) for path, _t, symbols in texts))


def names_of(catalog: Catalog, sha: str) -> frozenset[str]:
    """:func:`names` of a commit as the catalogue's hunks give them now."""
    return names(hunk_names(catalog.commit_hunk_names(sha, MAX_HUNKS)))


def hunk_names(hunks: Iterable[tuple[str, str]]) -> Iterator[tuple[str, list[str]]]:
    """(path, symbol names) of hunks given as the catalogue stores them: (path, symbols JSON)."""
    for path, symbols in hunks:
        yield path, [s[0] for s in json.loads(symbols)]


#: indexed commits with hunks and no stored row
MISSING = (
    "FROM commits c LEFT JOIN commit_terms t ON t.sha = c.sha WHERE c.state = 'indexed' AND c.n_hunks > 0"
    " AND t.sha IS NULL"
)
#: how the writer and `texts_phase` store a row (OR REPLACE: a commit written again keeps one row)
STORE_ROWS = "INSERT OR REPLACE INTO commit_terms(sha, data) VALUES (?,?)"
#: the state key saying every stored row has the paths and names the catalogue's hunks give (since VERSION 2);
#: a short run's commits get their rows as they are written, a long run's after its symbols phase (counted
#: apart: :data:`MISSING`), and the symbols phase rewrites the names it changes in rows stored before it (by
#: the ninth pass's version, which stored a long run's rows first). An older backstory sets the key back to its
#: own VERSION at the end of its runs: a commit it wrote keeps no row, or one without paths and names, and its
#: symbols phase leaves names behind the symbols, so the next run of this one checks every row (the search
#: meanwhile computes what a row lacks; names behind their symbols cost a little ranking, never a result)
STATE, VERSION = "commit_terms", "2"
#: the state key set ("1") while a long run's commits may lack their rows (its readers leave them to the texts
#: phase, `texts_phase`), cleared when that phase has stored every missing row: whether to count them is then
#: one key's read, not a pass over every commit (~80 ms on git/git)
DEFERRED = "commit_terms_deferred"
