"""Plain data that flows out of the history reader: commits, file diffs and hunks.

These are the units every later stage (index, search, views) consumes, so they carry everything a result needs
to be shown without going back to git.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")


def by_position(cls: type[T]) -> type[T]:
    """Pickle instances of the dataclass ``cls`` as its constructor's arguments. Reader processes send every
    commit they read to the writer this way: a slotted dataclass's own pickling restores each field through
    a Python loop (``dataclasses.fields`` on every object), which took twice as long to load (0.051 against
    0.027 ms a commit on git/git). A subclass must be decorated too (its instances would come back as ``cls``)."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    get = attrgetter(*names)
    values: Callable[[Any], tuple[Any, ...]] = get if len(names) > 1 else lambda obj: (get(obj),)

    def __reduce__(self: T) -> tuple[type[T], tuple[Any, ...]]:
        return cls, values(self)

    setattr(cls, "__reduce__", __reduce__)  # noqa: B010 (mypy forbids assigning a method)
    return cls


@by_position
@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Metadata of one commit; merges are recorded too (for reachability) but never diffed."""

    sha: str
    parents: tuple[str, ...]
    subject: str
    body: str
    author_name: str
    author_email: str
    author_time: int
    author_tz: int
    commit_time: int
    commit_tz: int

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1


@by_position
@dataclass(frozen=True, slots=True)
class SymbolRef:
    """A definition a hunk touched: qualified name, kind and its line range in the file version it came from."""

    name: str
    kind: str
    start: int
    end: int


@by_position
@dataclass(slots=True)
class Hunk:
    """One hunk of a file diff: location, the changed text, and a display excerpt with a little context."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    excerpt: str
    truncated: bool
    changed_text: str
    added_lines: list[int] = field(default_factory=list)
    removed_lines: list[int] = field(default_factory=list)
    symbols: list[SymbolRef] = field(default_factory=list)
    ops: str = ""  # run-length line operations ("3=2-1+3="): exact line mapping even when the excerpt is cut


@by_position
@dataclass(slots=True)
class FileDiff:
    """All hunks of one file in one commit. ``path`` is the new path; ``old_path`` differs on renames."""

    path: str
    old_path: str
    change: str  # add | modify | delete | rename
    language: str | None
    hunks: list[Hunk]
    sibling_symbols: list[str] = field(default_factory=list)
    parsed: bool = False


@by_position
@dataclass(slots=True)
class CommitDiff:
    """A commit with its file diffs and what was skipped (by reason), so status can report it."""

    commit: CommitInfo
    files: list[FileDiff]
    skipped: dict[str, int] = field(default_factory=dict)
    prepared: object = None  # what the indexer derived from it in the reading process (index/prepare.py)
