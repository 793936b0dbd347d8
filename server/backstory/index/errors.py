"""The store's errors: each message says what to run. Apart from :mod:`.store` so the write lock can raise them."""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot be used as it is; the message says what to run."""


class RebuildNeeded(StoreError):
    """The index was built differently (schema, options, model) and must be rebuilt to be trusted."""


class IndexBusy(StoreError):
    """Another process is writing the index; ``holder`` names it ("pid 123")."""

    def __init__(self, message: str, holder: str = "another process") -> None:
        super().__init__(message)
        self.holder = holder
