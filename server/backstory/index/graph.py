"""Reachability from HEAD, using the catalogue's parent lists and git (libgit2) only for commits it does not know.

Search must never show a commit that a rebase, amend or reset made unreachable, and indexing must know which
commits are new; both come from one walk that costs a dictionary lookup per known commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dulwich.objects import Commit
from dulwich.repo import Repo

from ..history import libgit
from ..history.model import CommitInfo
from ..history.repo import shallow_roots
from .catalog import Catalog
from .store import Store


@dataclass
class Graph:
    head: str
    reachable: set[str]
    ordered: list[CommitInfo]  # commits reachable from HEAD that are not indexed yet, newest first


def reachable(
    store: Store, repo: Repo, head: str, forget: frozenset[str] = frozenset(), tips: Sequence[str] = ()
) -> Graph:
    """What is reachable from ``head`` (and from ``tips``: the other branches of an index that holds them);
    indexed commits are followed through their stored parents (those in ``forget`` through git's, and counted
    as new)."""
    rows = store.db.execute("SELECT sha, parents FROM commits WHERE state='indexed'").fetchall()
    known = {r[0]: r[1] for r in rows if r[0] not in forget}
    shallow = shallow_roots(repo)
    git = libgit.of(repo)
    seen: set[str] = set()
    new: list[CommitInfo] = []
    stack = [*reversed(tips), head]
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        parents_json = known.get(sha)
        if parents_json is not None:
            stack.extend(json.loads(parents_json))
            continue
        obj = libgit.commit(git, sha)
        if obj is None:
            continue  # beyond a shallow boundary or a missing object
        info = libgit.info(obj, shallow)
        new.append(info)
        stack.extend(info.parents)
    new.sort(key=lambda c: (-c.commit_time, -c.author_time, c.sha))
    return Graph(head=head, reachable=seen, ordered=new)


def deepened(store: Store, repo: Repo) -> frozenset[str]:
    """Commits indexed as roots that have parents now: the boundary of a shallow clone that was deepened or
    unshallowed since. Their stored diff is against nothing and their stored parents end the walk, so the
    writer indexes them again (and the history behind them). Roots are few: one query, a lookup each."""
    shallow = shallow_roots(repo)
    out = set()
    for (sha,) in store.db.execute("SELECT sha FROM commits WHERE parents='[]' AND state='indexed'"):
        if sha in shallow:
            continue
        try:
            obj = repo[sha.encode("ascii")]
        except KeyError:
            continue
        if isinstance(obj, Commit) and obj.parents:
            out.add(sha)
    return frozenset(out)


# A run toward HEAD records it once its purge is done: from then on (until a run toward another head starts) the
# catalogue holds only commits reachable from it, and RUN_TOTAL of them once the run completes. A search while
# a long first run goes on then needs no walk: on git/git the walk re-read ~74,000 commits from git (1.5-4.5 s)
# for every query, and in the language server after every batch. A first run sets RUN_HEAD with an empty
# RUN_TOTAL once its prelude (the newest commits) is written, before its own walk has counted the rest.
RUN_HEAD = "run_head"
RUN_TOTAL = "run_total"
MERGES_LISTED = "merges_listed"  # a count of the chunks of merges listed (`merge_diffs.list_merges`)
GRAPH_CHANGED = "graph_changed"  # a count of the batches marked indexed and the purges (`batch_writer`)
SCOPE_BRANCHES = "branches"  # state "scope": the index holds every local branch's history, not only HEAD's


def holds_branches(store: Store) -> bool:
    return store.get_state("scope") == SCOPE_BRANCHES


def indexed_reachable(store: Store, repo: Repo, head: str) -> tuple[set[str] | None, int | None]:
    """Indexed commits reachable from HEAD (None = all of them) and how many reachable commits are not indexed
    (None: not counted yet, see :data:`RUN_TOTAL`).

    When HEAD is the commit the last complete run indexed and the index holds HEAD's history only, every
    indexed commit is reachable (that run purged the rest), so the walk is skipped: this keeps query latency
    flat on large histories. While a run toward HEAD goes on (or after it was interrupted), every indexed commit
    is reachable too (:data:`RUN_HEAD`) and the rest is counted, not walked. (An index of every branch answers
    None too: the caller narrows it to HEAD's.)
    """
    if store.get_state("indexed_head") == head:
        pending = store.db.execute("SELECT COUNT(*) FROM commits WHERE state<>'indexed'").fetchone()[0]
        if pending == 0:
            return None, 0
    indexed = Catalog.of(store).indexed_count()
    if indexed == 0:
        return set(), None  # nothing to show yet (a first run just started): what is left is not counted
    if store.get_state(RUN_HEAD) == head:
        total = store.get_state(RUN_TOTAL)
        if not total:
            return None, None  # a first run's prelude is written and the whole walk not done: not counted yet
        return None, max(0, int(total) - indexed)
    g = reachable(store, repo, head)
    return g.reachable, len(g.ordered)


def topo_order(head: str, parents: dict[str, list[str]]) -> list[str]:
    """Commits reachable from ``head`` with every child before its parents (reverse DFS post-order)."""
    order: list[str] = []
    seen: set[str] = set()
    stack: list[tuple[str, int]] = [(head, 0)]
    while stack:
        sha, i = stack.pop()
        if i == 0:
            if sha in seen:
                continue
            seen.add(sha)
        ps = parents.get(sha, [])
        if i < len(ps):
            stack.append((sha, i + 1))
            if ps[i] not in seen:
                stack.append((ps[i], 0))
        else:
            order.append(sha)
    order.reverse()
    return order
