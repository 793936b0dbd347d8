"""Code-aware tokenization shared by indexing and querying.

Tantivy's built-in tokenizers cannot split ``getUserName`` or ``MAX_RETRY_COUNT``; we expand identifiers in
Python before handing text to a whitespace + lowercase + stopword + stemmer analyzer. The original token is kept
next to its parts, so an exact identifier still outranks a loose match on its pieces.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from itertools import chain

import tantivy

ANALYZER_NAME = "code"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+)+(?![0-9A-Za-z_])|[0-9]+")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
MAX_TOKEN = 40
#: Verbs that open most change descriptions ("Fix ...", "Add support for ...", "Use X instead of Y"). In a
#: query they say what kind of change was made, not what it touched, and in code they are noise (Rust's `use`,
#: every `add`/`update` method), so the code lanes' queries leave them out (:func:`query_terms`). Measured on
#: the message-blind evaluation, 400 queries per repository: fused MRR@10 +0.005 to +0.022 on four of five
#: repositories, +0.000 on the fifth (docs/benchmarks.md, fifth session).
CHANGE_VERBS = frozenset((
    "fix", "fixes", "fixed", "add", "adds", "added", "update", "updates", "updated", "remove", "removes", "removed",
    "use", "uses", "used", "make", "makes", "made", "change", "changes", "changed", "improve", "improved",
    "support", "allow", "allows", "move", "moved", "rename", "renamed", "refactor", "clean", "cleanup", "bump",
    "replace", "replaced",
))  # fmt: skip
_EDGE_PUNCTUATION = ".,:;"


def split_identifier(word: str) -> list[str]:
    """``parseHTTPResponse2`` -> ``[parse, HTTP, Response, 2]``; snake_case splits on underscores."""
    parts: list[str] = []
    for chunk in word.split("_"):
        if chunk:
            parts.extend(_PARTS.findall(chunk))
    return parts


@lru_cache(maxsize=65536)
def _expand(word: str) -> str:
    if _VERSION.fullmatch(word):  # a version or dotted number: the whole of it, then its numbers
        return word + " " + " ".join(word.split("."))
    parts = split_identifier(word)
    if len(parts) <= 1:
        return word
    return word + " " + " ".join(parts)


def code_text(text: str) -> str:
    """Text rewritten as whitespace-separated tokens: every identifier followed by its parts."""
    return " ".join(map(_expand, _WORD.findall(text)))  # map: no Python frame per word (13 % faster)


def build_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_ANALYZER: tantivy.TextAnalyzer | None = None


def without_change_verbs(text: str) -> str:
    """``text`` without its :data:`CHANGE_VERBS` (whole words, any case, trailing ``.,:;`` ignored); unchanged
    when nothing else would remain, so a query of only such words still searches for them."""
    words = text.split()
    kept = [w for w in words if w.lower().strip(_EDGE_PUNCTUATION) not in CHANGE_VERBS]
    return " ".join(kept) if kept and len(kept) < len(words) else text


def _analyzer() -> tantivy.TextAnalyzer:
    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = build_analyzer()
    return _ANALYZER


def analyze(text: str) -> list[str]:
    """The index terms of any text, in order, as the lanes index them (identifiers split, stemmed)."""
    return list(_analyzer().analyze(code_text(text)))


#: Each word's terms, learnt a batch at a time (:func:`_learn`); emptied when it reaches the bound: at most
#: ~25 MB (random identifiers of 4-18 letters took 479 bytes an entry), within the language server's budget
_TERMS: dict[str, tuple[str, ...]] = {}
_TERMS_MAX = 50_000
_SEPARATOR = "\x01"  # one token through every filter, and never part of a word (_WORD)
_LEARNING = threading.Lock()


def _learn(words: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """:data:`_TERMS` with every one of ``words`` in it. The unknown ones go through the analyzer in one call,
    separated by a token that passes through unchanged: a call per word cost ~7 us, most of a cold commit's
    analysis."""
    missing = [w for w in dict.fromkeys(words) if w not in _TERMS]
    if not missing:
        return _TERMS
    if len(_TERMS) + len(missing) > _TERMS_MAX:
        _TERMS.clear()
        missing = list(dict.fromkeys(words))
    groups: list[list[str]] = [[]]
    for term in _analyzer().analyze(f" {_SEPARATOR} ".join(_expand(w) for w in missing)):
        if term == _SEPARATOR:
            groups.append([])
        else:
            groups[-1].append(term)
    if len(groups) != len(missing):  # cannot happen while every filter keeps the separator; be exact anyway
        groups = [list(_analyzer().analyze(_expand(w))) for w in missing]
    _TERMS.update(zip(missing, map(tuple, groups), strict=True))
    return _TERMS


def term_counts(text: str) -> Counter[str]:
    """``Counter(analyze(text))``, each distinct word analysed once: every filter of the analyzer works on one
    whitespace token at a time, so a word's terms never depend on its neighbours. Code repeats its words: over
    git/git's newest 400 commits' excerpts, 0.73 ms a commit analysing the text whole, 0.48 ms by word with the
    table empty, 0.37 ms with it warm (the results equal, tests/test_analyzer.py)."""
    words = _WORD.findall(text)
    with _LEARNING:  # no other thread empties the table between learning and reading
        return Counter(chain.from_iterable(map(_learn(words).__getitem__, words)))  # no Python loop per word


def term_set(text: str) -> frozenset[str]:
    """``frozenset(analyze(text))``, each distinct word analysed once (see :func:`term_counts`)."""
    words = set(_WORD.findall(text))
    with _LEARNING:
        return frozenset(chain.from_iterable(map(_learn(words).__getitem__, words)))


def query_terms(text: str, drop_change_verbs: bool = False) -> list[str]:
    """The distinct index terms of a query, in first-seen order (deterministic); ``drop_change_verbs``: see
    :func:`without_change_verbs`."""
    if drop_change_verbs:
        text = without_change_verbs(text)
    return list(dict.fromkeys(analyze(text)))
