"""What the learned second stage knows about each candidate commit: signals the pipeline already computed
(fused score, MaxSim, dense centroid) and whole-commit text statistics the hunk-level lanes cannot see.

Why whole-commit statistics: every lane scores hunks (or files) and a commit inherits its best one, so a
commit whose changes match the query *across* several hunks, or that only matches in context lines or in
removed code, looks the same as one that matches once. The second stage reads the candidate's analysed text
(that of its first hunks, stored at index time: `index.commit_terms`) and counts query terms in added, removed
and context lines, in paths and symbols, and the query's identifier-like words verbatim.

Why message features: where the index holds messages (the default), the keyword message lane's rank, how much of
the query the commit's subject and body cover, and the message embedding lane's cosine and rank are evidence of
their own; a message-blind index never reads them. The fused score mixes the message lane's cosine with every
other lane's, so without its own feature a model cannot weigh it apart.

Why intent products: a commit subject usually opens with what was done ("Add ...", "Remove ..."), and whether
the change mostly adds or removes code says whether it did that; a linear model cannot multiply two features
itself, so the products are features (likewise a query about docs or tests x the commit's share of them). A
"Fix ..." subject names a symptom more than the code, and a fix is usually small: its products with the
change's size and with the fused score let the model favour small changes, and lean less on the lanes, for fixes.

The split between :func:`gather` (catalogue and index reads) and :func:`feature_rows` (pure arithmetic) keeps
the arithmetic unit-testable and lets the training tool record exactly the rows the engine scores.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..index import commit_terms
from ..index.analyzer import query_terms, term_set
from ..index.catalog import Catalog

#: Order matters: the learned model's weights are stored against these names (models/data/second_stage.json).
FEATURES = (
    "fused",  # the first stage's fused score
    "maxsim",  # the MaxSim rerank score (0 without one)
    "centroid",  # cosine of the commit's dense centroid (0 when the dense lane did not score it)
    "log_hunks",  # ln(1 + hunks in the commit)
    "log_files",  # ln(1 + files in the commit)
    "cover",  # idf-weighted share of the query's terms anywhere in the commit's excerpts (context included)
    "cover_names",  # ... in its paths and touched symbols
    "docs_share",  # share of its files that are docs, changelogs or READMEs
    "dense_rank",  # 1 / (1 + the commit's rank in the dense lane), 0 when absent
    "cover_removed",  # idf-weighted share of the query's terms in removed lines
    "bm25_changed",  # BM25 of the query over all changed lines of the commit, as one document
    "log_changed",  # ln(1 + changed tokens)
    "identifiers",  # share of the query's identifier-like words found verbatim in changed lines
    "added_share",  # (added + 1) / (changed + 2) tokens
    "docs_only",  # 1 when every file is documentation
    # what the query says was done x what the commit did (a linear model cannot form these products itself)
    "add_x_added",  # "add ..." x added share of changed tokens
    "remove_x_removed",  # "remove ..." x removed share of changed tokens
    "docs_x_docs",  # the query speaks of docs, a typo, the readme or changelog x docs share
    "tests_x_tests",  # the query speaks of tests x share of test files
    # the commit's message, where the index holds messages (0 in a message-blind index)
    "message_rank",  # 1 / (1 + the commit's rank in the message lane), 0 when absent
    "cover_message",  # idf-weighted share of the query's terms, change verbs included, in its subject and body
    # a fix is usually small, and its subject names the symptom rather than the code (so lanes matching it weigh less)
    "fix_x_changed",  # "fix ..." x ln(1 + changed tokens)
    "fix_x_fused",  # "fix ..." x the fused score
    # the message lane (message_dense: the cosine of the commit's message vector to the query's), messages only;
    # appended last: a model names the features it reads, so models fitted before these still read the same columns
    "message_cosine",  # its cosine for the commit (the lane's lowest returned one when absent, as fusion counts it)
    "message_dense_rank",  # 1 / (1 + the commit's rank in that lane), 0 when absent
    # messages only: a query that is (nearly) the commit's own subject, e.g. a pull-request title copied from it
    "subject_match",  # share of the query's and the subject's distinct terms they have in common (Jaccard)
)
#: Features only an index with messages gives values (0 in a message-blind one).
MESSAGE_FEATURES = ("message_rank", "cover_message", "message_cosine", "message_dense_rank", "subject_match")
#: Features that need no hunk text (scores, ranks, the message): a model reading only these skips the catalogue's
#: hunks, the costly part of a row (both bundled models read hunk features too: then every row reads them).
WITHOUT_HUNKS = frozenset((
    "fused", "maxsim", "centroid", "dense_rank", "message_rank", "cover_message", "fix_x_fused", "message_cosine",
    "message_dense_rank", "subject_match",
))  # fmt: skip
BM25_K1, BM25_B, BM25_AVG_LEN = 1.2, 0.75, 200.0
DOCS = re.compile(
    r"(^|/)(docs?|documentation)/|(^|/)(CHANGES|CHANGELOG|HISTORY|NEWS|AUTHORS|README)[^/]*$|\.(md|rst|txt|adoc)$",
    re.IGNORECASE,
)
TESTS = re.compile(
    r"(^|/)(tests?|spec|__tests__|testdata)/|(_test\.go|_spec\.rb|\.test\.[jt]sx?|\.spec\.[jt]sx?)$|(^|/)test_[^/]*\.py$",
    re.IGNORECASE,
)
#: The first word of a commit subject names what was done; these say which way the change should lean.
INTENTS = {
    "add": frozenset(("add", "adds", "added", "adding", "introduce", "introduced", "implement", "implemented",
                      "create", "created", "new", "support", "allow", "allows")),
    "remove": frozenset(("remove", "removes", "removed", "removing", "delete", "deleted", "drop", "dropped",
                         "drops", "kill", "strip", "stripped")),
    "fix": frozenset(("fix", "fixes", "fixed", "fixing", "fixup", "bugfix", "hotfix", "bug")),
}  # fmt: skip
DOCS_WORDS = frozenset((
    "doc", "docs", "documentation", "document", "documented", "readme", "typo", "typos", "changelog", "docstring",
    "docstrings", "comment", "comments", "spelling",
))  # fmt: skip
TEST_WORDS = frozenset(("test", "tests", "testing", "testcase", "spec", "specs", "coverage"))
_STRIP = ".,:;()`'\""


@dataclass(frozen=True)
class QueryInfo:
    terms: tuple[str, ...]  # the code lanes' terms (change verbs dropped)
    all_terms: tuple[str, ...]  # every term, change verbs too
    idf: Mapping[str, float]  # for all_terms, from the diff field's document frequencies
    identifiers: tuple[str, ...]  # words that look like code: set_next(), LRUCache.copy, 3.5.0, camelCase
    intent: str | None = None  # "add" / "remove" / "fix" from the first word, see INTENTS
    about_docs: bool = False
    about_tests: bool = False


@dataclass
class CommitText:
    """Query-term statistics of one commit's first hunks (`index.commit_terms.MAX_HUNKS`)."""

    n_hunks: int
    files: list[str]
    tf: dict[str, dict[str, int]] = field(default_factory=lambda: {"add": {}, "rem": {}})  # changed lines
    length: dict[str, int] = field(default_factory=lambda: {"add": 0, "rem": 0})
    seen: set[str] = field(default_factory=set)  # query terms anywhere in the excerpts (context included)
    seen_names: set[str] = field(default_factory=set)  # query terms in paths and symbols
    identifiers: set[str] = field(default_factory=set)  # identifier-like words found in changed lines
    seen_message: set[str] = field(default_factory=set)  # query terms in the message (messages indexed only)
    subject: frozenset[str] = frozenset()  # terms of the subject (messages indexed only)


