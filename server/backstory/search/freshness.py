"""How far the index is behind HEAD, which of its commits HEAD reaches, and the one hint when it is stale.

Why its own module: every search, hover and status asks this first, and the answer costs counts over every
commit and file of the catalogue, so it is cached here on what can change it (HEAD, the catalogue's data
version, a rebuild, the vector file); the engine holds its lock and follows rebuilds before asking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dulwich.repo import Repo

from ..history.repo import EmptyRepository, head_sha
from ..index.catalog import Catalog
from ..index.graph import holds_branches, indexed_reachable
from ..index.store import Store
from .health import indexer_name as _indexer

if TYPE_CHECKING:
    from .dense import DenseLane
    from .topology import Topology


class Freshness:
    def __init__(self, store: Store, repo: Repo, catalog: Catalog, topology: Topology, dense: DenseLane) -> None:
        self.store = store
        self.repo = repo
        self.catalog = catalog
        self.topology = topology
        self.dense = dense
        self._fresh: tuple[Any, set[str] | None, int | None, dict[str, Any], str | None] | None = None  # see _counts

    def report(self, generation: str | None, dense: bool) -> tuple[dict[str, Any], set[str] | None, str | None]:
        """Index freshness for ``_meta``, the reachable indexed set (None = all), and a hint when stale
        (``generation``: the index's, as the engine last read it; ``dense``: whether searches use the model, so a
        missing or damaged vector file is worth a hint)."""
        try:
            head = head_sha(self.repo)
        except EmptyRepository:
            return (
                {"head": None, "indexed_commits": 0, "commits_behind_head": 0},
                set(),
                "the repository is empty",
            )
        writer = self.store.writer_pid()
        info: dict[str, Any] = {"path": str(self.store.path), "head": head, "indexer_pid": writer}
        if not self.store.exists():
            info.update(indexed_commits=0, commits_behind_head=None, last_indexed_commit=None, indexed_at=None)
            if writer is not None:
                return info, set(), f"{_indexer(writer)} is building the index; search again when it has finished"
            return info, set(), "no index yet: run `backstory index`"
        key = (head, self.store.data_version(), generation, self.store.vectors_stat())
        if self._fresh is None or self._fresh[0] != key:
            self._fresh = (key, *self._counts(head, generation))
        _key, allowed, behind, counted, vectors_problem = self._fresh
        info.update(counted, commits_behind_head=behind)
        count = counted["indexed_commits"]
        hint = None
        if count == 0:
            hint = (
                f"{_indexer(writer)} is building the index; search again when it has finished"
                if writer is not None
                else "the index is empty: run `backstory index`"
            )
        elif behind is None:  # a first run has written HEAD's newest commits and is counting the rest
            hint = "only HEAD's newest commits are indexed so far: " + (
                f"{_indexer(writer)} is adding the rest" if writer is not None else "run `backstory index`"
            )
        elif behind:
            hint = f"the index is {behind} commit(s) behind HEAD: " + (
                f"{_indexer(writer)} is adding them" if writer is not None else "run `backstory index`"
            )
        elif dense:
            hint = vectors_problem  # the vector file is missing or damaged
        return info, allowed, hint

    def _counts(
        self, head: str, generation: str | None
    ) -> tuple[set[str] | None, int | None, dict[str, Any], str | None]:
        """What :meth:`report` reads from the catalogue (counts over every commit and file: tens of
        milliseconds on git/git), computed again only when the catalogue, HEAD or the vector file changed."""
        allowed, behind = indexed_reachable(self.store, self.repo, head)
        count = None
        if allowed is None and holds_branches(self.store):  # other branches are indexed too: HEAD's history only
            allowed, new = self.topology.reach(head, generation)
            count = len(allowed) - new
        if self.catalog.commit_state(head) == "indexed":
            last: str | None = head
        else:
            last = next((sha for sha in self.catalog.newest_indexed() if allowed is None or sha in allowed), None)
        if count is None:
            count = self.catalog.indexed_count() if allowed is None else len(allowed & self.catalog.indexed_shas())
        problem = self.dense.problem()
        counted = {
            "indexed_commits": count,
            "last_indexed_commit": last,
            "indexed_at": self.store.get_state("indexed_at"),
            "dense_coverage": 0.0 if problem is not None else self.catalog.dense_coverage(),
            "symbols_pending": self.catalog.pending_symbol_files(),
        }
        return allowed, behind, counted, problem
