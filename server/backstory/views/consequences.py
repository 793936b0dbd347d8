"""What became of a commit, as a line of text: "reverted 3 weeks later by 1a2b3c4; fixed 2 days later by …"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VERBS = {"reverted": "reverted", "reapplied": "re-applied", "fixed": "fixed", "cherry-picked": "cherry-picked"}


def later(days: float) -> str:
    """A gap in days as people say it: "the same day", "2 days later", "3 weeks later", "4 months later"."""
    if days < 1:
        return "the same day"
    for size, unit in ((365, "year"), (30, "month"), (7, "week"), (1, "day")):
        if days >= size:
            n = int(days // size)
            return f"{n} {unit}{'s' if n != 1 else ''} later"
    return "later"


def consequence_line(items: Sequence[dict[str, Any]]) -> str:
    """Each consequence in time order, "; "-separated ("" when there is none)."""
    return "; ".join(
        f"{VERBS.get(c['kind'], c['kind'])} {later(c['after_days'])} by {c['by']['short_sha']}" for c in items
    )
