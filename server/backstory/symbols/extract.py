"""Definition extraction: parse with tree-sitter, run a definitions query, qualify names by nesting.

The grammars, their compiled queries and the per-thread parsers come from :mod:`.grammars`, where everything
expensive happens once per language and process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

from tree_sitter import Node, QueryCursor, Tree

from .grammars import Compiled, compiled_query, parser_for
from .languages import CLASSLIKE, NON_SCOPE, SPECS, LanguageSpec
from .model import Definition
from .naming import resolve
from .reparse import errors_within

log = logging.getLogger(__name__)

#: Sources larger than this are not parsed (generated code, vendored bundles, data files).
DEFAULT_MAX_BYTES = 512_000
#: A line longer than this marks a minified/generated file: parsing it is slow and its
#: "definitions" are meaningless for prior-art search.
DEFAULT_MAX_LINE_LENGTH = 5_000
SIGNATURE_MAX = 200
# Lines that only C++ has (a line starting with one of the keywords, or ``std::`` after a non-word character);
# used to re-parse a "c" source (usually a `.h`) with the C++ grammar.
_CPP_KEYWORDS = (b"class", b"namespace", b"template", b"using")
_CPP_LINE = re.compile(rb"[ \t]*(?:class|namespace|template|using)\b")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _looks_like_cpp(source: bytes) -> bool:
    """Whether a source has a C++-only line. Substring scans find the candidates: one multiline regex over a
    large C file took milliseconds (3 ms a file in git/git's history), the scans a tenth of that."""
    at = source.find(b"std::")
    while at >= 0:
        if at == 0 or source[at - 1] not in _WORD_BYTES:
            return True
        at = source.find(b"std::", at + 1)
    for keyword in _CPP_KEYWORDS:
        at = source.find(keyword)
        while at >= 0:
            if _CPP_LINE.match(source, source.rfind(b"\n", 0, at) + 1):
                return True
            at = source.find(keyword, at + 1)
    return False


def _too_long_line(source: bytes, limit: int) -> bool:
    if len(source) <= limit:
        return False
    # a line longer than `limit` covers a whole aligned window of `limit // 2` bytes: look for a window without
    # a newline first (memchr per window), and split into lines only when there is one
    window = max(1, limit // 2)
    if all(source.find(b"\n", i, i + window) != -1 for i in range(0, len(source) - window + 1, window)):
        return False
    return max(map(len, source.split(b"\n"))) > limit


def _signature(source: bytes, start_byte: int) -> str:
    line_start = source.rfind(b"\n", 0, start_byte) + 1
    line_end = source.find(b"\n", start_byte)
    if line_end == -1:
        line_end = len(source)
    # bound the slice first so a pathological line cannot make us decode megabytes
    raw = source[line_start : min(line_end, line_start + 4 * SIGNATURE_MAX)]
    return raw.decode("utf-8", "replace").strip()[:SIGNATURE_MAX]


def _lines(node: Node) -> tuple[int, int]:
    start, end = node.start_point, node.end_point
    end_row = end.row
    if end.column == 0 and end_row > start.row:  # node ends with its newline
        end_row -= 1
    return start.row + 1, end_row + 1


class _Found(NamedTuple):
    """One matched definition before qualification; immutable, so a version's list can be carried over to the
    next older version (see `versions`). A named tuple, not a frozen dataclass: a history walk creates a few
    hundred thousand of these, and a tuple is several times cheaper to build."""

    start_byte: int
    end_byte: int
    ntype: str
    segment: str
    short: str
    kind: str
    start_line: int
    end_line: int
    signature: str


def _collect(
    compiled: Compiled,
    spec: LanguageSpec,
    root: Node,
    source: bytes,
    spans: Sequence[tuple[int, int]] | None = None,
) -> list[_Found]:
    """Every definition matched in the tree, or (``spans``) in matches that intersect one of the byte spans."""
    found: list[_Found] = []
    seen: set[tuple[int, int, str]] = set()
    kinds = compiled.kinds
    cursor = QueryCursor(compiled.query)
    for span in spans if spans is not None else (None,):
        if span is not None:
            cursor.set_byte_range(*span)
        for _pattern, captures in cursor.matches(root):
            node: Node | None = None
            kind = ""
            for cname, nodes in captures.items():
                k = kinds.get(cname)
                if k is not None and nodes:
                    node, kind = nodes[0], k
                    break
            if node is None:
                continue
            ntype = node.type
            key = (node.start_byte, node.end_byte, ntype)
            if key in seen or ntype in spec.skip_nodes:  # several patterns may match one node
                continue
            names = captures.get("name")
            kind = spec.node_kinds.get(ntype, kind)
            res = resolve(spec.id, node, names[0] if names else None, kind, source)
            if res is None:
                continue
            seen.add(key)
            start_line, end_line = _lines(node)
            found.append(
                _Found(
                    node.start_byte,
                    node.end_byte,
                    ntype,
                    res[0],
                    res[1],
                    res[2],
                    start_line,
                    end_line,
                    _signature(source, node.start_byte),
                )
            )
    return found


def _cpp_namespace_functions(found: list[_Found]) -> list[_Found]:
    """``int detail::checksum() {}`` is a function when ``detail`` is a namespace of this file.

    Out-of-line qualified definitions are assumed to be methods (their class usually lives in a
    header), unless the qualifier is known here to be a namespace and not a class.
    """
    modules = {f.short for f in found if f.kind == "module"}
    if not modules:
        return found
    classes = {f.short for f in found if f.kind in CLASSLIKE}
    out = []
    for f in found:
        if f.kind == "method" and "::" in f.segment:
            owner = f.segment.rsplit("::", 2)[-2]
            if owner in modules and owner not in classes:
                f = f._replace(kind="function")
        out.append(f)
    return out


# function values that tags.scm also reports as definitions of their own when they carry a name
_VALUE_FUNCTIONS = frozenset({"function_expression", "function", "generator_function", "arrow_function"})
_CALLABLE = frozenset({"function", "method"})

#: A qualified definition as a plain tuple, in canonical order when sorted on its first four items (those of
#: `model.sort_definitions`): (start line, -end line, qualified name, kind, short name, end line, signature).
#: The history reader works on these directly; `Definition` objects are built only for callers that ask.
Row = tuple[int, int, str, str, str, int, str]
_CANONICAL = itemgetter(0, 1, 2, 3)
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def _qualify(found: list[_Found], spec: LanguageSpec) -> list[Row]:
    """Turn byte-range nesting into qualified names and method kinds; rows in canonical order.

    A stack of open scopes is swept in (start, -end) order, so each definition's nearest scope is
    on top. Types and constants are never scopes (``typedef struct S {..} S`` must not yield
    ``S.S``). A ``function`` whose nearest scope is class-like becomes a ``method``. A named function
    expression that is the whole value of a binding (JS/TS ``x.f = function f() {}``, ``{f: function g() {}}``)
    is that binding's definition, not a nested one (it would read ``f.f``).
    """
    stack: list[tuple[int, str, str]] = []  # (end byte, qualified name, kind) of each open scope
    out: list[Row] = []
    sep = spec.separator
    qualify = spec.qualify
    method_parents = spec.method_parents
    ordered = sorted(found, key=_SECOND, reverse=True)  # two stable sorts: by start byte, then end byte descending
    ordered.sort(key=_FIRST)
    for _start_byte, end_byte, ntype, segment, short, kind, start_line, end_line, signature in ordered:
        while stack and stack[-1][0] < end_byte:
            stack.pop()
        if stack:
            parent = stack[-1]
            if ntype in _VALUE_FUNCTIONS and parent[0] == end_byte and parent[2] in _CALLABLE:
                continue  # `app.init = function init() {}`: the bound function itself, not a definition inside it
            if kind == "function" and parent[2] in method_parents:
                kind = "method"
            name = f"{parent[1]}{sep}{segment}" if qualify else segment
        else:
            name = segment
        out.append((start_line, -end_line, name, kind, short, end_line, signature))
        if kind not in NON_SCOPE:
            stack.append((end_byte, name, kind))
    out.sort(key=_CANONICAL)
    return out


def to_definitions(rows: list[Row]) -> list[Definition]:
    return [Definition(r[2], r[4], r[3], r[0], r[5], r[6]) for r in rows]


@dataclass(slots=True)
class Parsed:
    """One file version's parse tree with what reading definitions from it needs.

    Kept (by `versions.VersionCache`) so that the next older version of the same file can be parsed
    incrementally from it. ``tree`` is ``None`` for an empty source. ``language`` is the grammar
    actually used: a ``"c"`` source that only parses as C++ says ``"cpp"``.
    """

    source: bytes
    requested: str
    language: str
    tree: Tree | None
    incremental: bool = False  # parsed from an edited tree of another version (not redone from scratch)
    found: list[_Found] | None = None  # every matched definition, once `definitions` ran
    lines: Any = None  # `versions._Lines` of ``source``, once a diff needed it


def parse(
    source: bytes,
    language: str,
    *,
    base: Tree | None = None,
    reparsed: Sequence[tuple[int, int]] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
) -> Parsed | None:
    """Parse ``source``; ``None`` means "not parsed" (no grammar, over a limit, or an unexpected failure).

    ``base`` is an already edited tree of another version of this file (see `versions`): tree-sitter then
    re-parses only around the edits. A re-parse that hits a syntax error is redone from scratch, because
    tree-sitter's error recovery may depend on the previous tree and attribution must not depend on the walk;
    unless ``reparsed`` (byte spans of ``source`` that ``base`` was made to re-parse, its error regions
    included) holds every error of the result, which then is what a fresh parse gives (see `reparse`).
    """
    if language not in SPECS or len(source) > max_bytes:
        return None
    try:
        compiled = compiled_query(language)
        if compiled is None:
            return None
        if not source:
            return Parsed(source, language, language, None)
        if _too_long_line(source, max_line_length):
            return None
        parser = parser_for(language, compiled.language)
        tree = parser.parse(source, base) if base is not None else parser.parse(source)
        incremental = base is not None
        if incremental and tree.root_node.has_error and (reparsed is None or not errors_within(tree, reparsed)):
            tree, incremental = parser.parse(source), False
        if language == "c" and tree.root_node.has_error and _looks_like_cpp(source):
            # `.h` is ambiguous: a C++ header read as C loses its classes and namespaces.
            cpp = compiled_query("cpp")
            if cpp is not None:
                return Parsed(source, language, "cpp", parser_for("cpp", cpp.language).parse(source))
        return Parsed(source, language, language, tree, incremental)
    except Exception:  # the contract is "never raise on any bytes"
        log.exception("parsing failed for a %s source of %d bytes", language, len(source))
        return None


def rows(parsed: Parsed) -> list[Row] | None:
    """The qualified definitions of a parsed version as `Row` tuples, in canonical order; ``None`` on an
    unexpected failure."""
    if parsed.tree is None:
        return []
    try:
        spec = SPECS[parsed.language]
        if parsed.found is None:
            compiled = compiled_query(parsed.language)
            assert compiled is not None
            parsed.found = _collect(compiled, spec, parsed.tree.root_node, parsed.source)
        found = _cpp_namespace_functions(parsed.found) if spec.id == "cpp" else parsed.found
        return _qualify(found, spec)
    except Exception:  # the contract is "never raise on any bytes"
        log.exception("definition extraction failed for a %s source of %d bytes", parsed.language, len(parsed.source))
        return None


def definitions(parsed: Parsed) -> list[Definition] | None:
    """The definitions of a parsed version (see `extract_definitions`); ``None`` on an unexpected failure."""
    found = rows(parsed)
    return None if found is None else to_definitions(found)


def extract_definitions(
    source: bytes,
    language: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
) -> list[Definition] | None:
    """All definitions in ``source``, in (start_line, -end_line, name) order.

    A ``"c"`` source that fails to parse as C but has C++-only lines (``class``, ``namespace``,
    ``template``, ``std::``) is parsed as C++ instead, since ``.h`` serves both languages.

    Returns ``None`` ("not parsed") when ``language`` has no grammar, ``source`` exceeds
    ``max_bytes``, or any line exceeds ``max_line_length`` (minified code). Never raises: syntax
    errors still yield whatever tree-sitter recovered around its ERROR nodes, invalid UTF-8 is
    replaced in names, and an unexpected failure is logged and reported as ``None``.
    """
    parsed = parse(source, language, max_bytes=max_bytes, max_line_length=max_line_length)
    return None if parsed is None else definitions(parsed)
