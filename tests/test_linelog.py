"""Line-range tracking through git's change blocks (pure), checked on hand-made diffs."""

from __future__ import annotations

from backstory.history.diff import changes, diff_hunks, diff_ops
from backstory.history.linelog import HunkShape, blocks, set_to_parent, set_touches, touched_hunks


def shapes(old: str, new: str) -> list[HunkShape]:
    return [
        HunkShape(h.old_start, h.old_lines, h.new_start, h.new_lines, h.ops)
        for h in diff_hunks(old.encode(), new.encode())
    ]


OLD = "".join(f"l{i}\n" for i in range(1, 21))


def test_insertion_above_shifts_the_range_without_touching_it() -> None:
    hs = shapes(OLD, "a\nb\n" + OLD)
    assert not set_touches([(12, 15)], hs)
    assert set_to_parent([(12, 15)], hs) == [(10, 13)]


def test_edit_inside_touches_and_maps_to_same_span() -> None:
    hs = shapes(OLD, OLD.replace("l11\n", "L11\n"))
    assert set_touches([(10, 12)], hs)
    assert not set_touches([(1, 5)], hs) and not set_touches([(15, 20)], hs)
    assert set_to_parent([(10, 12)], hs) == [(10, 12)]


def test_deletion_strictly_inside_touches_but_at_the_edges_does_not() -> None:
    hs = shapes(OLD, OLD.replace("l11\n", ""))  # new line 11 is old l12
    assert set_touches([(10, 12)], hs)
    assert not set_touches([(11, 12)], hs)  # the removal sits just before the range
    assert not set_touches([(5, 10)], hs)  # ... or just after it
    assert set_to_parent([(10, 12)], hs) == [(10, 13)]
    assert set_to_parent([(11, 12)], hs) == [(12, 13)]


def test_range_born_in_this_commit_has_no_parent() -> None:
    hs = shapes(OLD, OLD.replace("l5\n", "l5\nx1\nx2\nx3\n"))
    assert set_touches([(6, 8)], hs)
    assert set_to_parent([(6, 8)], hs) == []
    assert set_to_parent([(5, 9)], hs) == [(5, 6)]


def test_a_touched_block_brings_its_whole_old_side() -> None:
    # git's line-log: a block the range reaches into maps to all of the block's old lines, even unrelated ones
    (swap,) = shapes(OLD, OLD.replace("l7\nl8\nl9\nl10\n", "alpha\nbeta\ngamma\ndelta\n"))
    assert swap.ops == "3=4-4+3="
    assert set_to_parent([(9, 12)], [swap]) == [(7, 12)]
    assert set_to_parent([(11, 12)], [swap]) == [(11, 12)]  # untouched: shifted only (by zero here)


def test_stored_hunks_split_back_into_git_blocks() -> None:
    new = OLD.replace("l5\n", "x\n").replace("l9\n", "").replace("l18\n", "l18\ny\n")
    hs = shapes(OLD, new)
    assert [h.ops for h in hs] == ["3=1-1+3=1-3=", "3=1+2="]
    assert blocks(hs) == [(4, 5, 4, 5), (8, 9, 8, 8), (18, 18, 17, 18)]
    assert changes(OLD.encode(), new.encode()) == [(4, 1, 4, 1), (8, 1, 8, 0), (18, 0, 17, 1)]
    assert [op[:4] for op in diff_ops(OLD.encode(), new.encode())] == [(5, 1, 5, 1), (9, 1, 8, 0), (18, 0, 18, 1)]
    assert touched_hunks([(17, 19)], hs) == [1]
    assert touched_hunks([(1, 4)], hs) == []


def test_myers_and_patience_disagree_and_we_follow_myers() -> None:
    # a rewrite where patience (unique lines first) and Myers (shortest edit) align the block differently:
    # git log -L maps through Myers' blocks, so the old side of the touched block must be Myers'
    old = "a\nb\nc\nd\ne\n}\n}\nf\n"
    new = "a\nx\n}\nb\nc\nd\ne\n}\nf\n"
    assert changes(old.encode(), new.encode()) == [(1, 0, 1, 2), (6, 1, 8, 0)]
    hs = shapes(old, new)
    assert set_to_parent([(3, 3)], hs) == []  # the '}' at new line 3 was added here
    assert set_to_parent([(8, 9)], hs) == [(6, 8)]  # the removal of the old second '}' is inside


def test_whole_file_added_and_hunk_ops_survive_truncated_excerpts() -> None:
    big_old = "".join(f"o{i}\n" for i in range(300))
    big_new = "".join(f"n{i}\n" for i in range(300))
    (h,) = diff_hunks(big_old.encode(), big_new.encode())
    assert h.truncated and h.ops == "300-300+"
    shape = HunkShape(h.old_start, h.old_lines, h.new_start, h.new_lines, h.ops)
    assert set_touches([(250, 260)], [shape])
    assert set_to_parent([(250, 260)], [shape]) == [(1, 300)]
    (add,) = shapes("", "a\nb\n")
    assert add.ops == "2+" and set_to_parent([(1, 2)], [add]) == []
    (gone,) = shapes("a\nb\n", "")
    assert gone.ops == "2-" and (gone.old_start, gone.new_start) == (1, 0)


def test_final_newline_and_binary_bytes_are_changes_like_in_git() -> None:
    assert changes(b"a\nb", b"a\nb\n") == [(1, 1, 1, 1)]
    assert changes(b"a\x00\nb\n", b"a\x00\nc\n") == [(1, 1, 1, 1)]


def test_common_tail_is_trimmed_like_git(tmp_path) -> None:
    # git cuts identical 1 KiB blocks off the end before a zero-context diff (what git log -L uses); that stops
    # the compaction from sliding this inserted line to the end of the run of identical lines
    import subprocess

    tail = "".join(f"    v{i} = {i}\n" for i in range(200))
    old = "def f():\n" + "    x = 1\n" * 3 + "    y = 2\n" + "    x = 1\n" * 40 + tail
    new = "def f():\n" + "    x = 1\n" * 3 + "    y = 2\n" + "    x = 1\n" * 41 + tail
    (tmp_path / "a").write_text(old)
    (tmp_path / "b").write_text(new)
    out = subprocess.run(
        ["git", "diff", "--no-index", "-U0", str(tmp_path / "a"), str(tmp_path / "b")],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    (header,) = [line.split(" @@")[0] for line in out.splitlines() if line.startswith("@@")]
    ((start, count, _, _, _),) = [op for op in diff_ops(old.encode(), new.encode())]
    assert header == f"@@ -{start},0 +{start + 1}" and count == 0
    assert start < 44  # untrimmed, libgit2 alone would put it after the run's last line
