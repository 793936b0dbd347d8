"""Which indexed commits a search may show, and the commit graph that says so, cached per index state.

Why its own module: the commit graph (parents of indexed commits, a child-before-parent order from a tip, the
merges the catalogue knows) serves exact history, the freshness count and a search's branch scope alike, and
each read costs a catalogue scan, so one cache keyed on the index's state serves them all; the engine only
asks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dulwich.repo import Repo

from ..history import libgit
from ..index.catalog import Catalog
from ..index.graph import GRAPH_CHANGED, MERGES_LISTED, holds_branches, reachable, topo_order
from ..index.store import Store

if TYPE_CHECKING:
    from .options import SearchOptions


@dataclass
class _Tip:
    """A tip's child-before-parent order, how many of its commits are not indexed, and the order as a set."""

    order: list[str]
    new: int
    reach: set[str] | None = None


class Topology:
    def __init__(self, store: Store, repo: Repo, catalog: Catalog) -> None:
        self.store = store
        self.repo = repo
        self.catalog = catalog
        # (index state, parents of indexed commits, tip -> its topology): one tuple, replaced whole, so that a
        # thread still ordering the graph it read cannot file that order under a newer state
        self._graph: tuple[Any, dict[str, list[str]], dict[str, _Tip]] | None = None
        self._merges: tuple[Any, set[str]] | None = None

    def of(self, tip: str, generation: str | None) -> tuple[dict[str, list[str]], list[str], int]:
        """(parents, child-before-parent order from ``tip``, how many of them are not indexed): cached per tip
        while the index does not change (``generation``: the index's, as the engine last read it from the
        manifest). A run sets ``indexed_at`` when it starts and ends, and bumps :data:`GRAPH_CHANGED` with every
        batch it marks indexed and every purge, so a graph read while its keyword lanes write (a symbol history
        asked then) does not stand in for the whole history later."""
        key = (self.store.get_state("indexed_at"), self.store.get_state(GRAPH_CHANGED), generation)
        graph = self._graph
        if graph is None or graph[0] != key:
            graph = self._graph = (key, self.catalog.indexed_parents(), {})
        _key, parents, orders = graph
        cached = orders.get(tip)
        if cached is None:
            new = 0
            if tip not in parents:  # commits since the last run: known through git, not the catalogue
                for c in reachable(self.store, self.repo, tip).ordered:
                    parents[c.sha] = list(c.parents)
                    new += 1
            order = topo_order(tip, parents)
            if len(orders) >= 4:
                orders.pop(next(iter(orders), ""), None)
            cached = orders[tip] = _Tip(order, new)
        return parents, cached.order, cached.new

    def reach(self, tip: str, generation: str | None) -> tuple[set[str], int]:
        """(the commits of :meth:`of`'s order as a set, how many of them are not indexed), made when first asked:
        exact history walks the order alone, and HEAD's set is 4 MB on git/git."""
        _parents, order, new = self.of(tip, generation)
        graph = self._graph
        held = graph[2].get(tip) if graph is not None else None
        if held is None or held.order is not order:  # the index changed meanwhile: this caller's order only
            return set(order), new
        if held.reach is None:
            held.reach = set(order)
        return held.reach, new

    def merges(self, generation: str | None) -> set[str]:
        """Merges whose changed paths the catalogue knows (others are compared through git on the fly)."""
        # an indexing run lists merges chunk by chunk after its keyword lanes (`merge_diffs.list_merges`): each
        # chunk is read from then on, not diffed on the fly by every exact history crossing it
        key = (self.store.get_state("indexed_at"), self.store.get_state(MERGES_LISTED), generation)
        if self._merges is None or self._merges[0] != key:
            self._merges = (key, self.catalog.indexed_merges())
        return self._merges[1]

    def scope(
        self, opts: SearchOptions, allowed: set[str] | None, meta: dict[str, Any], generation: str | None
    ) -> set[str] | None:
        """The commits a search may show: HEAD's history (``allowed``, from the engine's freshness), a branch's
        (``opts.branch``) or every indexed branch's (``opts.all_branches``). Raises HistoryError for a revision
        git does not know."""
        branches = holds_branches(self.store)
        if opts.all_branches:
            if branches:
                return None  # every indexed commit is reachable from a branch (each run purges the rest)
            meta["warnings"].append(
                "the index holds HEAD's history only: run `backstory index --all-branches` to search every branch"
            )
            return allowed
        if not opts.branch:
            return allowed
        tip = libgit.resolve_commit(libgit.of(self.repo), opts.branch)
        reach, new = self.reach(tip, generation)
        if new:
            meta["warnings"].append(
                f"{new:,} commit(s) of {opts.branch} are not indexed, so they cannot be found: run "
                + ("`backstory index`" if branches else "`backstory index --all-branches`")
            )
        return reach
