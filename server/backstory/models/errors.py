"""The one exception the models package lets escape for "no usable model".

Callers (the index builder, the search engine, the CLI) need a single thing to catch so that a missing or
damaged model degrades to "dense lane off" with a readable hint instead of an onnxruntime or protobuf
traceback. Every message says what was looked for, where, and how to fix it.
"""

from __future__ import annotations


class ModelUnavailable(Exception):
    """No usable model: files missing, unreadable or corrupt, or the graph cannot be run."""
