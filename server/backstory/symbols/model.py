"""The `Definition` record and the line-range helpers that work on lists of them.

Definitions are plain, hashable, frozen values so they can be cached, compared in tests and
stored in an index without any tree-sitter object keeping a parse tree alive.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The whole kind vocabulary. Kept deliberately small so that callers (ranking, display,
#: filters) can switch on it without per-language knowledge:
#:
#: - ``function``  free function, nested function, Rust ``macro_rules!``, C function-like macro
#: - ``method``    function whose nearest enclosing definition is a class-like one (see extract)
#: - ``class``     class (Python/JS/TS/Java/Ruby/C++), Java record, Ruby ``class << Const``
#: - ``interface`` TS/Java/Go interface, Java ``@interface``
#: - ``struct``    C/C++/Rust/Go struct, C/C++/Rust union
#: - ``enum``      enum of any language
#: - ``trait``     Rust trait
#: - ``impl``      Rust ``impl`` block (named after its self type)
#: - ``module``    Rust ``mod``, Ruby ``module``, C++ ``namespace``, TS ``namespace``/``module``
#: - ``type``      type alias / typedef / Go non-struct non-interface type
#: - ``constant``  module-level Python assignment, Go/Rust ``const``/``static``, Ruby ``CONST =``,
#:                 JS ``export`` assignment
KINDS: frozenset[str] = frozenset(
    {
        "function",
        "method",
        "class",
        "interface",
        "struct",
        "enum",
        "trait",
        "impl",
        "module",
        "type",
        "constant",
    }
)


@dataclass(frozen=True, slots=True)
class Definition:
    """One named definition found in a source file.

    ``start_line``/``end_line`` are 1-based and inclusive and cover the definition node itself
    (decorators and leading doc comments are not included). ``name`` is qualified by the
    enclosing definitions (see the package docstring for the per-language convention);
    ``short_name`` is the bare identifier. ``signature`` is the stripped source line on which
    the definition starts, truncated to 200 characters, so it reads like code in a UI.
    """

    name: str
    short_name: str
    kind: str
    start_line: int
    end_line: int
    signature: str


def _order(d: Definition) -> tuple[int, int, str, str]:
    return (d.start_line, -d.end_line, d.name, d.kind)


def sort_definitions(defs: Iterable[Definition]) -> list[Definition]:
    """Canonical order: by start line, outer (longer) before inner, then name and kind."""
    return sorted(defs, key=_order)


def enclosing_definitions(defs: Sequence[Definition], line: int) -> list[Definition]:
    """All definitions whose range contains ``line`` (1-based), outermost first.

    Linear in ``len(defs)``; for many lines against the same file use `definitions_touching`.
    """
    found = [d for d in defs if d.start_line <= line <= d.end_line]
    found.sort(key=_order)
    return found


def innermost_definition(defs: Sequence[Definition], line: int) -> Definition | None:
    """The most deeply nested definition containing ``line``, or ``None``.

    With properly nested ranges the innermost one is the last in canonical order (it starts
    latest, or starts on the same line and ends earlier).
    """
    best: Definition | None = None
    for d in defs:
        if d.start_line <= line <= d.end_line and (best is None or _order(d) > _order(best)):
            best = d
    return best


def definitions_touching(defs: Sequence[Definition], lines: Iterable[int]) -> list[Definition]:
    """Every definition whose range contains at least one of ``lines``, in canonical order.

    Ancestors are included naturally: a nested method's lines are also inside its class. This is
    what a diff hunk "touches". Cost is O((n + m) log m) for n definitions and m lines: lines are
    sorted once and each definition does one bisect, so whole-file diffs stay cheap.
    """
    wanted = sorted(set(lines))
    if not wanted:
        return []
    hit: list[Definition] = []
    for d in defs:
        i = bisect_left(wanted, d.start_line)
        if i < len(wanted) and wanted[i] <= d.end_line:
            hit.append(d)
    hit.sort(key=_order)
    return hit
