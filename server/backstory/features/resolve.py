"""Which definition a cursor asks about: the one named at a definition site, or the one a reference resolves to.

A reference is looked up in the same file first (a method of the enclosing class for ``self.x`` / ``this.x``, a
free definition for a plain name), then among HEAD's definitions (built once per HEAD in the background by
:class:`HeadDefinitions`). Parameters, locals, names nobody defines and names that more than one definition
could mean resolve to nothing: a hover that guesses is worse than none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from dulwich.objects import Blob, Commit

from .. import symbols
from ..history.repo import HistoryError, head_sha
from ..symbols.cursor import SELF_WORDS, Target, target_at
from ..symbols.languages import CLASSLIKE, SPECS
from .locate import head_blob

if TYPE_CHECKING:
    from ..search.engine import Engine

log = logging.getLogger(__name__)

MAX_FILES = 6000  # HEAD's parsable files considered for cross-file resolution; beyond it, same file only
MAX_BYTES = symbols.DEFAULT_MAX_BYTES
#: languages where a bare name inside a class may call one of its methods (implicit ``this``)
IMPLICIT_SELF = frozenset({"java", "cpp", "ruby", "c"})


@dataclass(frozen=True)
class Resolved:
    """A definition a cursor asks about: ``path`` (repository-relative) and ``source`` are the file the
    definition's lines refer to (the editor's buffer for the same file, HEAD's content for another)."""

    path: str
    definition: symbols.Definition
    source: bytes
    same_file: bool
    target: Target


@dataclass(frozen=True)
class Table:
    head: str
    by_name: dict[str, list[tuple[str, symbols.Definition]]]
    files: int
    complete: bool


class HeadDefinitions:
    """Every definition in HEAD's tree, by short name; one table per repository, rebuilt when HEAD moves
    (re-parsing only the files whose content changed)."""

    def __init__(self) -> None:
        self._tables: dict[str, Table] = {}
        self._blobs: dict[bytes, list[symbols.Definition]] = {}
        self._lock = threading.Lock()

    def ready(self, engine: Engine, head: str | None) -> Table | None:
        table = self._tables.get(str(engine.root))
        return table if table is not None and head is not None and table.head == head else None

    def build(self, engine: Engine) -> Table | None:
        """The table for the current HEAD (built now if needed; blocking: call it from a worker thread)."""
        try:
            head = head_sha(engine.repo)
        except Exception:
            return None
        table = self.ready(engine, head)
        if table is not None:
            return table
        with self._lock:
            table = self.ready(engine, head)
            if table is None:
                table = self._build(engine, head)
                self._tables[str(engine.root)] = table
        return table

    def _build(self, engine: Engine, head: str) -> Table:
        repo = engine.repo
        commit = repo[head.encode()]
        assert isinstance(commit, Commit)
        supported = symbols.supported_languages()
        by_name: dict[str, list[tuple[str, symbols.Definition]]] = {}
        seen: dict[bytes, list[symbols.Definition]] = {}
        files = 0
        complete = True
        for entry in repo.object_store.iter_tree_contents(commit.tree):
            if entry.path is None or entry.sha is None or entry.mode is None or entry.mode & 0o170000 != 0o100000:
                continue  # regular files only (no submodules, symlinks)
            path = entry.path.decode("utf-8", "replace")
            language = symbols.language_for_path(path)
            if language not in supported:
                continue
            files += 1
            if files > MAX_FILES:
                complete = False
                break
            defs = self._blobs.get(entry.sha)
            if defs is None:
                blob = repo[entry.sha]
                data = blob.data if isinstance(blob, Blob) else b""
                defs = (symbols.extract_definitions(data, language or "") or []) if len(data) <= MAX_BYTES else []
            seen[entry.sha] = defs
            for d in defs:
                by_name.setdefault(d.short_name, []).append((path, d))
        self._blobs = seen  # keep only HEAD's blobs: the next HEAD re-parses what changed
        log.info("HEAD definitions: %d files, %d names%s", files, len(by_name), "" if complete else " (capped)")
        return Table(head, by_name, files, complete)


HEAD_DEFINITIONS = HeadDefinitions()


def _separator(language: str) -> str:
    spec = SPECS.get(language)
    return spec.separator if spec is not None else "."


def _parent(d: symbols.Definition, sep: str) -> str | None:
    return d.name.rsplit(sep, 1)[0] if sep in d.name else None


def _last(name: str | None, sep: str) -> str | None:
    if not name:
        return None
    for s in (sep, ".", "::", "->"):
        name = name.rsplit(s, 1)[-1]
    return name.strip("()") or None


def _one(candidates: Iterable[symbols.Definition]) -> symbols.Definition | None:
    found = list(dict.fromkeys(candidates))
    return found[0] if len(found) == 1 else None


