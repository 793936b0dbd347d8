"""One indexing job, the same for the CLI and the language server: the history phase, then the dense phase.

Why one function: the two phases have an order (the dense phase embeds what the history phase catalogued),
a lock discipline (each phase takes the write lock itself, so a reader never waits for both) and rules for
when the second is skipped (cancelled, no model). Written once here, ``backstory index``, the server's
spawned child and its in-process small updates cannot drift apart.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..history.repo import open_repo
from .build import BuildOptions, IndexReport, index_repository, store_for
from .dense_build import embed_pending
from .integrity import reading_catalogue
from .progress import Progress


@dataclass
class JobResult:
    report: IndexReport  # the history phase
    embedded: int = 0  # file units the dense phase embedded
    dense_note: str = ""  # why the dense phase did not run ("" when it ran or was not asked for)


def load_embedder(model_path: str | None) -> tuple[Any, str]:
    """The embedder for the dense phase, or None and why not (a missing model skips the phase, not an error)."""
    from ..models import Embedder, ModelUnavailable, resolve_model

    try:
        return Embedder(resolve_model(model_path)), ""
    except ModelUnavailable as e:
        return None, str(e)


def run_index(
    root: str | os.PathLike[str],
    *,
    options: BuildOptions,
    index_dir: str | os.PathLike[str] | None = None,
    rebuild: bool = False,
    dense: bool = True,
    embedder: Callable[[], Any] | None = None,
    model_path: str | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    wait: float = 0.0,
    verify: bool = True,
    all_branches: bool = False,
) -> JobResult:
    """Index ``root``'s history, then (with ``dense``) embed the file units not embedded yet.

    ``embedder`` returns an already loaded model (the server's); without it the model is loaded from
    ``model_path`` (or the default). ``verify``: see :func:`index_repository`. Raises what it raises.
    """
    cancel = cancel or threading.Event()
    report = index_repository(
        root, options=options, index_dir=index_dir, rebuild=rebuild, progress=progress, cancel=cancel, wait=wait,
        verify=verify, all_branches=all_branches,
    )  # fmt: skip
    if not dense or report.cancelled or cancel.is_set():
        return JobResult(report)
    model, note = (embedder(), "no embedding model") if embedder is not None else load_embedder(model_path)
    if model is None:
        return JobResult(report, dense_note=note)
    with contextlib.closing(open_repo(root)) as repo:
        store = store_for(repo, index_dir)
    with store.write_lock(wait), reading_catalogue():
        embedded = embed_pending(store, model, progress=progress, cancel=cancel)
    return JobResult(report, embedded)
