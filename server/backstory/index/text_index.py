"""The Tantivy side of the store: one document per hunk, one field per search lane, plus filter fields.

Lanes are separate fields searched one at a time (not one combined query) so that each lane yields its own
ranking for Reciprocal Rank Fusion, and later lanes can be added without touching the others. The message lane
is not a field here: a commit's message is one document of the message index (`index.message_index`), not a
copy on each of its hunks.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tantivy

from .analyzer import ANALYZER_NAME, build_analyzer, code_text, query_terms
from .store import StoreError

LANE_FIELDS = {"diff": "diff", "message": "message", "path": "path", "symbol": "symbol"}
#: the lanes this index has a field for (the message lane's field is in the message index)
HUNK_LANES = ("diff", "path", "symbol")
# extra fields searched inside a lane at a lower boost: sibling definitions describe the file, not the change
LANE_EXTRAS: dict[str, tuple[tuple[str, float], ...]] = {
    "symbol": (("siblings", 0.25),),
    # touched symbols and paths also inform the diff lane's BM25, at low boosts (measured: see benchmarks.md)
    "diff": (("symbol", 0.3), ("path", 0.2)),
}
LANE_TOP = 100
TIE_FETCH_MAX = 5000  # hits read at most to settle a tie at a lane's cut
K = TypeVar("K", bound=Any)  # a hit's key (`top_hits`): sortable


def build_schema() -> tantivy.Schema:
    """Nothing is stored (a hit's uid is read from its fast field) and the fields only matched, never scored,
    keep no frequencies or positions: git/git's index 3.3 MB of stored uids and 0.7 MB of positions smaller."""
    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("uid", stored=False, indexed=True, fast=True)
    sb.add_text_field("sha", stored=False, tokenizer_name="raw", index_option="basic")
    for field in (*HUNK_LANES, "siblings"):
        sb.add_text_field(field, stored=False, tokenizer_name=ANALYZER_NAME, index_option="freq")
    add_filter_fields(sb)
    return sb.build()


def add_filter_fields(sb: tantivy.SchemaBuilder) -> None:
    """The fields :func:`filter_query` reads (the message index's documents have them too, per commit)."""
    for field in ("path_raw", "language", "author"):
        sb.add_text_field(field, stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_integer_field("time", stored=False, indexed=True, fast=True)


_SCHEMA = build_schema()  # queries built outside a search (no index at hand) name fields through it


@contextlib.contextmanager
def reading_tantivy() -> Iterator[None]:
    """Tantivy's errors on damaged files — including a Rust panic, which Python sees as a ``BaseException`` — as
    one :class:`StoreError` that names the fix. Wraps Tantivy calls only (our own ValueErrors are not damage)."""
    try:
        yield
    except (ValueError, OSError, RuntimeError) as e:
        raise StoreError(f"the Tantivy index is damaged ({e}); run `backstory index --rebuild`") from None
    except BaseException as e:
        if type(e).__name__ != "PanicException":
            raise
        raise StoreError(f"the Tantivy index is damaged (Tantivy: {e}); run `backstory index --rebuild`") from None


def index_exists(directory: Path) -> bool:
    """Whether ``directory`` holds a committed Tantivy index (Tantivy raises on a missing directory)."""
    return directory.is_dir() and tantivy.Index.exists(str(directory))


def open_index(directory: Path, *, create: bool, schema: tantivy.Schema | None = None) -> tantivy.Index:
    """Open (or create) a Tantivy index (``schema``: the hunks' by default) and register our analyzer; tantivy
    raises on corrupt files."""
    directory.mkdir(parents=True, exist_ok=True)
    if not create and not index_exists(directory):
        raise FileNotFoundError(f"no Tantivy index in {directory}")
    index = tantivy.Index(schema or build_schema(), path=str(directory), reuse=not create)
    index.register_tokenizer(ANALYZER_NAME, build_analyzer())
    return index


@dataclass(frozen=True, slots=True)
class HunkDoc:
    """What one hunk contributes to the text lanes and filters; lane texts are analyzer-ready (`code_text`)."""

    uid: int
    sha: str
    diff: str
    path: str
    symbol: str
    siblings: str
    paths: Sequence[str]
    language: str
    author: str
    time: int


def distinct_tokens(names: str) -> str:
    """The sibling field's text: each token of the names once (lower-cased, first-seen order).

    Qualified names repeat their qualifiers (``Flask.run Flask.route ...``: ``flask`` sixty times), and the
    sibling names are the same for every hunk of a file, so indexing them in full made them the largest field
    of a hunk's document (more tokens than the changed lines on Flask). Which names a file defines is what
    this low-boost field says; how often a qualifier repeats is not, so each token is indexed once."""
    return " ".join(dict.fromkeys(code_text(names).lower().split()))


def add_docs(writer: tantivy.IndexWriter, docs: Sequence[HunkDoc]) -> None:
    """Add one document per hunk (texts already analyzer-ready: `index.prepare`)."""
    for d in docs:
        doc = tantivy.Document()
        doc.add_unsigned("uid", d.uid)
        doc.add_text("sha", d.sha)
        doc.add_text("diff", d.diff)
        doc.add_text("path", d.path)
        doc.add_text("symbol", d.symbol)
        doc.add_text("siblings", d.siblings)
        for p in d.paths:
            doc.add_text("path_raw", p)
        doc.add_text("language", d.language)
        doc.add_text("author", d.author)
        doc.add_integer("time", d.time)
        writer.add_document(doc)


@dataclass(frozen=True, slots=True)
class Filters:
    """Search filters; all optional. Times are Unix seconds (author time), bounds inclusive."""

    since: int | None = None
    until: int | None = None
    path_glob: str | None = None
    author: str | None = None
    language: str | None = None

    def active(self) -> bool:
        return any(v is not None for v in (self.since, self.until, self.path_glob, self.author, self.language))


def glob_to_regex(glob: str) -> str:
    """Translate a path glob (``*``, ``**``, ``?``) to a Tantivy (Rust regex) pattern over the whole path.

    A glob without ``/`` matches the file name in any directory, like gitignore patterns do; a literal path
    (no wildcard) also matches everything under it, as a git pathspec does (``--path src``); ``./`` is the
    repository root. A non-UTF-8 file name (surrogate-escaped on the command line) is matched in the form
    the index stores paths in: decoded with replacement characters.
    """
    g = glob.strip().encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    while g.startswith("./"):
        g = g[2:]
    literal = not any(ch in g for ch in "*?")
    if "/" not in g.rstrip("/"):
        g = "**/" + g
    out: list[str] = []
    i = 0
    while i < len(g):
        c = g[i]
        if g.startswith("**/", i):
            out.append("(.*/)?")
            i += 3
            continue
        if g.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(c))
        i += 1
    pattern = "".join(out)
    if g.endswith("/"):
        pattern += ".*"
    elif literal:
        pattern += "(/.*)?"
    return pattern


def filter_query(schema: tantivy.Schema, f: Filters) -> tantivy.Query | None:
    """The filters as one Tantivy query that every lane ANDs with its own (so top-k survive filtering)."""
    parts: list[tantivy.Query] = []
    if f.since is not None or f.until is not None:
        parts.append(tantivy.Query.range_query(schema, "time", tantivy.FieldType.Integer, f.since, f.until))
    if f.language:
        parts.append(tantivy.Query.term_query(schema, "language", f.language.lower()))
    if f.path_glob:
        parts.append(tantivy.Query.regex_query(schema, "path_raw", glob_to_regex(f.path_glob)))
    if f.author:
        parts.append(tantivy.Query.regex_query(schema, "author", ".*" + re.escape(f.author.lower()) + ".*"))
    if not parts:
        return None
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, q) for q in parts])