@dataclass(frozen=True)
class CommitTokens:
    """A commit's analysed text, independent of any query (so a long-lived engine caches it by sha)."""

    n_hunks: int
    files: tuple[str, ...]
    counts: dict[str, Counter[str]]  # "add" / "rem" -> term counts of the added / removed lines
    context: frozenset[str]  # terms of the context lines no changed line has: no feature counts them
    names: frozenset[str]  # terms of paths and touched symbols
    changed: str  # the changed lines' distinct code-like words as written, for verbatim identifier matches
    message: frozenset[str] = frozenset()  # terms of the subject and body
    subject: frozenset[str] = frozenset()  # terms of the subject alone


def identifiers(query: str) -> tuple[str, ...]:
    """The query's words that look like code (a dot, underscore, parenthesis, digit or inner capital), edge
    punctuation stripped: the analyzer splits and stems them, so only a verbatim match keeps them whole."""
    words = (w.strip(_STRIP) for w in query.split())
    return tuple(dict.fromkeys(w for w in words if len(w) > 2 and commit_terms.IDENTIFIER_LIKE.search(w)))


def verbatim(word: str, text: str) -> bool:
    """``word`` occurs in ``text`` as written and not inside a longer name or number (``set_next`` is not
    found in ``reset_next``, ``3.7`` not in ``13.7`` or ``3.70``)."""
    return re.search(rf"(?<!\w){re.escape(word)}(?![\w]|\.\w)", text) is not None


