"""Line-range tracking through diffs, exactly the way ``git log -L`` follows a range back in history — pure.

A stored hunk is described by its start lines and its run-length operations (``3=2-1+3=``: 3 unchanged,
2 removed, 1 added, 3 unchanged). The runs between unchanged lines are git's change blocks (xdiff with zero
context, as line-log computes them), and line-log's rules are stated on those blocks (git's line-log.c):

- a block *touches* a set of ranges when its new side overlaps one (an empty new side, a pure removal, touches
  a range only strictly inside it);
- mapping to the parent: every touched block contributes its *whole* old side, and the untouched rest of each
  range is shifted by the lines the blocks above it added or removed. A range whose lines were all added here
  maps to nothing (born).

Ranges in this module's API are 1-based and inclusive; internally half-open and 0-based, as in git.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_OP = re.compile(r"(\d+)([=+\-])")


@dataclass(frozen=True, slots=True)
class HunkShape:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    ops: str


Ranges = list[tuple[int, int]]
Block = tuple[int, int, int, int]  # 0-based half-open: old start, old end, new start, new end


def blocks(hunks: Sequence[HunkShape]) -> list[Block]:
    """git's change blocks of a file diff, in order."""
    out: list[Block] = []
    for h in sorted(hunks, key=lambda s: s.new_start):
        old = h.old_start - 1 if h.old_lines else h.old_start
        new = h.new_start - 1 if h.new_lines else h.new_start
        open_block: list[int] | None = None
        for count_s, code in _OP.findall(h.ops):
            count = int(count_s)
            if code == "=":
                if open_block is not None:
                    out.append((open_block[0], old, open_block[1], new))
                    open_block = None
                old += count
                new += count
                continue
            if open_block is None:
                open_block = [old, new]
            if code == "-":
                old += count
            else:
                new += count
        if open_block is not None:
            out.append((open_block[0], old, open_block[1], new))
    return out


def normalize(ranges: Sequence[tuple[int, int]]) -> Ranges:
    """Sorted, with overlapping or adjacent intervals merged (1-based inclusive)."""
    out: Ranges = []
    for s, e in sorted(ranges):
        if e < s:
            continue
        if out and s <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _touched(rs: list[tuple[int, int]], diff: Sequence[Block]) -> list[Block]:
    """The blocks line-log counts as touching ``rs`` (half-open, normalized): a faithful copy of git's
    ``diff_ranges_filter_touched`` scan, quirks included (it compares each block with one range at a time)."""
    out: list[Block] = []
    j = 0
    if not rs:
        return out
    for blk in diff:
        t0, t1 = blk[2], blk[3]
        while t0 > rs[j][1]:
            j += 1
            if j == len(rs):
                return out
        r0, r1 = rs[j]
        if not (t1 <= r0 or r1 <= t0):
            out.append(blk)
    return out


def _difference(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """git's ``range_set_difference``, literally: an empty range in ``b`` (a touched pure removal) still splits
    a range of ``a`` in two, so the part after it is shifted by the removed lines."""
    out: list[tuple[int, int]] = []
    j = 0
    for start, end in a:
        while start < end:
            while j < len(b) and start >= b[j][1]:
                j += 1
            if j >= len(b) or end < b[j][0]:
                out.append((start, end))
                break
            if start >= b[j][0]:
                start = b[j][1]
            elif end > b[j][0]:
                out.append((start, b[j][0]))
                start = b[j][1]
            else:  # end == b[j][0]
                out.append((start, end))
                break
    return out


def _half_open(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(s - 1, e) for s, e in normalize(ranges)]


def set_touches(ranges: Sequence[tuple[int, int]], hunks: Sequence[HunkShape]) -> bool:
    return bool(_touched(_half_open(ranges), blocks(hunks)))


def through(ranges: Sequence[tuple[int, int]], hunks: Sequence[HunkShape]) -> tuple[list[int], Ranges]:
    """One file diff at once: the indices of the hunks holding a touched block (the hunks to show for this
    commit) and the ranges mapped to the parent; each hunk's ops are parsed once."""
    per_hunk = [blocks([h]) for h in hunks]
    diff = sorted(b for bs in per_hunk for b in bs)
    touched = set(_touched(_half_open(ranges), diff))
    hit = [i for i, bs in enumerate(per_hunk) if touched.intersection(bs)]
    return hit, map_blocks(ranges, diff)


def touched_hunks(ranges: Sequence[tuple[int, int]], hunks: Sequence[HunkShape]) -> list[int]:
    """Indices of the stored hunks holding a touched block."""
    return through(ranges, hunks)[0]


def set_to_parent(ranges: Sequence[tuple[int, int]], hunks: Sequence[HunkShape]) -> Ranges:
    """The ranges mapped to the parent (git's ``range_set_map_across_diff``)."""
    return map_blocks(ranges, blocks(hunks))


def map_blocks(ranges: Sequence[tuple[int, int]], diff: Sequence[Block]) -> Ranges:
    rs = _half_open(ranges)
    touched = _touched(rs, diff)
    rest = _difference(rs, [(blk[2], blk[3]) for blk in touched])
    out: Ranges = []
    j = 0
    offset = 0
    for a, b in rest:  # range_set_shift_diff
        while j < len(diff) and a >= diff[j][2]:
            offset += (diff[j][1] - diff[j][0]) - (diff[j][3] - diff[j][2])
            j += 1
        out.append((a + offset + 1, b + offset))
    out.extend((blk[0] + 1, blk[1]) for blk in touched)
    return normalize(out)


def blocks_touch(ranges: Sequence[tuple[int, int]], diff: Sequence[Block]) -> bool:
    return bool(_touched(_half_open(ranges), diff))
