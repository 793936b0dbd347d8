"""Progress reporting shared by the indexing phases and their views (CLI bar, LSP work-done progress)."""

from __future__ import annotations

from collections.abc import Callable

# called as progress(phase, done, total); must be cheap, views throttle themselves
Progress = Callable[[str, int, int], None]

# what each phase counts: (label, unit)
PHASES: dict[str, tuple[str, str]] = {
    "history": ("Indexing history", "commits"),
    "merges": ("Diffing merges", "merge files"),
    "dense": ("Embedding changes", "files embedded"),
}
