"""Definitions of successive versions of files, parsing each older version incrementally from its successor.

The indexer walks history newest first, so for every modified file it holds the new version's parse tree and
the diff to the old version. Tree-sitter can re-parse the old version from the new tree once the tree is told
where the text changed (`Tree.edit`), which re-lexes only around the changed lines instead of the whole file.
The old version is usually the *new* version of the next commit that touched the file, so its definitions are
wanted soon after; that is why `VersionCache.derive` runs even when the current diff only adds lines.

Not every version is an older version of one read before: on a topic branch, the last version of a file is
followed by the merge's, which the walk reads for no symbols (git/git: about one version a commit). Such a
version can be derived from the path's version read last (`sibling`: the caller diffs the two on the fly, as
`history.reader` does) instead of being parsed from scratch: on git/git's commits that cut the symbols readers'
CPU by 12-31 % over 2,000 commits at three depths, every derived version's definitions the fresh parse's.

The result is the same as a fresh parse (every edit is checked against the bytes before it is used, and a
re-parse that meets a syntax error is redone from scratch unless each error lies in a span that was made to
be re-parsed, see `reparse`); the cache is an optimisation only.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, OrderedDict
from collections.abc import Hashable, Sequence

import numpy as np
from tree_sitter import Point, Tree

from .extract import Parsed, Row, _collect, _Found, parse, rows, to_definitions
from .grammars import compiled_query
from .languages import SPECS
from .model import Definition
from .reparse import error_nodes

#: Unified-diff hunk shape: (old_start, old_lines, new_start, new_lines), 1-based, a start of a side with no
#: lines naming the line before it (what `history.diff.diff_hunks` produces).
Block = tuple[int, int, int, int]
#: One `Tree.edit`: start, old end and new end, each as (byte, point).
Edit = tuple[int, int, int, Point, Point, Point]
#: One changed block as byte spans: (new start, new end, old start, old end, line shift of the text after it).
Move = tuple[int, int, int, int, int]

DEFINITIONS = 512  # definition lists kept (small: names and line numbers)
TREES = 256  # parse trees kept (about 100 bytes per source line): enough for the files a stretch of history edits
# ... and at most this much source among them: a tree takes ~25 times its source's size (git/git's C files run
# to 200 KB). Over 2,000 git/git commits from the 40,000th newest, one reader peaked at 403 / 353 / 307 / 281 MB
# with 16 / 4 / 2 / 1 MB of source kept, for 26.7 / 27.0 / 27.8 / 28.4 s of CPU (more versions parsed afresh).
# Since versions are also derived from a sibling (`sibling`), more kept trees save more: over 2,000 commits from
# the 20,000th newest, 10.5 / 8.6 / 7.8 s of CPU with 2 / 4 / 8 MB (a reader's peak 248 / 278 / 334 MB). On the
# whole of git/git, 4 MB took the symbols phase 143 → 134 s but the indexer's peak 865 → 976 MB (summed over its
# processes; the target is 1 GB), so the bound stays at 2 MB
TREE_SOURCE_BYTES = 2 << 20
GAP = 2048  # re-matched spans closer than this are matched as one (fewer query runs, same result)


class _Lines:
    """Byte offset and tree-sitter point of the start of each line (and of the end of the text).

    Newlines are found with numpy (tens of microseconds for a large file, against ~0.15 ms for splitting it into
    lines in Python), and each version's table is kept with its tree (`Parsed.lines`), so it is built once
    although every version takes part in two diffs."""

    __slots__ = ("newlines", "size")

    def __init__(self, data: bytes) -> None:
        self.size = len(data)
        self.newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)  # only a few are read per diff

    def position(self, line: int) -> tuple[int, Point]:
        """Where 0-based ``line`` starts; past the last line: the end of the text."""
        if line == 0:
            return 0, Point(0, 0)
        newlines = self.newlines
        if line <= len(newlines):
            return int(newlines[line - 1]) + 1, Point(line, 0)
        count = len(newlines)
        return self.size, Point(count, self.size - (int(newlines[-1]) + 1 if count else 0))

    def point(self, byte: int) -> Point:
        """The tree-sitter point of a byte offset."""
        row = int(np.searchsorted(self.newlines, byte))  # newlines before ``byte``
        return Point(row, byte - (int(self.newlines[row - 1]) + 1 if row else 0))


def _span(start: int, count: int) -> tuple[int, int]:
    first = start - 1 if count else start
    return first, first + count


def edits_to_older(new: bytes, old: bytes, blocks: Sequence[Block]) -> tuple[list[Edit], list[Move]] | None:
    """The `Tree.edit` calls that turn a tree of ``new`` into one of ``old`` (last block first, so each edit's
    coordinates are still those of the unedited text before it) and the blocks as byte spans (first block
    first); ``None`` when the blocks do not describe the two texts exactly (e.g. a final line that only gained
    or lost its newline), so the caller parses afresh."""
    return _plan(new, old, blocks, _Lines(new), _Lines(old))


def _plan(
    new: bytes, old: bytes, blocks: Sequence[Block], nl: _Lines, ol: _Lines
) -> tuple[list[Edit], list[Move]] | None:
    """`edits_to_older` with the line tables of both texts given."""
    edits: list[Edit] = []
    moves: list[Move] = []
    new_end, old_end = nl.size, ol.size  # the unchanged text after the current block ends here
    for old_start, old_count, new_start, new_count in reversed(blocks):
        o1, o2 = _span(old_start, old_count)
        n1, n2 = _span(new_start, new_count)
        (ob1, op1), (ob2, op2) = ol.position(o1), ol.position(o2)
        (nb1, np1), (nb2, np2) = nl.position(n1), nl.position(n2)
        if ob2 > old_end or nb2 > new_end or new[nb2:new_end] != old[ob2:old_end]:
            return None
        rows = op2.row - op1.row
        end_point = Point(np1.row + rows, op2.column if rows else np1.column + op2.column - op1.column)
        edits.append((nb1, nb2, nb1 + ob2 - ob1, np1, np2, end_point))
        moves.append((nb1, nb2, ob1, ob2, op2.row - np2.row))
        new_end, old_end = nb1, ob1
    if new_end != old_end or new[:new_end] != old[:old_end]:
        return None
    moves.reverse()
    return edits, moves


def _merged(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Sorted, merged closed spans as (starts, ends); spans less than `GAP` apart are joined."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if ends and a <= ends[-1] + GAP:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def _hits(starts: list[int], ends: list[int], f: _Found) -> bool:
    """Whether ``f``'s bytes touch one of the spans (closed intervals: touching counts)."""
    k = bisect_right(starts, f.end_byte) - 1
    return k >= 0 and ends[k] >= f.start_byte


