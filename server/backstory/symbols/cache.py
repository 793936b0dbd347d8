"""One memo of parsed definitions per file content, shared by every feature that asks about a file's symbols.

Why: a hover, the prewarm of an opened document, ``history`` and prior art all ask about several symbols of
the same file version, and parsing a 1,000-line file costs ~10 ms. Keyed by content, so an edited buffer is
parsed again and an unchanged one never is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .extract import extract_definitions
from .model import Definition

SIZE = 32
_PARSED: OrderedDict[tuple[str, bytes], list[Definition] | None] = OrderedDict()
_LOCK = threading.Lock()  # hovers, the prewarm thread and commands share it


def definitions(source: bytes, language: str) -> list[Definition] | None:
    """:func:`extract_definitions` of ``source``, memoised (None when the file cannot be parsed)."""
    key = (language, source)
    with _LOCK:
        if key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key]
    defs = extract_definitions(source, language)
    with _LOCK:
        _PARSED[key] = defs
        while len(_PARSED) > SIZE:
            _PARSED.popitem(last=False)
    return defs
