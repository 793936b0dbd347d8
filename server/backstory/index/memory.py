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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
SERVER_ARENAS = 2  # for the long-lived servers (language server, MCP), whose requests run on threads


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
