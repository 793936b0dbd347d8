"""Give freed heap memory back to the system during long indexing runs, and keep a threaded server's heap small.

An indexing run allocates in waves (a batch of commits read, prepared, written, freed), and glibc's allocator
keeps freed pages for reuse instead of returning them: on git/git's first 20,000 commits the writer process held
265 MB at the end of the keyword phase of which 117 MB were free (``malloc_trim`` gave them back). Calling it
after each batch keeps the resident size near what is live.

The language server answers on a pool of threads, and glibc gives each thread that allocates its own heap
("arena", up to eight per core); freed memory stays in the arena it came from, so each arena grows to the largest
request it has served. On git/git after lsp_bench's searches and hovers the server held 464 MB with the default
arenas, 379 MB with MALLOC_ARENA_MAX=2 and 367 MB with `limit_arenas` (one arena measured the same as two; two
keep the hover prewarm thread off the requests' lock).

Both are no-ops where glibc is not the C library.

Python's cycle collector is the third: a full collection walks every tracked object, and the writer's heap holds
the whole walk (git/git: 82,000 commits' metadata, messages included) while each batch's results churn through
the young generations. It ran 55 full collections in the keyword phase, 9.3 s of the writer's 51 s of CPU;
:func:`frozen_heap` leaves what exists before the phase out of them, and runs them less often.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
SERVER_ARENAS = 2  # for the long-lived servers (language server, MCP), whose requests run on threads
YOUNG_COLLECTION = 25_000  # allocations between the cycle collector's young passes in `frozen_heap`


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _trim() -> Callable[[int], int] | None:
    trim: Callable[[int], int] | None = getattr(_libc(), "malloc_trim", None)
    return trim


def release() -> None:
    """Return free heap pages to the system (glibc's ``malloc_trim``)."""
    trim = _trim()
    if trim is not None:
        trim(0)


def limit_arenas(count: int = SERVER_ARENAS) -> bool:
    """Cap glibc's heaps at ``count`` for the rest of the process (call it before threads start allocating).
    False where the C library has no ``mallopt`` or refused it."""
    mallopt = getattr(_libc(), "mallopt", None)
    return bool(mallopt is not None and mallopt(M_ARENA_MAX, count) == 1)


class _Freeze:
    depth = 0  # blocks open
    threshold: tuple[int, int, int] = (700, 10, 10)  # the collector's before the first of them


_FROZEN = _Freeze()
_FREEZING = threading.Lock()


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave the objects that exist now out of the cycle collector's passes until the block ends (``gc.freeze``:
    they are still freed when their last reference goes), and collect the young generation every
    :data:`YOUNG_COLLECTION` allocations instead of 700: a batch's results, and the read-ahead's, live long
    enough to reach the oldest generation, so each full pass still walked ~100,000 of them (55 passes, 3.5 s).
    Nested or concurrent blocks (a language server indexing two repositories) share one freeze: the collector
    is as it was once the last of them ends."""
    with _FREEZING:
        if _FROZEN.depth == 0:
            _FROZEN.threshold = before = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(before[0], YOUNG_COLLECTION), *before[1:])
        _FROZEN.depth += 1
    try:
        yield
    finally:
        with _FREEZING:
            _FROZEN.depth -= 1
            if _FROZEN.depth == 0:
                gc.set_threshold(*_FROZEN.threshold)
                gc.unfreeze()
