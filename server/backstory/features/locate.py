"""Where a request points: a structured position in the repository and the definition around it.

Positions travel as :class:`Position` (repository-relative path, 1-based line) from the CLI's argument parser
and the language server's handlers to the features; nothing is formatted into ``PATH:LINE`` and parsed back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.objects import Blob, Commit, Tree

from .. import symbols
from ..history.repo import HistoryError, head_sha, repo_relative

if TYPE_CHECKING:
    from ..search.engine import Engine


@dataclass(frozen=True)
class Position:
    """A line of a file: ``path`` relative to the worktree root (slash-separated), ``line`` 1-based."""

    path: str
    line: int

    def __post_init__(self) -> None:
        if self.line < 1:
            raise HistoryError(f"line numbers start at 1, got {self.line}")

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def parse_position(spec: str, root: Path, bases: tuple[Path, ...] = ()) -> Position:
    """``PATH:LINE`` as typed by a user (the CLI, an evaluation file) as a :class:`Position`; PATH absolute, or
    relative to the first of ``bases`` that puts it inside ``root`` (default: ``root`` itself)."""
    path, sep, line = spec.rpartition(":")
    if not sep or not path or not line.strip().isdigit():
        raise HistoryError(f"expected PATH:LINE (1-based line), got {spec!r}")
    return Position(repo_relative(root, path, bases=bases or (root,)), int(line))


@dataclass
class Located:
    path: str
    line: int
    source: bytes
    definition: symbols.Definition | None


def head_blob(engine: Engine, rel: str) -> bytes:
    """The content of ``rel`` at HEAD."""
    repo = engine.repo
    commit = repo[head_sha(repo).encode()]
    assert isinstance(commit, Commit)
    obj: Any = repo[commit.tree]
    for part in rel.split("/"):
        if not isinstance(obj, Tree):
            raise HistoryError(f"{rel} is not a file in HEAD")
        try:
            _mode, sha = obj[part.encode("utf-8", "surrogateescape")]
        except KeyError:
            raise HistoryError(f"{rel} is not in HEAD (new or untracked file?)") from None
        obj = repo[sha]
    if not isinstance(obj, Blob):
        raise HistoryError(f"{rel} is a directory, not a file")
    return obj.data


def locate(engine: Engine, pos: Position, source: bytes | None = None) -> Located:
    """The innermost definition at ``pos`` in ``source`` (default: the file at HEAD)."""
    data = head_blob(engine, pos.path) if source is None else source
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    if pos.line > max(n_lines, 1):
        raise HistoryError(f"line {pos.line} is past the end of {pos.path} ({n_lines} lines)")
    language = symbols.language_for_path(pos.path)
    defs = symbols.definitions(data, language or "") if language in symbols.supported_languages() else None
    d = symbols.innermost_definition(defs, pos.line) if defs else None
    # the catalogue stores paths decoded with replacement characters (history/reader.py): a file name that is
    # not UTF-8 arrives here surrogate-escaped from the file system, and must be looked up in that form
    return Located(pos.path.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), pos.line, data, d)


def symbol_json(loc: Located) -> dict[str, Any] | None:
    d = loc.definition
    if d is None:
        return None
    return {"name": d.name, "kind": d.kind, "path": loc.path, "start": d.start_line, "end": d.end_line}


def why_no_symbol(loc: Located) -> str:
    """Why a position has no definition, when the reason is not simply "between definitions" (`` (…)`` or "")."""
    language = symbols.language_for_path(loc.path)
    if language not in symbols.supported_languages():
        return f" ({language or 'this file type'} has no symbol parser)"
    if len(loc.source) > symbols.DEFAULT_MAX_BYTES:
        return f" (the file is {len(loc.source):,} bytes; symbols are parsed up to {symbols.DEFAULT_MAX_BYTES:,})"
    if any(len(row) > symbols.DEFAULT_MAX_LINE_LENGTH for row in loc.source.split(b"\n")):
        return f" (a line is longer than {symbols.DEFAULT_MAX_LINE_LENGTH:,} characters: minified code is not parsed)"
    return ""
