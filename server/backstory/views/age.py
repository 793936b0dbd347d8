"""Relative ages ("3 weeks ago"), one rule for every view: the CLI, hovers and the clients agree on it."""

from __future__ import annotations


def relative_age(ts: int, now: float) -> str:
    days = (now - ts) / 86400
    if days < 1:
        hours = int(days * 24)
        return "just now" if hours < 1 else f"{hours}h ago"
    if days < 60:
        return f"{int(days)}d ago"
    if days < 730:
        return f"{int(days / 30)}mo ago"
    return f"{int(days / 365)}y ago"