def uids_query(uids: Iterable[int]) -> tantivy.Query:
    """The documents of these hunks (the symbols phase drops the copies a killed attempt left in the main
    index before it adds them again, and only those: the rest of their commits is there too)."""
    return tantivy.Query.term_set_query(_SCHEMA, "uid", sorted(uids))


def shas_query(shas: Iterable[str]) -> tantivy.Query:
    """The documents of these commits' hunks (a filtered message lane finds which of its commits' hunks pass)."""
    return tantivy.Query.term_set_query(_SCHEMA, "sha", sorted(set(shas)))


def others_query(languages: Iterable[str]) -> tantivy.Query:
    """Documents of files in none of ``languages``."""
    clauses = [(tantivy.Occur.Must, tantivy.Query.all_query())]
    clauses += [(tantivy.Occur.MustNot, tantivy.Query.term_query(_SCHEMA, "language", lang)) for lang in languages]
    return tantivy.Query.boolean_query(clauses)


def lane_query(schema: tantivy.Schema, lane: str, terms: Sequence[str]) -> tantivy.Query | None:
    if not terms:
        return None
    field = LANE_FIELDS[lane]
    clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, field, t)) for t in terms]
    for name, boost in LANE_EXTRAS.get(lane, ()):
        clauses += [
            (tantivy.Occur.Should, tantivy.Query.boost_query(tantivy.Query.term_query(schema, name, t), boost))
            for t in terms
        ]
    return tantivy.Query.boolean_query(clauses)


