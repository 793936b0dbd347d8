"""Progress reporting shared by the indexing phases and their views (CLI bar, LSP work-done progress)."""

from __future__ import annotations

from collections.abc import Callable

# called as progress(phase, done, total); must be cheap, views throttle themselves
Progress = Callable[[str, int, int], None]

# what each phase counts: (label, unit); views say "<label> <done>/<total> <unit>" ("embedding 512/4,635 files")
PHASES: dict[str, tuple[str, str]] = {
    "history": ("indexing history", "commits"),
    "merge_paths": ("listing merges", "merges"),  # right after the keyword lanes (`merge_diffs.list_merges`)
    "merges": ("diffing merges", "merges"),
    "symbols": ("attaching symbols", "commits"),
    "texts": ("storing commit texts", "commits"),  # a long run's, after its symbols (and an older index's, once)
    "message_index": ("indexing messages", "commits"),  # only to repair it: written with the history's batches
    "dense": ("embedding", "files"),
    "messages": ("embedding messages", "commits"),
}
