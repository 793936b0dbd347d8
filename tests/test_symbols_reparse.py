"""Versions with syntax errors parsed incrementally (`symbols.reparse`): the tree must be the fresh parse's, node
for node, and a re-parse whose errors fall outside the re-parsed spans must be redone from scratch."""

from __future__ import annotations

import random

from tree_sitter import Tree

from backstory.history.diff import diff_hunks
from backstory.symbols import extract_definitions
from backstory.symbols.extract import parse
from backstory.symbols.reparse import error_nodes
from backstory.symbols.versions import VersionCache, tree_of


def shape(tree: Tree) -> list[tuple[object, ...]]:
    """Every node (named or not) with its type, bytes, points, flags and field: equal shapes are equal trees."""
    out: list[tuple[object, ...]] = []
    cursor = tree.walk()
    while True:
        n = cursor.node
        assert n is not None
        out.append(
            (n.kind_id, n.start_byte, n.end_byte, n.start_point, n.end_point, n.is_missing, n.is_error, cursor.field_id)
        )
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return out


def function(i: int, unused: bool) -> bytes:
    """A C function; with ``UNUSED`` after a parameter (git/git's macro) it parses with a syntax error."""
    param = b"int x UNUSED" if unused else b"int x"
    return b"static int f%d(%s)\n{\n\tint y = x + %d;\n\treturn y * 2;\n}\n\n" % (i, param, i)


def blocks(older: bytes, newer: bytes) -> list[tuple[int, int, int, int]]:
    return [(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in diff_hunks(older, newer)]


def test_versions_with_errors_are_derived_and_equal_fresh_parses() -> None:
    funcs = [function(i, i % 3 == 0) for i in range(30)]
    newer = b"#include <stdio.h>\n\n" + b"".join(funcs)
    cache = VersionCache()
    assert cache.definitions(0, newer, "c") == extract_definitions(newer, "c")
    fresh = parse(newer, "c")
    assert fresh is not None and fresh.tree is not None and len(error_nodes(fresh.tree)) == 10
    rng = random.Random("reparse")
    for step in range(1, 25):
        i = rng.randrange(len(funcs))
        op = step % 3
        if op == 0:  # a function body edited
            funcs[i] = funcs[i].replace(b"* 2", b"* %d" % step)
        elif op == 1:  # a function with an error added (history walks back: the older version lacks it)
            funcs.insert(i, function(100 + step, True))
        else:
            del funcs[i]
        older = b"#include <stdio.h>\n\n" + b"".join(funcs)
        cache.derive(step - 1, step, older, blocks(older, newer))
        assert cache.definitions(step, older, "c") == extract_definitions(older, "c")
        tree, fresh = tree_of(cache, step), parse(older, "c")
        assert tree is not None and fresh is not None and fresh.tree is not None
        assert tree.root_node.has_error
        assert shape(tree) == shape(fresh.tree)
        newer = older
    # one fresh parse (the newest version): every older one, errors and all, was derived from its successor
    assert cache.stats["full"] == 1 and cache.stats["incremental"] == 24 and cache.stats["fresh"] == 0


def test_a_reparse_with_errors_outside_the_reparsed_spans_is_redone() -> None:
    newer = b"".join(function(i, False) for i in range(20))
    older = b"static int opened(void)\n{\n" + newer  # never closed: the error shows at the end, far from the edit
    cache = VersionCache()
    cache.definitions("new", newer, "c")
    cache.derive("new", "old", older, blocks(older, newer))
    assert cache.stats["incremental"] == 1 and cache.stats["fresh"] == 1
    assert cache.definitions("old", older, "c") == extract_definitions(older, "c")
    tree, fresh = tree_of(cache, "old"), parse(older, "c")
    assert tree is not None and fresh is not None and fresh.tree is not None
    assert shape(tree) == shape(fresh.tree)


def test_random_edits_of_code_with_errors_match_fresh_parses() -> None:
    """Lines deleted, duplicated and damaged around functions with and without errors: every kept tree is the
    fresh parse's, whether the re-parse was kept or redone."""
    rng = random.Random("reparse-random")
    lines = b"".join(function(i, i % 2 == 0) for i in range(25)).splitlines(keepends=True)
    cache = VersionCache()
    newer = b"".join(lines)
    cache.definitions(0, newer, "c")
    for step in range(1, 80):
        out = list(lines)
        i = rng.randrange(len(out))
        op = rng.randrange(4)
        if op == 0:
            del out[i : i + rng.randrange(1, 4)]
        elif op == 1:
            k = rng.randrange(len(out))
            out[i:i] = out[k : k + rng.randrange(1, 6)]
        elif op == 2:
            cut = rng.randrange(len(out[i]) + 1)
            out[i] = out[i][:cut] + rng.choice([b"(", b"{", b"}", b" UNUSED", b";", b"x"]) + out[i][cut:]
        else:
            out[i:i] = [b"\tint z = %d;\n" % step]
        older = b"".join(out) or b"\n"
        cache.derive(step - 1, step, older, blocks(older, newer))
        assert cache.definitions(step, older, "c") == extract_definitions(older, "c"), step
        tree, fresh = tree_of(cache, step), parse(older, "c")
        assert fresh is not None and fresh.tree is not None
        if tree is not None:
            assert shape(tree) == shape(fresh.tree), step
        lines, newer = out, older
    assert cache.stats["incremental"] >= 70
