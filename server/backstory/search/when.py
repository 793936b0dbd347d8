"""Parsing of ``--since`` / ``--until``: ISO dates, RFC 3339 timestamps and relative ages like ``30d``."""

from __future__ import annotations

import datetime as dt
import re

_REL = re.compile(r"^\s*(\d+)\s*(h|d|w|m|y)\s*$", re.IGNORECASE)
_UNIT_DAYS = {"h": 1 / 24, "d": 1, "w": 7, "m": 30, "y": 365}


class BadDate(ValueError):
    """A date filter that cannot be understood."""


def parse_when(text: str, now: dt.datetime | None = None, *, end_of_day: bool = False) -> int:
    """Unix seconds for ``text``. A bare date means its start (or its end, for ``--until``), in UTC."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = _REL.match(text)
    if m:
        return int((now - dt.timedelta(days=int(m.group(1)) * _UNIT_DAYS[m.group(2).lower()])).timestamp())
    s = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
            day = dt.datetime.strptime(s, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc)
            if end_of_day:
                day += dt.timedelta(days=1, seconds=-1)
            return int(day.timestamp())
        value = dt.datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadDate(
            f"cannot understand the date {text!r}: use YYYY-MM-DD, an RFC 3339 time such as "
            "2024-05-01T12:00:00Z, or a relative age such as 30d, 2w, 6m, 1y"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp())
