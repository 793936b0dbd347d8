"""Line-range tracking through diffs, the way ``git log -L`` follows a range back in history — pure functions.

A hunk is described by its start lines and its run-length operations (``3=2-1+3=``: 3 unchanged, 2 removed,
1 added, 3 unchanged). Given a range of post-image lines, :func:`touches` says whether the change touched it
(an added line inside, or a removal strictly between two of its lines) and :func:`to_parent` maps it to the
pre-image (None when every line of it was added here: the range was born in this commit).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_OP = re.compile(r"(\d+)([=+-])")


@dataclass(frozen=True, slots=True)
class HunkShape:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    ops: str


def _steps(h: HunkShape) -> Iterator[tuple[str, int, int]]:
    """(op, old line, new line) per line of the hunk; for '+' the old line is the one it precedes, and vice versa."""
    old = h.old_start if h.old_lines else h.old_start + 1
    new = h.new_start if h.new_lines else h.new_start + 1
    for count, op in _OP.findall(h.ops):
        for _ in range(int(count)):
            yield op, old, new
            if op != "+":
                old += 1
            if op != "-":
                new += 1


def touches(start: int, end: int, hunks: Sequence[HunkShape]) -> bool:
    for h in hunks:
        for op, _old, new in _steps(h):
            if op == "+" and start <= new <= end:
                return True
            if op == "-" and start < new <= end:
                return True
    return False


def to_parent(start: int, end: int, hunks: Sequence[HunkShape]) -> tuple[int, int] | None:
    """The range's span in the parent file, or None when none of its lines existed there."""
    ordered = sorted(hunks, key=lambda h: h.new_start)
    mapped: list[int] = []
    offset = 0  # old - new, outside hunks
    line = start
    idx = 0
    while line <= end:
        while idx < len(ordered) and _hunk_end_new(ordered[idx]) < line:
            offset = _offset_after(ordered[idx])
            idx += 1
        h = ordered[idx] if idx < len(ordered) else None
        if h is not None and _hunk_begin_new(h) <= line:
            for op, old, new in _steps(h):
                if (op == "=" and start <= new <= end) or (op == "-" and start < new <= end):
                    mapped.append(old)
            line = _hunk_end_new(h) + 1
            offset = _offset_after(h)
            idx += 1
            continue
        stop = end if h is None else min(end, _hunk_begin_new(h) - 1)
        mapped.extend((line + offset, stop + offset))
        line = stop + 1
    if not mapped:
        return None
    return min(mapped), max(mapped)


def _hunk_begin_new(h: HunkShape) -> int:
    return h.new_start if h.new_lines else h.new_start + 1


def _hunk_end_new(h: HunkShape) -> int:
    return h.new_start + h.new_lines - 1 if h.new_lines else h.new_start


def _offset_after(h: HunkShape) -> int:
    old_end = h.old_start + h.old_lines if h.old_lines else h.old_start + 1
    new_end = h.new_start + h.new_lines if h.new_lines else h.new_start + 1
    return old_end - new_end