def carry_over(
    base: list[_Found], older: Parsed, moves: list[Move], changed: list[tuple[int, int]]
) -> tuple[list[_Found], int]:
    """The definitions of ``older`` from those of the newer version (``base``) and a query over what changed.

    A definition whose node lies outside every changed block and every range tree-sitter reports as changed in
    structure has the same subtree in both versions, so the same match: it is kept, moved by the blocks before
    it. Everything else (definitions in or around changed text, and `LanguageSpec.context_nodes`) is matched
    again in ``older``'s tree, restricted to those spans. Together that is exactly a full match of the tree.
    Returns the definitions and how many of them were kept.
    """
    assert older.tree is not None
    spec = SPECS[older.language]
    compiled = compiled_query(older.language)
    assert compiled is not None
    move_starts = [m[0] for m in moves]
    spans = [(m[2], m[3]) for m in moves] + changed
    kept: list[_Found] = []
    for f in base:
        k = bisect_right(move_starts, f.end_byte) - 1
        if k >= 0:
            _nb1, nb2, _ob1, ob2, lines = moves[k]
            if nb2 >= f.start_byte:
                continue  # in or touching a changed block: matched again below
            shift = ob2 - nb2
            f = _Found(
                f.start_byte + shift, f.end_byte + shift, f.ntype, f.segment, f.short, f.kind,
                f.start_line + lines, f.end_line + lines, f.signature,
            )  # fmt: skip
        if f.ntype in spec.context_nodes:
            spans.append((f.start_byte, f.end_byte))
        else:
            kept.append(f)
    starts, ends = _merged(spans)
    kept = [f for f in kept if not _hits(starts, ends, f)]
    query = [(max(0, a - 1), b + 1) for a, b in zip(starts, ends, strict=True)]
    fresh = _collect(compiled, spec, older.tree.root_node, older.source, query)
    return kept + [f for f in fresh if _hits(starts, ends, f)], len(kept)


