"""Relative ages ("3 weeks ago"), one rule for every view: the CLI, hovers and both editor clients agree on it.

The rule (the same in clients/vscode/src/age.ts and clients/neovim/lua/backstory/format.lua; the shared table
of cases is tests/data/ages.json):

- less than a minute (or up to a minute in the future: clock skew): "just now"
- further in the future: the date itself, YYYY-MM-DD (UTC)
- then the largest unit that fits, counted down in whole units (integer division, no rounding up): minutes below
  an hour, hours below a day, days below a week, weeks below 30 days, months of 30 days (at most 11) below 365
  days, years of 365 days beyond: "1 day ago", "2 weeks ago", "7 months ago", "2 years ago".
"""

from __future__ import annotations

import datetime as dt

MINUTE = 60
HOUR = 3600
DAY = 86400


def _say(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} ago"


def relative_age(ts: float, now: float) -> str:
    """How long before ``now`` the Unix time ``ts`` was, in words."""
    seconds = int(now - ts)
    if seconds < -MINUTE:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d")
    if seconds < MINUTE:
        return "just now"
    if seconds < HOUR:
        return _say(seconds // MINUTE, "minute")
    if seconds < DAY:
        return _say(seconds // HOUR, "hour")
    days = seconds // DAY
    if days < 7:
        return _say(days, "day")
    if days < 30:
        return _say(days // 7, "week")
    if days < 365:
        return _say(min(11, days // 30), "month")
    return _say(days // 365, "year")


def age_of(iso: str, now: float) -> str:
    """:func:`relative_age` of an ISO 8601 date (as in the JSON results)."""
    return relative_age(dt.datetime.fromisoformat(iso).timestamp(), now)
