"""Line-range tracking through hunks (pure), checked on hand-made diffs."""

from __future__ import annotations

from backstory.history.diff import diff_hunks
from backstory.search.linelog import HunkShape, set_to_parent, touches


def shapes(old: str, new: str) -> list[HunkShape]:
    return [
        HunkShape(h.old_start, h.old_lines, h.new_start, h.new_lines, h.ops)
        for h in diff_hunks(old.encode(), new.encode())
    ]


OLD = "".join(f"l{i}\n" for i in range(1, 21))


def test_insertion_above_shifts_the_range_without_touching_it() -> None:
    new = "a\nb\n" + OLD
    hs = shapes(OLD, new)
    assert not touches(12, 15, hs)
    assert set_to_parent([(12, 15)], hs) == [(10, 13)]


def test_edit_inside_touches_and_maps_to_same_span() -> None:
    new = OLD.replace("l11\n", "L11\n")
    hs = shapes(OLD, new)
    assert touches(10, 12, hs)
    assert not touches(1, 5, hs) and not touches(15, 20, hs)
    assert set_to_parent([(10, 12)], hs) == [(10, 12)]


def test_deletion_strictly_inside_touches_but_at_the_edges_does_not() -> None:
    new = OLD.replace("l11\n", "")  # new line 11 is old l12
    hs = shapes(OLD, new)
    assert touches(10, 12, hs)
    assert not touches(11, 12, hs)  # the removal sits just before the range
    assert not touches(5, 10, hs)  # ... or just after it
    assert set_to_parent([(10, 12)], hs) == [(10, 13)]


def test_range_born_in_this_commit_has_no_parent() -> None:
    new = OLD.replace("l5\n", "l5\nx1\nx2\nx3\n")
    hs = shapes(OLD, new)
    assert touches(6, 8, hs)
    assert set_to_parent([(6, 8)], hs) == []
    assert set_to_parent([(5, 9)], hs) == [(5, 6)]


def test_whole_file_added_and_hunk_ops_survive_truncated_excerpts() -> None:
    big_old = "".join(f"o{i}\n" for i in range(300))
    big_new = "".join(f"n{i}\n" for i in range(300))
    (h,) = diff_hunks(big_old.encode(), big_new.encode())
    assert h.truncated and h.ops == "300-300+"
    shape = HunkShape(h.old_start, h.old_lines, h.new_start, h.new_lines, h.ops)
    assert touches(250, 260, [shape])
    # an edited line is a rewrite: the range follows it into the line it replaced
    (edit,) = shapes(OLD, OLD.replace("l7\n", "l7 changed\n"))
    assert "d" in edit.ops and set_to_parent([(7, 7)], [edit]) == [(7, 7)]
    # unrelated code replacing a block is not the old block's history
    (swap,) = shapes(OLD, OLD.replace("l7\nl8\nl9\nl10\n", "alpha\nbeta\ngamma\ndelta\n"))
    assert "-" in swap.ops and set_to_parent([(7, 10)], [swap]) == []
    (add,) = shapes("", "a\nb\n")
    assert add.ops == "2+" and set_to_parent([(1, 2)], [add]) == []