def _one_at_head(candidates: Iterable[tuple[str, symbols.Definition]]) -> tuple[str, symbols.Definition] | None:
    found = list(dict.fromkeys(candidates))
    return found[0] if len(found) == 1 else None


def _owners(defs: list[symbols.Definition], line: int, sep: str) -> list[str]:
    """Qualified names of the classes (or a Go/Rust method's type) around ``line``, innermost first."""
    owners: list[str] = []
    for d in reversed(symbols.enclosing_definitions(defs, line)):
        if d.kind in CLASSLIKE:
            owners.append(d.name)
        elif d.kind == "method" and _parent(d, sep):
            owners.append(_parent(d, sep) or "")
    return owners


def resolve_in_file(t: Target, defs: list[symbols.Definition], language: str) -> tuple[symbols.Definition | None, bool]:
    """The definition ``t`` names among ``defs`` (its file's), and whether to look at HEAD's definitions next."""
    if t.role == "definition":
        return t.definition, False
    if t.role == "local":
        return None, False
    sep = _separator(language)
    owners = _owners(defs, t.line, sep)
    named = [d for d in defs if d.short_name == t.name]
    if t.role == "member":
        q = t.qualifier or ""
        if q in SELF_WORDS or q == t.receiver or q.startswith("super("):
            for owner in owners:
                found = _one(d for d in named if d.name == f"{owner}{sep}{t.name}")
                if found is not None:
                    return found, False
            found = _one(d for d in named if d.kind == "method")
            return found, found is None  # an inherited method: maybe in another file
        qualifier = _last(q, sep)
        return _one(d for d in named if _last(_parent(d, sep), sep) == qualifier), True
    # a plain name: a method of an enclosing class (languages with an implicit `this`), a definition nested in
    # the enclosing function, else a free definition of the file
    enclosing = [d.name for d in reversed(symbols.enclosing_definitions(defs, t.line))]
    if language in IMPLICIT_SELF:
        for owner in owners:
            found = _one(d for d in named if d.name == f"{owner}{sep}{t.name}")
            if found is not None:
                return found, False
    for scope in enclosing:
        found = _one(d for d in named if _parent(d, sep) == scope and d.kind != "method")
        if found is not None:
            return found, False
    modules = {d.name for d in defs if d.kind == "module"}
    free = [d for d in named if d.kind != "method" and (_parent(d, sep) is None or _parent(d, sep) in modules)]
    if len(free) > 1:
        free = [d for d in free if d.kind != "impl"] or free  # Rust: `Point` is the struct, not its impl
    if free:
        return _one(free), False
    return None, True


def resolve_at_head(t: Target, table: Table, path: str, language: str) -> tuple[str, symbols.Definition] | None:
    """The one definition in HEAD's other files that ``t`` names, if there is exactly one."""
    if not table.complete:
        return None
    sep = _separator(language)
    others = [(p, d) for p, d in table.by_name.get(t.name, []) if p != path]
    if t.role == "member":
        q = t.qualifier or ""
        if q in SELF_WORDS or q == t.receiver or q.startswith("super("):
            return _one_at_head((p, d) for p, d in others if d.kind == "method")
        owner = _last(q, sep)
        return _one_at_head(
            (p, d)
            for p, d in others
            if _last(_parent(d, _separator(symbols.language_for_path(p) or "")), sep) == owner
            or (_parent(d, _separator(symbols.language_for_path(p) or "")) is None and PurePosixPath(p).stem == owner)
        )
    if t.role == "reference":
        free = [(p, d) for p, d in others if d.kind not in ("method", "impl") and _parent(d, sep) is None]
        return _one_at_head(free)
    return None


def resolve(
    engine: Engine, path: str, source: bytes, line: int, column: int, head: str | None = None
) -> Resolved | None:
    """The definition the identifier at 1-based ``line``, byte ``column`` of ``path`` (content ``source``) asks
    about, or None. HEAD's definitions are used only when their table for ``head`` is ready."""
    language = symbols.language_for_path(path)
    if language not in symbols.supported_languages():
        return None
    defs = symbols.definitions(source, language or "") or []
    t = target_at(source, language or "", defs, line, column)
    if t is None:
        return None
    d, look_further = resolve_in_file(t, defs, language or "")
    if d is not None:
        return Resolved(path, d, source, True, t)
    if not look_further:
        return None
    table = HEAD_DEFINITIONS.ready(engine, head)
    if table is None:
        return None
    found = resolve_at_head(t, table, path, language or "")
    if found is None:
        return None
    other, d = found
    try:
        data = head_blob(engine, other)
    except HistoryError:
        return None
    return Resolved(other, d, data, False, t)
