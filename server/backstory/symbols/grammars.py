"""Grammars and definitions queries: each language's tree-sitter grammar loaded and its query compiled once per
process (``Language`` and compiled ``Query`` objects are read-only and shared), parsers kept per thread (a
``tree_sitter.Parser`` is not safe to share while parsing). :mod:`.extract` runs them."""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from tree_sitter import Language, Parser, Query

from .languages import SPECS
from .model import KINDS

log = logging.getLogger(__name__)

# tags.scm capture suffixes outside our vocabulary, mapped into it.
_CAPTURE_KINDS = {k: k for k in KINDS} | {"macro": "function"}


@dataclass(frozen=True, slots=True)
class Compiled:
    language: Language
    query: Query
    kinds: dict[str, str]  # capture name ("definition.class") → kind


def _read_bundled(module: str) -> str:
    return (files(module) / "queries" / "tags.scm").read_text(encoding="utf-8")


def _read_own(name: str) -> str:
    return (files("backstory.symbols.queries") / name).read_text(encoding="utf-8")


def _compile(language: Language, text: str) -> Query:
    """Compile ``text`` and disable every pattern that has no ``@definition.*`` capture.

    The bundled tags.scm files also find references (every call, every identifier in Ruby and
    Go); those would dominate matching time and are of no use here.
    """
    query = Query(language, text)
    raw = text.encode("utf-8")
    for i in range(query.pattern_count):
        if b"@definition." not in raw[query.start_byte_for_pattern(i) : query.end_byte_for_pattern(i)]:
            query.disable_pattern(i)
    return query


@cache
def compiled_query(language_id: str) -> Compiled | None:
    """Load the grammar and compile the definitions query once; ``None`` if the grammar is missing."""
    spec = SPECS[language_id]
    try:
        module = importlib.import_module(spec.module)
        language = Language(getattr(module, spec.function)())
        own = _read_own(spec.extra) if spec.extra else ""
        bundled = [_read_bundled(m) for m in spec.bundled]
    except (ImportError, AttributeError, OSError, ValueError) as exc:
        log.warning("no tree-sitter grammar for %s: %s", language_id, exc)
        return None
    try:
        query = _compile(language, "\n".join([*bundled, own]))
    except Exception as exc:  # a grammar upgrade renamed a node used by a shipped tags.scm
        if not own:
            log.warning("cannot compile definitions query for %s: %s", language_id, exc)
            return None
        log.warning("bundled tags.scm unusable for %s (%s); using own query only", language_id, exc)
        query = _compile(language, own)
    kinds: dict[str, str] = {}
    for i in range(query.capture_count):
        cname = query.capture_name(i)
        if cname.startswith("definition.") and cname[11:] in _CAPTURE_KINDS:
            kinds[cname] = _CAPTURE_KINDS[cname[11:]]
    return Compiled(language, query, kinds)


_local = threading.local()


def parser_for(language_id: str, language: Language) -> Parser:
    parsers: dict[str, Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(language_id)
    if parser is None:
        parser = parsers[language_id] = Parser(language)
    return parser
