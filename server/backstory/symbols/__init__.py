"""Tree-sitter definition extraction: which functions, classes, ... a file defines, and where.

Backstory uses this to say which definitions a historical change touched ("this commit changed
``Client.send``") and to search prior art by symbol. Public API::

    language_for_path(path) -> str | None
    supported_languages() -> frozenset[str]
    extract_definitions(source, language, *, max_bytes=512_000, max_line_length=5_000)
        -> list[Definition] | None
    enclosing_definitions(defs, line) / innermost_definition(defs, line)
    definitions_touching(defs, lines)
    definitions(source, language)  # extract_definitions, memoised by content

Kinds: see `KINDS` (function, method, class, interface, struct, enum, trait, impl, module, type,
constant). A ``function`` directly inside a class-like definition (class, struct, interface,
trait, impl, enum; for Ruby also module) is reported as ``method``.

Qualified names are built from the nesting of definition ranges:

- Python, JavaScript, TypeScript/TSX, Java, Go, Ruby: dot-joined, e.g. ``Outer.Inner.method``,
  ``outer_function.inner_function``, TS ``namespace A.B`` → ``A.B.f``.
- Go: methods are named after their receiver's base type, ``Server.Run`` (pointer and type
  arguments dropped); interface methods ``Reader.Read``.
- Ruby: ``Mod.Class.method`` for both instance and singleton (``def self.x``) methods;
  ``class A::B`` inside ``module M`` → ``M.A.B``.
- Rust: ``::``-joined. ``impl`` blocks are named after their self type's base name, so methods
  read ``Type::method`` for inherent and trait impls alike (``impl Display for Point`` →
  ``Point::fmt``); ``mod`` nesting gives ``geo::Point::area``; trait methods ``Trait::method``.
- C++: ``::``-joined through namespaces and classes; out-of-line ``void Client::send()`` keeps
  its written qualifier (``ns::Client::send`` inside ``namespace ns``); template arguments are
  dropped.
- C: not qualified (C has a single namespace for functions and tags). A ``"c"`` source (``.h``)
  that only parses as C++ is extracted with the C++ rules.

Deliberately not extracted: local variables, fields/properties holding plain values, Go/JS
``var``s, Java fields, enum variants, anonymous functions and classes (their contents are
attributed to the enclosing named definition instead).

For a history walk, `versions.VersionCache` gives the same definitions per file version while parsing each
older version incrementally from its successor and re-matching only what changed.

Queries: each grammar wheel's ``queries/tags.scm`` (``@definition.*`` patterns only) plus our
``queries/<language>.scm``; C and C++ use only ours. See `languages.SPECS`.
"""

from .cache import definitions
from .extract import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_LENGTH, extract_definitions
from .languages import language_for_path, supported_languages
from .model import (
    KINDS,
    Definition,
    definitions_touching,
    enclosing_definitions,
    innermost_definition,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINE_LENGTH",
    "KINDS",
    "Definition",
    "definitions",
    "definitions_touching",
    "enclosing_definitions",
    "extract_definitions",
    "innermost_definition",
    "language_for_path",
    "supported_languages",
]