def query_info(query: str, doc_freq: Callable[[str], int], n_docs: int) -> QueryInfo:
    """The query's terms and their BM25 idf (``doc_freq``: documents of the diff field holding a term)."""
    terms = tuple(query_terms(query, drop_change_verbs=True))
    all_terms = tuple(query_terms(query))
    idf = {t: math.log(1 + (n_docs - (df := doc_freq(t)) + 0.5) / (df + 0.5)) for t in dict.fromkeys(all_terms + terms)}
    words = [w.strip(_STRIP).lower() for w in query.split()]
    words = [w for w in words if w]
    # the first word as written: reading "fix(parser):" / "feat:" as intents too ranked worse on the held-out
    # histories that use conventional commits (docs/benchmarks.md, tenth session)
    first = words[0] if words else ""
    intent = next((name for name, verbs in INTENTS.items() if first in verbs), None)
    return QueryInfo(
        terms, all_terms, idf, identifiers(query), intent,
        about_docs=any(w in DOCS_WORDS for w in words), about_tests=any(w in TEST_WORDS for w in words),
    )  # fmt: skip


def commit_tokens(catalog: Catalog, sha: str) -> CommitTokens:
    """One commit's analysed text: its stored :class:`~backstory.index.commit_terms.CommitTerms` with its files
    and the terms of its first hunks' paths and symbols (computed from the catalogue's hunks when the index has
    no row, or a damaged one, for it, and the paths and names when its row is older than them)."""
    row = catalog.commit_terms(sha)
    if row is None:
        return message_tokens(catalog, sha)  # not an indexed commit
    n_hunks, packed = row
    terms = None
    if packed is not None:
        with contextlib.suppress(ValueError):  # a damaged row: the catalogue's hunks say the same
            terms = commit_terms.unpack(packed)
    if terms is None:
        terms = commit_terms.from_catalogue(catalog, sha)
    files, names = terms.files, terms.names
    if files is None or names is None:  # a row stored before it held paths and names
        files = tuple(catalog.commit_paths(sha))
        names = commit_terms.names_of(catalog, sha)
    return CommitTokens(
        n_hunks=n_hunks, files=files, counts=terms.counts, context=terms.context, names=names,
        changed=terms.changed, message=terms.message, subject=terms.subject,
    )  # fmt: skip


def message_tokens(catalog: Catalog, sha: str) -> CommitTokens:
    """Only the commit's message and hunk count (no hunks read): for a model whose features are all in
    :data:`WITHOUT_HUNKS`; the features outside it are not meaningful from these."""
    row = catalog.message_row(sha)
    n_hunks, subject, body = row if row is not None else (0, "", "")
    subject_terms = term_set(subject)
    empty: Counter[str] = Counter()
    return CommitTokens(
        n_hunks=n_hunks, files=(), counts={"add": empty, "rem": empty}, context=frozenset(), names=frozenset(),
        changed="", message=subject_terms | term_set(body), subject=subject_terms,
    )  # fmt: skip


def commit_text(tokens: CommitTokens, q: QueryInfo, messages: bool = False) -> CommitText:
    """The query's view of one commit: its terms' counts per line kind, where they occur, its identifiers, and
    (only with ``messages``: an index built with ``--no-messages`` must not see them) its message's terms."""
    wanted = dict.fromkeys(q.all_terms + q.terms)
    ct = CommitText(n_hunks=tokens.n_hunks, files=list(tokens.files))
    for kind, counts in tokens.counts.items():
        ct.tf[kind] = {t: counts[t] for t in wanted if counts[t]}
        ct.length[kind] = counts.total()
        ct.seen.update(ct.tf[kind])
    ct.seen.update(t for t in wanted if t in tokens.context)
    ct.seen_names = {t for t in wanted if t in tokens.names}
    ct.identifiers = {i for i in q.identifiers if verbatim(i, tokens.changed)}
    if messages:
        ct.seen_message = {t for t in q.all_terms if t in tokens.message}
        ct.subject = tokens.subject
    return ct


