"""Indexing progress on a terminal (one redrawn line per phase) or in a log (plain lines now and then).

The indexing job calls ``progress(phase, done, total)``; a phase's first call may come after work was already
done (a phase resumed by a later run starts from what was stored), so rates are measured from the first call seen, and
neither a rate nor an ETA is shown before there is something to measure them on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from ..index.progress import PHASES

MIN_RATE_SECONDS = 1.0  # no rate before a phase has run this long
MIN_ETA_SECONDS = 2.0  # no ETA before this (and before a rate)
LOG_INTERVAL = 10.0  # seconds between plain lines when the output is not a terminal
# a terminal line starts with the phase and says what it counts in a reader's words (the editors' status line
# uses index/progress.PHASES: "indexing history 1,000/1,522 commits", "embedding 512/4,635 files")
LABELS = {
    "history": "Indexing history",
    "merge_paths": "Listing merges",
    "merges": "Diffing merges",
    "symbols": "Attaching symbols",
    "texts": "Storing commit texts",
    "message_index": "Indexing messages",
    "dense": "Embedding changes",
    "messages": "Embedding messages",
}
UNITS = {
    "history": "commits",
    "merge_paths": "merges",
    "merges": "merges",
    "symbols": "commits",
    "texts": "commits",
    "message_index": "commits",
    "dense": "file changes",
    "messages": "commits",
}


def clock_text(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``."""
    s = max(round(seconds), 0)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def seconds_text(seconds: float) -> str:
    """``0.4 s``, ``11.1 s``, ``2:05`` (minutes from a minute on)."""
    return f"{seconds:.1f} s" if seconds < 60 else clock_text(seconds)


def rate_text(rate: float) -> str:
    return f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


@dataclass
class PhaseStat:
    name: str
    started: float
    first_done: int
    done: int = 0
    total: int = 0
    ended: float | None = None
    drawn: float = field(default=-1e9)  # last time a line was written for it

    @property
    def label(self) -> str:
        return LABELS.get(self.name) or PHASES.get(self.name, (self.name, "items"))[0].capitalize()

    @property
    def unit(self) -> str:
        return UNITS.get(self.name) or PHASES.get(self.name, ("", "items"))[1]

    def elapsed(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def rate(self, now: float) -> float | None:
        """Items per second since the phase was first seen, or None while there is too little to tell."""
        spent = self.elapsed(now)
        if spent < MIN_RATE_SECONDS or self.done <= self.first_done:
            return None
        return (self.done - self.first_done) / spent

    def eta(self, now: float) -> float | None:
        rate = self.rate(now)
        if rate is None or self.elapsed(now) < MIN_ETA_SECONDS:
            return None
        return max(self.total - self.done, 0) / rate


class ProgressView:
    """The CLI's view of indexing progress, on ``stream`` (stderr).

    On a terminal: one line per phase, redrawn at most ten times a second, ``done/total unit, percent, rate,
    ETA`` and the whole run's time so far. Elsewhere (CI, logs): a line when a phase starts, one every
    ``interval`` seconds, and one when it ends. ``phases`` keeps every phase's totals and times for the
    summary."""

    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool | None = None,
        quiet: bool = False,
        interval: float = LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.quiet = quiet
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.phases: dict[str, PhaseStat] = {}
        self.current: PhaseStat | None = None
        self._width = 0

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self.clock()
        stat = self.current
        if stat is None or stat.name != phase:
            self._end(now)
            stat = self.current = self.phases[phase] = PhaseStat(phase, now, done)
            if not self.tty:
                self._line(f"{stat.label}: {total:,} {stat.unit} to do")
                stat.drawn = now
        stat.done, stat.total = done, total
        if self.quiet:
            return
        if self.tty:
            if done >= total or now - stat.drawn >= 0.1:
                stat.drawn = now
                self._draw(stat, now)
        elif now - stat.drawn >= self.interval:
            stat.drawn = now
            self._line(self._status(stat, now))

    def _status(self, stat: PhaseStat, now: float) -> str:
        pct = f" ({100 * stat.done // stat.total}%)" if stat.total else ""  # 99%, not 100%, before the end
        text = f"{stat.label}: {stat.done:,}/{stat.total:,} {stat.unit}{pct}"
        rate, eta = stat.rate(now), stat.eta(now)
        if rate is not None:
            text += f", {rate_text(rate)}"
        if eta is not None and eta >= 1:
            text += f", about {clock_text(eta)} left"
        return text

    def _draw(self, stat: PhaseStat, now: float) -> None:
        text = f"{self._status(stat, now)}  [{clock_text(now - self.started)} in all]"
        pad = max(self._width - len(text), 0)
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def _line(self, text: str) -> None:
        if not self.quiet:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _end(self, now: float) -> None:
        stat = self.current
        if stat is None or stat.ended is not None:
            return
        stat.ended = now
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        done = f"{stat.done:,} {stat.unit}" if stat.done >= stat.total else f"{stat.done:,}/{stat.total:,} {stat.unit}"
        rate = stat.rate(now)
        self._line(
            f"{stat.label}: {done} in {seconds_text(stat.elapsed(now))}" + (f" ({rate_text(rate)})" if rate else "")
        )

    def close(self) -> None:
        """End the current phase's line (call once the job returned or failed)."""
        self._end(self.clock())

    def seconds(self) -> float:
        """The whole run so far."""
        return self.clock() - self.started
