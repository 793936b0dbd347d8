"""When an incremental re-parse that meets syntax errors is the tree a fresh parse would give.

Tree-sitter re-parses an edited tree by re-lexing around the edits and *reusing* every old subtree that the
edits did not touch, where the parser state matches. Its own fuzzing checks that this gives the fresh parse's
tree whenever the result has no errors; with errors the result can differ, in principle, where error recovery
meets a reused subtree: recovery may wrap a reused subtree into an ERROR node, or a reused subtree right before
an invalid token is broken down into its children where a fresh parse would have stopped, and a reused
subtree that itself contains an error carries recovery decisions made in another context.

So `versions` takes two precautions before it accepts such a re-parse, and otherwise parses afresh:

- every ERROR and MISSING node of the old tree (widened by a byte on each side) is declared edited before the
  re-parse (`Tree.edit` with the same text: nothing moves, but tree-sitter marks every subtree touching it,
  and all their ancestors, as changed, so none of them is reused): every error region is re-parsed as in a
  fresh parse, and no reused subtree contains an error;
- every ERROR and MISSING node of the result must lie inside a span that was re-parsed (an edited block or a
  marked error region). Error recovery starts at an invalid token and leaves an ERROR node that contains it or
  ends at it (the stack entries it pops), or a MISSING node at it; a reused subtree that the recovery could
  meet ends at that token, and tree-sitter's lexer always looks at least one byte past a token, so such a
  subtree touches the span, was marked changed, and was never reused. A re-parse whose errors appear elsewhere
  (an edit that opens a brace, say, and leaves the error at the end of the file) is redone from scratch.

On git/git, where a third of the C files at any time parse with errors (macros such as ``UNUSED`` after a
parameter), this turns their versions from fresh parses (~10 ms each) into re-parses of their error regions.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from tree_sitter import Node, Tree


def error_nodes(tree: Tree) -> list[Node]:
    """The outermost ERROR and MISSING nodes of a tree (only the branches with errors are walked)."""
    root = tree.root_node
    if root.is_error or root.is_missing:
        return [root]
    found: list[Node] = []
    stack = [root] if root.has_error else []
    while stack:
        for child in stack.pop().children:
            if child.is_error or child.is_missing:
                found.append(child)
            elif child.has_error:
                stack.append(child)
    return found


def merged(spans: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Closed byte spans sorted and merged where they overlap or touch, as (starts, ends)."""
    starts: list[int] = []
    ends: list[int] = []
    for a, b in sorted(spans):
        if ends and a <= ends[-1]:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


def errors_within(tree: Tree, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether every ERROR and MISSING node of ``tree`` lies inside one of the (closed) byte spans."""
    starts, ends = merged(spans)
    for node in error_nodes(tree):
        k = bisect_right(starts, node.start_byte) - 1
        if k < 0 or node.end_byte > ends[k]:
            return False
    return True