class TokenCache:
    """The last ``size`` commits' :class:`CommitTokens` (least recently used out). A commit's text never
    changes, but its hunks' symbols arrive later and a rebuild may store other excerpts: the engine clears the
    cache when the catalogue changed. Entries weigh ~8-200 KB (15 KB typical on git/git), so the default 512
    keeps ~10 MB: the candidates of the last couple of dozen queries, which is what repeated searches and
    hovers over the same code reuse."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._items: OrderedDict[str, CommitTokens] = OrderedDict()

    def get(self, catalog: Catalog, sha: str) -> CommitTokens:
        tokens = self._items.get(sha)
        if tokens is None:
            tokens = self._items[sha] = commit_tokens(catalog, sha)
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(sha)
        return tokens

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def gather(
    catalog: Catalog,
    shas: Sequence[str],
    q: QueryInfo,
    cache: TokenCache | None = None,
    messages: bool = False,
    hunks: bool = True,
) -> dict[str, CommitText]:
    """:func:`commit_text` of each commit, its text read through ``cache`` if given; without ``hunks``, from
    its message alone (:func:`message_tokens`, not cached: one short row)."""
    if not hunks:
        return {sha: commit_text(message_tokens(catalog, sha), q, messages) for sha in shas}
    read = (lambda sha: cache.get(catalog, sha)) if cache is not None else (lambda sha: commit_tokens(catalog, sha))
    return {sha: commit_text(read(sha), q, messages) for sha in shas}


def feature_row(
    q: QueryInfo,
    ct: CommitText,
    fused: float,
    maxsim: float,
    centroid: float,
    dense_rank: int | None,
    message_rank: int | None = None,
    message_cosine: float = 0.0,
    message_dense_rank: int | None = None,
) -> list[float]:
    """One candidate's features, in :data:`FEATURES` order (ranks: 1-based lane ranks, None when absent;
    ``message_cosine``: the message lane's cosine for the commit, 0 without that lane)."""
    total = sum(q.idf[t] for t in q.terms) or 1.0
    total_all = sum(q.idf[t] for t in dict.fromkeys(q.all_terms)) or 1.0

    def cover(present: Callable[[str], bool]) -> float:
        return sum(q.idf[t] for t in q.terms if present(t)) / total

    add, rem = ct.tf["add"], ct.tf["rem"]
    changed = {t: add.get(t, 0) + rem.get(t, 0) for t in q.all_terms}
    n_changed = ct.length["add"] + ct.length["rem"]
    files = ct.files or [""]
    docs = sum(bool(DOCS.search(f)) for f in files) / len(files)
    tests = sum(bool(TESTS.search(f)) for f in files) / len(files)
    added = (ct.length["add"] + 1) / (n_changed + 2)

    def when(intent: str, value: float) -> float:
        return value if q.intent == intent else 0.0

    return [
        fused,
        maxsim,
        centroid,
        math.log1p(ct.n_hunks),
        math.log1p(len(ct.files)),
        cover(lambda t: t in ct.seen),
        cover(lambda t: t in ct.seen_names),
        docs,
        1.0 / (1 + dense_rank) if dense_rank is not None else 0.0,
        cover(lambda t: rem.get(t, 0) > 0),
        bm25(changed, q.idf, n_changed),
        math.log1p(n_changed),
        len(ct.identifiers) / len(q.identifiers) if q.identifiers else 0.0,
        added,
        float(docs == 1.0),
        when("add", added),
        when("remove", 1.0 - added),
        docs if q.about_docs else 0.0,
        tests if q.about_tests else 0.0,
        1.0 / (1 + message_rank) if message_rank is not None else 0.0,
        sum(q.idf[t] for t in dict.fromkeys(q.all_terms) if t in ct.seen_message) / total_all,
        when("fix", math.log1p(n_changed)),
        when("fix", fused),
        message_cosine,
        1.0 / (1 + message_dense_rank) if message_dense_rank is not None else 0.0,
        jaccard(set(q.all_terms), ct.subject),
    ]


def jaccard(a: set[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b| (0 when both are empty)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def bm25(tf: Mapping[str, int], idf: Mapping[str, float], length: int) -> float:
    """Okapi BM25 of one document (term frequencies ``tf``, ``length`` tokens); the average length is a fixed
    :data:`BM25_AVG_LEN` because a candidate list is too small to estimate it."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / BM25_AVG_LEN)
    return sum(idf[t] * f * (BM25_K1 + 1) / (f + norm) for t, f in sorted(tf.items()) if f > 0)
