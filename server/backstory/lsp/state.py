"""Per-repository state of the language server: engine, indexing task, last status.

Workspace folders map to repositories by their git common directory, so two folders of one repository (or of
two worktrees) share one index and one indexing task.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..history.repo import HistoryError, resolve
from ..search.engine import Engine
from ..search.options import ModelConfig
from .options import Options


@dataclass
class RepoState:
    engine: Engine
    key: str
    task: asyncio.Task[None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    last_head: str | None = None
    status: dict[str, Any] = field(default_factory=lambda: {"state": "starting"})
    hover_cache: dict[tuple[Any, ...], bytes] = field(default_factory=dict)  # compressed models (lsp/hover.py)
    waiting_for: str | None = None  # the writer that held the index's lock when our run gave up ("pid 123")

    @property
    def root(self) -> Path:
        return self.engine.root

    @property
    def indexing(self) -> bool:
        return self.task is not None and not self.task.done()

    def head(self) -> str | None:
        return self.engine.head()


def model_config(options: Options) -> ModelConfig:
    return ModelConfig(
        model_path=options.modelPath,
        reranker=options.reranker if options.rerank else "none",
        cross_encoder_dir=options.crossEncoderDir,
        dense=options.dense,
    )


class Repos:
    """Lookup from folders and document paths to repository states."""

    def __init__(self) -> None:
        self.by_key: dict[str, RepoState] = {}
        self.no_repo: set[str] = set()

    def add(self, path: Path, options: Options) -> RepoState | None:
        """The state for the repository containing ``path``; None (remembered) when it is not in one."""
        try:
            engine = Engine(path, options.indexDir, model_config(options))
        except HistoryError:
            self.no_repo.add(str(path))
            return None
        key = str(engine.index_path.resolve())
        if key in self.by_key:
            engine.close()
            return self.by_key[key]
        state = RepoState(engine=engine, key=key)
        self.by_key[key] = state
        return state

    def for_path(self, path: Path, options: Options) -> RepoState | None:
        try:
            resolved = resolve(path)
        except HistoryError:  # a symbolic link that loops: its directory still says which repository
            try:
                resolved = resolve(path.parent) / path.name
            except HistoryError:
                return None
        best: RepoState | None = None
        for state in self.by_key.values():
            root = state.root.resolve()
            if (resolved == root or root in resolved.parents) and (
                best is None or len(str(root)) > len(str(best.root))
            ):
                best = state
        if best is not None:
            return best
        if str(path) in self.no_repo or not path.exists():
            return None
        return self.add(path if path.is_dir() else path.parent, options)

    def first(self) -> RepoState | None:
        return next(iter(self.by_key.values()), None)

    def all(self) -> list[RepoState]:
        return list(self.by_key.values())

    def reconfigure(self, options: Options) -> None:
        for state in self.by_key.values():
            state.engine.configure_models(model_config(options))
            state.hover_cache.clear()