class VersionCache:
    """Definitions per file version, keyed by the caller (blob id and language), with parse trees of the most
    recently seen versions kept so that an older version can be derived from them (see the module doc).

    ``stats`` counts full parses, incremental parses, fallbacks and hits, for benchmarks and tests.
    """

    def __init__(self, size: int = DEFINITIONS, trees: int = TREES) -> None:
        self._size = size
        self._tree_size = trees
        self._defs: OrderedDict[Hashable, list[Row] | None] = OrderedDict()
        self._trees: OrderedDict[Hashable, Parsed] = OrderedDict()
        self._latest: OrderedDict[str, Hashable] = OrderedDict()  # path -> the key of its version read last
        self._tree_bytes = 0  # source bytes of the kept trees
        self.stats: Counter[str] = Counter()
        self.carry = True  # carry definitions over between versions (off: match every version in full)

    def definitions(self, key: Hashable, source: bytes, language: str) -> list[Definition] | None:
        """What `extract_definitions(source, language)` returns, computed at most once per key while cached."""
        found = self.rows(key, source, language)
        return None if found is None else to_definitions(found)

    def knows(self, key: Hashable) -> bool:
        """Whether ``key``'s definitions come without a parse from scratch (known, or its tree kept)."""
        return key in self._defs or key in self._trees

    def note(self, path: str, key: Hashable) -> None:
        """``key`` is the version of ``path`` read last (nothing when its tree is not kept): :meth:`sibling`'s
        base for the path's next unknown version."""
        if key in self._trees:
            self._latest[path] = key
            self._latest.move_to_end(path)
            if len(self._latest) > 4 * self._tree_size:  # paths whose trees are long gone
                self._latest.popitem(last=False)

    def sibling(self, path: str, language: str) -> tuple[Hashable, bytes] | None:
        """(key, source) of the version of ``path`` read last, when its tree (parsed as ``language``) is kept: a
        base to :meth:`derive` another version of the path from, given the diff between the two."""
        key = self._latest.get(path)
        parsed = None if key is None else self._trees.get(key)
        if parsed is None or parsed.requested != language:
            return None
        return key, parsed.source

    def rows(self, key: Hashable, source: bytes, language: str) -> list[Row] | None:
        """`definitions` as `extract.Row` tuples (what the history reader uses: no objects per definition)."""
        if key in self._defs:
            self._defs.move_to_end(key)
            self.stats["hit"] += 1
            return self._defs[key]
        parsed = self._trees.get(key)
        if parsed is None:
            self.stats["full"] += 1
            parsed = parse(source, language)
            if parsed is not None and parsed.tree is not None:
                self._keep_tree(key, parsed)
        found = None if parsed is None else rows(parsed)
        self._remember(key, found)
        return found

    def _remember(self, key: Hashable, found: list[Row] | None) -> None:
        self._defs[key] = found
        if len(self._defs) > self._size:
            self._defs.popitem(last=False)

    def derive(self, new_key: Hashable, old_key: Hashable, old_source: bytes, blocks: Sequence[Block]) -> None:
        """Parse the version ``old_key`` (text ``old_source``) from the kept tree of ``new_key``, which differs
        from it by the diff ``blocks`` (old → new); nothing when that tree is not kept or ``old_key`` is known.

        Afterwards ``new_key``'s tree is the first to go when the cache is full. For its newer version that is
        plain (its older version is kept now); for a :meth:`sibling` base it is measured: kept at its place
        instead, 2,000 git/git commits from the 20,000th newest parsed 1,491 versions from scratch, not 1,410."""
        base = self._trees.get(new_key)
        if base is None or base.tree is None or old_key in self._defs or old_key in self._trees:
            return
        if base.lines is None:
            base.lines = _Lines(base.source)
        old_lines = _Lines(old_source)
        plan = _plan(base.source, old_source, blocks, base.lines, old_lines)
        if plan is None:
            self.stats["fallback"] += 1
            return
        edits, moves = plan
        tree = base.tree.copy()
        marked = _mark_errors(tree, base.lines)
        for edit in edits:
            tree.edit(*edit)
        self.stats["incremental"] += 1
        marked = [_to_older(a, b, moves) for a, b in marked]
        reparsed = [(m[2], m[3]) for m in moves] + marked
        parsed = parse(old_source, base.requested, base=tree, reparsed=reparsed)
        if parsed is None or parsed.tree is None:
            return
        if not parsed.incremental or not _can_be_base(parsed):  # redone from scratch, or C++ found in a `.h`
            self.stats["fresh"] += 1
        if not _can_be_base(parsed):  # keep what it found
            self._remember(old_key, rows(parsed))
            self.stats["unkept"] += 1
            return
        parsed.lines = old_lines
        if parsed.incremental and base.found is not None and self.carry:
            changed = [(r.start_byte, r.end_byte) for r in tree.changed_ranges(parsed.tree)] + marked
            parsed.found, kept = carry_over(base.found, parsed, moves, changed)
            self.stats["carried"] += 1
            self.stats["kept"] += kept
            self.stats["matched"] += len(parsed.found) - kept
        self._trees.move_to_end(new_key, last=False)  # evicted first (see above)
        self._keep_tree(old_key, parsed)

    def _keep_tree(self, key: Hashable, parsed: Parsed) -> None:
        """Keep a version's tree to derive its older version from (see `_can_be_base`)."""
        if not _can_be_base(parsed):
            self.stats["unkept"] += 1
            return
        old = self._trees.get(key)
        if old is not None:
            self._tree_bytes -= len(old.source)
        self._trees[key] = parsed
        self._trees.move_to_end(key)
        self._tree_bytes += len(parsed.source)
        while len(self._trees) > self._tree_size or (self._tree_bytes > TREE_SOURCE_BYTES and len(self._trees) > 1):
            _key, dropped = self._trees.popitem(last=False)
            self._tree_bytes -= len(dropped.source)


