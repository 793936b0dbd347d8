"""The index's write lock: one writer at a time (``flock`` on a file in the index directory, released by the kernel
even on kill -9), and who holds it, asked without taking it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import IndexBusy


def holder(lock: Path) -> int | None:
    """The process holding the write lock (an indexer at work), or None when nobody writes.

    Read from ``/proc/locks`` where there is one, so asking never takes the lock (a probe would make an
    indexer starting at that instant fail as busy); elsewhere a shared, non-blocking probe."""
    try:
        st = lock.stat()
    except OSError:
        return None
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return _probe(lock)
    for line in table.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK" or parts[3] != "WRITE":
            continue
        dev, _, ino = parts[5].rpartition(":")
        major, _, minor = dev.partition(":")
        try:
            same = int(ino) == st.st_ino and (int(major, 16), int(minor, 16)) == (
                os.major(st.st_dev),
                os.minor(st.st_dev),
            )
        except ValueError:
            continue
        if same:
            return int(parts[4]) if parts[4].lstrip("-").isdigit() and int(parts[4]) > 0 else -1
    return None


def _probe(lock: Path) -> int | None:
    try:
        fh = open(lock)  # noqa: SIM115
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            who = fh.read().strip()
            return int(who[4:]) if who.startswith("pid ") and who[4:].isdigit() else -1
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


@contextlib.contextmanager
def hold(lock: Path, wait: float = 0.0) -> Iterator[None]:
    """Exclusive writer lock (flock: released by the kernel even on kill -9)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fh = open(lock, "a+")  # noqa: SIM115
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    fh.seek(0)
                    who = fh.read().strip() or "another process"
                    raise IndexBusy(
                        f"another `backstory index` is writing this index ({who}); "
                        "wait for it to finish or pass --wait SECONDS",
                        who,
                    ) from None
                time.sleep(0.1)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        yield
    finally:
        fh.close()