def search_lane(
    index: tantivy.Index,
    searcher: tantivy.Searcher,
    lane: str,
    text: str,
    filters: tantivy.Query | None,
    limit: int = LANE_TOP,
) -> list[tuple[int, float]]:
    """Top ``limit`` (uid, bm25) of one of :data:`HUNK_LANES`; ties broken by uid so rankings are deterministic.
    Lanes over code and paths ignore the query's change verbs ("fix", "add", ...) (the message lane, whose
    text is made of them, keeps them: `message_index.search`)."""
    terms = query_terms(text, drop_change_verbs=True)
    q = lane_query(index.schema, lane, terms)
    if q is None:
        return []
    if filters is not None:
        q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q), (tantivy.Occur.Must, filters)])
    return top_hits(searcher, q, limit, lambda addresses: _uids(searcher, addresses))


def top_hits(
    searcher: tantivy.Searcher,
    query: tantivy.Query,
    limit: int,
    keys: Callable[[list[tantivy.DocAddress]], Sequence[K | None]],
) -> list[tuple[K, float]]:
    """The best ``limit`` (key, score) of ``query``, ties broken by key (``keys`` reads the hits' keys from
    fast fields; a hit without one is dropped), so that a ranking does not depend on how the index is split
    into segments."""
    fetch = limit + 20
    while True:
        with reading_tantivy():
            result = searcher.search(query, limit=fetch, count=False)
            found = keys([addr for _score, addr in result.hits])
            hits = [(k, float(score)) for k, (score, _a) in zip(found, result.hits, strict=True) if k is not None]
        hits.sort(key=lambda h: (-round(h[1], 6), h[0]))
        # which of many equal scores Tantivy returns depends on how the index is split into segments: when the
        # cut falls inside a tie that may go on past what was fetched, fetch the whole tie, then cut by key
        if len(hits) < fetch or len(hits) <= limit or fetch >= TIE_FETCH_MAX:
            break
        if round(hits[-1][1], 6) < round(hits[limit - 1][1], 6):
            break
        fetch = min(fetch * 4, TIE_FETCH_MAX)
    return hits[:limit]


def merge_rankings(
    a: Sequence[tuple[int, float]], b: Sequence[tuple[int, float]], limit: int = LANE_TOP
) -> list[tuple[int, float]]:
    """One lane's rankings from two indexes (the main one and the symbols phase's staging one) as one: best
    first, ties by uid, a uid found in both (a commit caught between its two commits) once with its best score.
    The two indexes' BM25 statistics differ, which is why results are labelled partial while both exist."""
    best: dict[int, float] = {}
    for uid, score in (*a, *b):
        if score > best.get(uid, float("-inf")):
            best[uid] = score
    return sorted(best.items(), key=lambda h: (-round(h[1], 6), h[0]))[:limit]


def filter_uids(searcher: tantivy.Searcher, filters: tantivy.Query, limit: int) -> list[int]:
    """All uids passing the filters (for restricting the dense lane), up to ``limit``."""
    with reading_tantivy():
        result = searcher.search(filters, limit=limit, count=False)
        return [u for u in _uids(searcher, [addr for _score, addr in result.hits]) if u is not None]


def _uids(searcher: tantivy.Searcher, addresses: list[tantivy.DocAddress]) -> list[int | None]:
    """The hunk uids of documents, from the ``uid`` fast field: one call for all of them, where fetching each
    stored document decompressed a block of the document store per hit (~120 a lane, up to 200,000 for the
    dense lane's filters). None for a document without one (every document has one: the field is in the schema
    since the first version; such a hit is dropped rather than ranked as uid 0)."""
    return [None if uid is None else int(uid) for uid in searcher.fast_field_values("uid", addresses)]
