"""Give freed heap memory back to the system during long indexing runs.

An indexing run allocates in waves (a batch of commits read, prepared, written, freed), and glibc's allocator
keeps freed pages for reuse instead of returning them: on git/git's first 20,000 commits the writer process held
265 MB at the end of the keyword phase of which 117 MB were free (``malloc_trim`` gave them back). Calling it
after each batch keeps the resident size near what is live. A no-op where glibc is not the C library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release() -> None:
    """Return free heap pages to the system (glibc's ``malloc_trim``)."""
    trim = _trim()
    if trim is not None:
        trim(0)
