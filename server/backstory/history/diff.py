"""Line diff of two blobs into unified hunks, with the exact changed line numbers.

Uses patiencediff's C matcher (the algorithm family git's histogram diff belongs to) because difflib is far too
slow on large files; hunks use three lines of context like ``git diff``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from patiencediff import PatienceSequenceMatcher

from .model import Hunk

CONTEXT = 3
_WORDS = re.compile(rb"\w+")
SMALL_BLOCK = 3
EXCERPT_MAX_LINES = 80
EXCERPT_MAX_CHARS = 6000
CHANGED_MAX_CHARS = 64_000


def split_lines(data: bytes) -> list[bytes]:
    """Split on ``\\n`` only (like git), dropping the empty tail after a final newline."""
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _decode(line: bytes) -> str:
    return line.decode("utf-8", "replace").rstrip("\r")


def _range(start: int, count: int) -> str:
    return f"{start}" if count == 1 else f"{start},{count}"


def diff_hunks(old: bytes, new: bytes, *, full: bool = False) -> list[Hunk]:
    """Hunks turning ``old`` into ``new``; 1-based line numbers. ``full`` keeps excerpts untruncated (for show)."""
    a = split_lines(old)
    b = split_lines(new)
    if not a and not b:
        return []
    if not a or not b:
        groups: Iterable[list[tuple[str, int, int, int, int]]] = [
            [("insert" if not a else "delete", 0, len(a), 0, len(b))]
        ]
    else:
        groups = PatienceSequenceMatcher(None, a, b).get_grouped_opcodes(CONTEXT)
    hunks: list[Hunk] = []
    for group in groups:
        i1, j1 = group[0][1], group[0][3]
        i2, j2 = group[-1][2], group[-1][4]
        old_start = i1 + 1 if i2 > i1 else i1
        new_start = j1 + 1 if j2 > j1 else j1
        header = f"@@ -{_range(old_start, i2 - i1)} +{_range(new_start, j2 - j1)} @@"
        out: list[str] = [header]
        changed: list[str] = []
        changed_len = 0
        added: list[int] = []
        removed: list[int] = []
        ops: list[str] = []
        for tag, ai1, ai2, bj1, bj2 in group:
            ops.extend(_block_ops(tag, a[ai1:ai2], b[bj1:bj2]))
            if tag == "equal":
                out.extend(" " + _decode(line) for line in a[ai1:ai2])
                continue
            sides = (("-", a, ai1, ai2, removed), ("+", b, bj1, bj2, added))
            for mark, lines, lo, hi, numbers in sides:
                for k in range(lo, hi):
                    text = _decode(lines[k])
                    out.append(mark + text)
                    numbers.append(k + 1)
                    if changed_len < CHANGED_MAX_CHARS:
                        changed.append(text)
                        changed_len += len(text) + 1
        excerpt, truncated = ("\n".join(out), False) if full else _truncate(out)
        hunks.append(
            Hunk(
                old_start=old_start,
                old_lines=i2 - i1,
                new_start=new_start,
                new_lines=j2 - j1,
                excerpt=excerpt,
                truncated=truncated,
                changed_text="\n".join(changed),
                added_lines=added,
                removed_lines=removed,
                ops="".join(ops),
            )
        )
    return hunks


def diff_ops(old: bytes, new: bytes) -> list[tuple[int, int, int, int, str]]:
    """Just the shape of each hunk, (old_start, old_lines, new_start, new_lines, ops), without decoding text:
    what line-range tracking needs, at a fraction of :func:`diff_hunks`' cost."""
    a = split_lines(old)
    b = split_lines(new)
    if not a or not b:
        if not a and not b:
            return []
        return [(0, 0, 1, len(b), f"{len(b)}+")] if not a else [(1, len(a), 0, 0, f"{len(a)}-")]
    out = []
    for group in PatienceSequenceMatcher(None, a, b).get_grouped_opcodes(0):
        i1, j1, i2, j2 = group[0][1], group[0][3], group[-1][2], group[-1][4]
        ops = []
        for tag, ai1, ai2, bj1, bj2 in group:
            ops.extend(_block_ops(tag, a[ai1:ai2], b[bj1:bj2]))
        out.append((i1 + 1 if i2 > i1 else i1, i2 - i1, j1 + 1 if j2 > j1 else j1, j2 - j1, "".join(ops)))
    return out


def _block_ops(tag: str, old: list[bytes], new: list[bytes]) -> list[str]:
    """Run-length ops of one opcode. A rewrite (most new lines repeat old ones modulo indentation, or a small
    block mostly reuses the old words: an edited line) is written ``d``/``a`` instead of ``-``/``+``: line-range
    tracking follows rewrites into the old lines, but not unrelated code that merely took their place."""
    if tag == "equal":
        return [f"{len(old)}="]
    out: list[str] = []
    similar = False
    if old and new:
        olds = {line.strip() for line in old if line.strip()}
        news = [line.strip() for line in new if line.strip()]
        similar = bool(news) and sum(1 for line in news if line in olds) * 2 >= len(news)
        if not similar and len(old) <= SMALL_BLOCK and len(new) <= SMALL_BLOCK:  # an edited line or two
            old_words = set(_WORDS.findall(b" ".join(old)))
            new_words = set(_WORDS.findall(b" ".join(new)))
            similar = not new_words or len(new_words & old_words) * 2 >= len(new_words)
    if old:
        out.append(f"{len(old)}{'d' if similar else '-'}")
    if new:
        out.append(f"{len(new)}{'a' if similar else '+'}")
    return out


def _truncate(lines: list[str]) -> tuple[str, bool]:
    """Bound the stored excerpt; the full changed text still goes to the index."""
    truncated = len(lines) > EXCERPT_MAX_LINES
    kept = lines[:EXCERPT_MAX_LINES]
    text = "\n".join(kept)
    if len(text) > EXCERPT_MAX_CHARS:
        text = text[:EXCERPT_MAX_CHARS]
        truncated = True
    return text, truncated
