"""Code-aware tokenization shared by indexing and querying.

Tantivy's built-in tokenizers cannot split ``getUserName`` or ``MAX_RETRY_COUNT``; we expand identifiers in
Python before handing text to a whitespace + lowercase + stopword + stemmer analyzer. The original token is kept
next to its parts, so an exact identifier still outranks a loose match on its pieces.
"""

from __future__ import annotations

import re
from functools import lru_cache

import tantivy

ANALYZER_NAME = "code"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+)+(?![0-9A-Za-z_])|[0-9]+")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
MAX_TOKEN = 40


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
    return " ".join(_expand(w) for w in _WORD.findall(text))


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


def query_terms(text: str) -> list[str]:
    """The distinct index terms of a query, in first-seen order (deterministic)."""
    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = build_analyzer()
    seen: dict[str, None] = {}
    for term in _ANALYZER.analyze(code_text(text)):
        seen.setdefault(term, None)
    return list(seen)