def _can_be_base(parsed: Parsed) -> bool:
    """Whether an older version can be derived from this tree. Not from a C header parsed as C++ (its C tree is
    gone), nor from a tree that is one ERROR node. A tree with syntax errors can: `_mark_errors` has its error
    regions re-parsed, and its older version usually has the same errors (git/git's C macros), which then lie
    in those regions, so the re-parse is kept (see `reparse`)."""
    tree = parsed.tree
    return tree is not None and parsed.language == parsed.requested and not tree.root_node.is_error


def _mark_errors(tree: Tree, lines: _Lines) -> list[tuple[int, int]]:
    """Declare every ERROR and MISSING node of ``tree`` (widened by a byte each side) edited, with the same text,
    so that a re-parse reuses no subtree touching one (see `reparse`); returns those byte spans."""
    spans = []
    for node in error_nodes(tree):
        a, b = max(0, node.start_byte - 1), min(lines.size, node.end_byte + 1)
        end = lines.point(b)
        tree.edit(a, b, b, lines.point(a), end, end)
        spans.append((a, b))
    return spans


def _to_older(a: int, b: int, moves: list[Move]) -> tuple[int, int]:
    """A closed byte span of the newer text in the older one's bytes; an end inside a changed block moves to the
    block's edge, so the span grows by the part of the block it touches (which is re-parsed as well)."""
    starts = [m[0] for m in moves]

    def older(pos: int, end: bool) -> int:
        k = bisect_right(starts, pos) - 1
        if k < 0:
            return pos
        _nb1, nb2, ob1, ob2, _lines = moves[k]
        if pos >= nb2:
            return pos + ob2 - nb2
        return ob2 if end else ob1

    return older(a, False), older(b, True)


def tree_of(cache: VersionCache, key: Hashable) -> Tree | None:
    """The kept tree of a version (tests compare it with a fresh parse)."""
    parsed = cache._trees.get(key)
    return None if parsed is None else parsed.tree
