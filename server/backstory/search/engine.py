"""The search pipeline: lanes -> fusion (normalised scores, or RRF) -> rerank -> learned second stage -> recency
-> commits.

One ``Engine`` per repository. It is cheap to construct; Tantivy, usearch and the models open lazily, and the
long-lived language server keeps one engine per repository so that those costs are paid once.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import tantivy

from ..history import libgit
from ..history.ignore_revs import ignore_files, read_ignore_revs
from ..history.repo import EmptyRepository, HistoryError, head_sha, open_repo, worktree_root
from ..index.analyzer import query_terms
from ..index.catalog import Catalog
from ..index.dense_build import dense_stamp
from ..index.graph import holds_branches, indexed_reachable, reachable, topo_order
from ..index.integrity import Verified, reading_catalogue
from ..index.store import IndexBusy, StoreError, store_for
from ..index.text_index import filter_query, index_exists, merge_rankings, open_index, reading_tantivy, search_lane
from . import results
from .dense import DenseLane
from .features import FEATURES
from .fusion import FusedCommit, fuse
from .health import indexer_name as _indexer
from .health import status
from .options import (
    SECOND_STAGES,
    TEXT_LANES,
    Cancelled,
    ModelConfig,
    SearchCancelled,
    SearchOptions,
    bounded_query,
)
from .ordering import Ordering
from .recency import apply_recency, calibrated, recency_factor


def blend(top: list[FusedCommit], rerank: dict[str, float], weight: float) -> dict[str, float]:
    """Final pre-recency scores: the rerank score itself, or rerank + ``weight`` x fused score.

    MaxSim scores of a query's candidates sit in a narrow band (about 0.4-0.7), so used alone they throw away
    the first stage's confidence; on the message-blind evaluation the sum ranked better (docs/benchmarks.md).
    """
    if weight <= 0:
        return dict(rerank)
    return {c.sha: rerank[c.sha] + weight * c.fused for c in top if c.sha in rerank}


def candidates(fused: list[FusedCommit], opts: SearchOptions) -> list[FusedCommit]:
    """The commits the second stage orders: the fused top max(``k``, ``rerank_top``) (top ``k`` without a
    rerank) and, with a rerank, any commit the dense lane ranked in its top ``dense_pool`` that fusion left
    further down.

    Why: score fusion weighs the dense lane against keyword lanes that are often confident and wrong, so a
    commit the dense lane ranks high can fall out of the fused top 20 the second stage sees, although the
    second stage reads the dense rank itself.
    """
    n = max(opts.k, opts.rerank_top) if opts.rerank else opts.k
    top = fused[:n]
    if opts.rerank and (opts.dense_pool > 0 or opts.message_pool > 0):
        top += [c for c in fused[n:] if _pooled(c, opts)]
    return top


def _pooled(c: FusedCommit, opts: SearchOptions) -> bool:
    dense = c.lanes.get("dense", opts.dense_pool + 1) <= opts.dense_pool
    return dense or c.lanes.get("message_dense", opts.message_pool + 1) <= opts.message_pool


SMALL_UPDATE_COMMITS = 50  # see Engine.small_update_due
SMALL_UPDATE_UNITS = 300


class Engine:
    def __init__(
        self, path: str | Path, index_dir: str | Path | None = None, models: ModelConfig | None = None
    ) -> None:
        self.repo = open_repo(path)
        self.root = worktree_root(self.repo)
        self.store = store_for(self.repo, index_dir)
        self.catalog = Catalog.of(self.store)
        self.models = models or ModelConfig()
        self._index: tantivy.Index | None = None
        self._staging: tantivy.Index | None = None
        self._fresh: tuple[Any, set[str] | None, int | None, dict[str, Any], str | None] | None = None  # see _counts
        self._generation: str | None = None
        self._parents: tuple[Any, dict[str, list[str]]] | None = None  # of indexed commits, per index state
        self._orders: dict[str, tuple[list[str], set[str], int]] = {}  # tip -> its topology (see _topology_of)
        self._merges: tuple[Any, set[str]] | None = None
        self._lock = threading.RLock()
        self._merge_ops: dict[tuple[str, str, str], str] = {}
        self._git: Any = None  # pygit2 repository for merge diffs, opened on first use
        self._ignored: tuple[Any, set[str]] | None = None
        self.dense = DenseLane(self.store, self.models)
        self.ordering = Ordering(self.models.second_stage_path)
        self.verified = Verified(self.store.path)  # Tantivy files already checked against their checksums

    # -- state ------------------------------------------------------------------------------------------------

    def _text_index(self) -> tantivy.Index:
        """The Tantivy index at its latest commit; its files are checked first (a ``stat`` each once verified),
        so a damaged one is a clear error rather than a panic or a wrong answer."""
        if self._index is None:
            schema = self.store.schema_problem()
            if schema:
                raise StoreError(f"{schema}; run `backstory index --rebuild`")
        problem = self.verified.tantivy_problem(self.store.tantivy_path)
        if problem is not None:
            self._index = None
            raise StoreError(str(problem))
        with reading_tantivy():
            if self._index is None:
                self._index = open_index(self.store.tantivy_path, create=False)
            self._index.reload()
        return self._index

    def _staging_index(self) -> tantivy.Index | None:
        """The staging index of a long run's symbols phase (commits whose symbols are not attached yet), while
        it exists: search reads it beside the main one (`index.symbols_phase`). The phase deletes it when it
        ends, possibly while this opens it: then there is none."""
        try:
            with reading_tantivy():
                if not index_exists(self.store.staging_path):
                    self._staging = None
                    return None
                if self._staging is None:
                    self._staging = open_index(self.store.staging_path, create=False)
                self._staging.reload()
        except (StoreError, FileNotFoundError):
            self._staging = None
            if index_exists(self.store.staging_path):
                raise
            return None
        return self._staging

    def manifest(self) -> dict[str, Any]:
        return self.store.read_manifest()

    def has_index(self) -> bool:
        return self.store.exists()

    def head(self) -> str | None:
        """HEAD's commit, or None for a repository without commits (or an unreadable HEAD)."""
        try:
            return head_sha(self.repo)
        except HistoryError:
            return None

    @property
    def index_path(self) -> Path:
        return self.store.path

    def embedder(self) -> Any:
        """The embedding model queries use (loaded on first call), or None when it is unavailable."""
        return self.dense.embedder()

    def ignored_revisions(self) -> set[str]:
        """Commits exact history skips (``.git-blame-ignore-revs`` / ``blame.ignoreRevsFile``), abbreviations
        resolved through the catalogue; re-read when the files change."""
        files = ignore_files(self.repo, self.root)
        key = tuple((str(f), f.stat().st_mtime_ns) for f in files)
        if self._ignored is None or self._ignored[0] != key:
            revs: set[str] = set()
            for rev in read_ignore_revs(files):
                revs.update([rev] if len(rev) == 40 else self.catalog.shas_with_prefix(rev, limit=2)[:1])
            self._ignored = (key, revs)
        return self._ignored[1]

    def small_update_due(self, dense: bool) -> bool:
        """Whether bringing the index to HEAD is a small update: a few new commits (and file units to embed) on
        an existing index whose vectors this engine's model made. Views that index in the background (the
        language server, the MCP server) run such an update in their own process, anything bigger in a spawned
        child: spawning costs about a second, while a re-embed after a model change is as big as a first
        index and its memory would stay with the long-lived process (Flask: 455 MB in the server, 276 MB
        when the child did it)."""
        try:
            if not self.has_index():
                return False
            info, _allowed, _hint = self.freshness()
            behind = info.get("commits_behind_head")
            if not (isinstance(behind, int) and 0 <= behind <= SMALL_UPDATE_COMMITS):
                return False
            return self.pending_units() <= SMALL_UPDATE_UNITS and (not dense or self.vectors_current())
        except Exception:
            return False

    def writer_busy(self) -> bool:
        """Whether another process is writing this index (holds its write lock; checked by taking the lock and
        letting go at once)."""
        try:
            with self.store.write_lock(0):
                return False
        except IndexBusy:
            return True

    def pending_units(self) -> int:
        """File units the dense phase has not embedded yet."""
        return self.catalog.pending_units()

    def vectors_current(self) -> bool:
        """Whether the stored vectors were made by the model this engine queries with (or there is none to
        compare): False means the next index run embeds every unit again."""
        model = self.dense.embedder() if self.models.dense else None
        stamp = self.manifest().get("dense")
        return model is None or stamp is None or stamp == dense_stamp(model)

    def merge_blocks(self, merge: str, parent: str, path: str) -> str:
        """A merge's change blocks for ``path`` against one parent, diffed now (memoised): for merges the
        catalogue has no stored blocks for (indexed before they were stored, or not indexed yet)."""
        key = (merge, parent, path)
        if key not in self._merge_ops:
            if len(self._merge_ops) > 20_000:
                self._merge_ops.clear()
            if self._git is None:
                self._git = libgit.of(self.repo)
            from ..index import merge_diffs  # the indexing stack: only exact history through a merge needs it

            self._merge_ops[key] = merge_diffs.merge_blocks(self._git, merge, parent, path)
        return self._merge_ops[key]

    def holds_branches(self) -> bool:
        """Whether the index holds every local branch's history (``backstory index --all-branches``)."""
        return holds_branches(self.store)

    def configure_models(self, models: ModelConfig) -> None:
        """Use other models from the next search on (the language server's settings changed)."""
        self.models = models
        self.dense.config = models

    def topology(self, head: str) -> tuple[dict[str, list[str]], list[str]]:
        """Parents of indexed commits and a child-before-parent order from ``head`` (cached per head and index)."""
        with reading_catalogue():
            parents, order, _reach, _new = self._topology_of(head)
            return parents, order

    def _topology_of(self, tip: str) -> tuple[dict[str, list[str]], list[str], set[str], int]:
        """(parents, child-before-parent order from ``tip``, the same as a set, how many of them are not
        indexed): cached per tip while the index does not change."""
        key = (self.store.get_state("indexed_at"), self._generation)
        if self._parents is None or self._parents[0] != key:
            self._parents = (key, self.catalog.indexed_parents())
            self._orders.clear()
        parents = self._parents[1]
        cached = self._orders.get(tip)
        if cached is None:
            new = 0
            if tip not in parents:  # commits since the last run: known through git, not the catalogue
                for c in reachable(self.store, self.repo, tip).ordered:
                    parents[c.sha] = list(c.parents)
                    new += 1
            order = topo_order(tip, parents)
            if len(self._orders) >= 4:
                self._orders.pop(next(iter(self._orders)))
            cached = self._orders[tip] = (order, set(order), new)
        return parents, cached[0], cached[1], cached[2]

    def _scope(self, opts: SearchOptions, allowed: set[str] | None, meta: dict[str, Any]) -> set[str] | None:
        """The commits a search may show: HEAD's history (``allowed``, from :meth:`freshness`), a branch's
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
        _parents, _order, reach, new = self._topology_of(tip)
        if new:
            meta["warnings"].append(
                f"{new:,} commit(s) of {opts.branch} are not indexed, so they cannot be found: run "
                + ("`backstory index`" if branches else "`backstory index --all-branches`")
            )
        return reach

    def indexed_merges(self) -> set[str]:
        """Merges whose changed paths the catalogue knows (others are compared through git on the fly)."""
        key = (self.store.get_state("indexed_at"), self._generation)
        if self._merges is None or self._merges[0] != key:
            self._merges = (key, self.catalog.indexed_merges())
        return self._merges[1]

    def _follow_rebuilds(self) -> None:
        """Reopen everything when the index was rebuilt (by us or another process) since we opened it."""
        try:
            generation = self.store.read_manifest().get("generation")
        except StoreError:
            generation = None
        if generation != self._generation:
            self.store.close()
            self._index = None
            self._staging = None
            self.dense.reset()
            self.ordering.texts.clear()  # a rebuild may store other excerpts (options changed)
            self._generation = generation

    def freshness(self) -> tuple[dict[str, Any], set[str] | None, str | None]:
        """Index freshness for ``_meta``, the reachable indexed set (None = all), and a hint when stale.

        Under the engine's lock: the language server asks from several threads (status, hovers, searches), and
        they share one catalogue connection and the cache of counts."""
        with self._lock, reading_catalogue():
            return self._freshness()

    def _freshness(self) -> tuple[dict[str, Any], set[str] | None, str | None]:
        self._follow_rebuilds()
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
        key = (head, self.store.data_version(), self._generation, self.store.vectors_stat())
        if self._fresh is None or self._fresh[0] != key:
            self._fresh = (key, *self._counts(head))
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
        elif self.models.dense:
            hint = vectors_problem  # the vector file is missing or damaged
        return info, allowed, hint

    def _counts(self, head: str) -> tuple[set[str] | None, int | None, dict[str, Any], str | None]:
        """What :meth:`freshness` reads from the catalogue (counts over every commit and file: tens of
        milliseconds on git/git), computed again only when the catalogue, HEAD or the vector file changed."""
        allowed, behind = indexed_reachable(self.store, self.repo, head)
        count = None
        if allowed is None and holds_branches(self.store):  # other branches are indexed too: HEAD's history only
            _parents, _order, allowed, new = self._topology_of(head)
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

    # -- search -----------------------------------------------------------------------------------------------

    def search(
        self, query: str, opts: SearchOptions | None = None, cancelled: Cancelled | None = None
    ) -> dict[str, Any]:
        """Run the whole pipeline and return the JSON shape documented in docs/protocol.md."""
        opts = opts or SearchOptions()
        if opts.second_stage not in SECOND_STAGES:
            raise ValueError(f"unknown second stage {opts.second_stage!r}; choose one of {', '.join(SECOND_STAGES)}")
        query, cut = bounded_query(query)
        started = time.perf_counter()
        with self._lock, reading_catalogue():
            info, allowed, hint = self.freshness()
            meta: dict[str, Any] = {
                "repo": str(self.root), "index": info, "lanes": [], "rerank": None, "second_stage": None, "hint": hint,
                "warnings": [cut] if cut else [],
            }  # fmt: skip
            if not self.store.exists() or info.get("head") is None:
                meta["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
                return {"query": query, "results": [], "_meta": meta}
            if query.strip() and not query_terms(query):
                meta["warnings"].append(
                    "the query has no words to match (only common words like 'the' or 'and'); results rank by "
                    "meaning alone and are likely noise: add the words that describe the change"
                )
            allowed = self._scope(opts, allowed, meta)
            index = self._text_index()  # one snapshot for the lanes and the second stage's features
            fused, lanes_used, commit_scores = self._fused(query, opts, allowed, meta, cancelled, index)
            results = self._finish(query, fused, lanes_used, commit_scores, opts, meta, cancelled, index.searcher())
        meta["lanes"] = lanes_used
        if not results and hint is None:
            meta["hint"] = "no matching commits; try other words, fewer filters, or `backstory status`"
        meta["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return {"query": query, "results": results, "_meta": meta}

    def lane_rankings(
        self,
        query: str,
        opts: SearchOptions,
        allowed: set[str] | None,
        meta: dict[str, Any],
        index: tantivy.Index | None = None,
    ) -> tuple[dict[str, list[tuple[int, float]]], dict[str, dict[str, float]]]:
        """Each wanted lane's (hunk uid, lane score), best first, and lanes' own per-commit scores (the dense
        lane's commit centroids, the message lane's message cosines) where they have them; ``index``: the
        Tantivy index as the search already opened it (checked and reloaded), else it is opened here."""
        index = index if index is not None else self._text_index()
        searcher = index.searcher()
        fq = filter_query(index.schema, opts.filters) if opts.filters.active() else None
        no_messages = bool(self.manifest().get("options", {}).get("no_messages"))
        rankings: dict[str, list[tuple[int, float]]] = {}
        commit_scores: dict[str, dict[str, float]] = {}
        staging = self._staging_index()
        staged = staging.searcher() if staging is not None else None
        for lane in TEXT_LANES:
            if not opts.wants(lane) or (lane == "message" and no_messages):
                continue
            rankings[lane] = search_lane(index, searcher, lane, query, fq)
            if staging is not None and staged is not None:
                rankings[lane] = merge_rankings(rankings[lane], search_lane(staging, staged, lane, query, fq))
        if opts.wants("dense") and self.models.dense:
            dense, by_commit, warning = self.dense.rank(
                query, searcher if fq is not None else None, fq, commits=opts.dense_commits
            )
            if warning:
                meta["warnings"].append(warning)
            if dense is not None:
                rankings["dense"] = dense
            if by_commit:
                commit_scores["dense"] = by_commit
        if opts.wants("message_dense") and self.models.dense and not no_messages:
            hits, by_message = self.dense.rank_messages(query, searcher if fq is not None else None, fq)
            if hits and by_message:
                rankings["message_dense"] = hits
                commit_scores["message_dense"] = by_message
        return rankings, commit_scores

    def _fused(
        self, query, opts, allowed, meta, cancelled, index
    ) -> tuple[list[FusedCommit], list[str], dict[str, dict[str, float]]]:  # type: ignore[no-untyped-def]
        scored, commit_scores = self.lane_rankings(query, opts, allowed, meta, index)
        if cancelled and cancelled():
            raise SearchCancelled
        rankings = {lane: [u for u, _s in r] for lane, r in scored.items()}
        uids = sorted({u for r in rankings.values() for u in r})
        rows = self.catalog.hunk_places(uids)
        sha_of = {u: r["sha"] for u, r in rows.items() if allowed is None or r["sha"] in allowed}
        sizes = self.catalog.hunk_counts(sorted(set(sha_of.values()))) if opts.size_prior > 0 else None
        fused = fuse(
            rankings,
            sha_of,
            tie_key=lambda u: (rows[u]["path"], rows[u]["idx"]),
            k=opts.rrf_k,
            weights={lane: opts.weights.get(lane, 1.0) or 1.0 for lane in rankings} if opts.lanes else opts.weights,
            hunks_per_commit=opts.hunks_per_commit,
            lane_scores={lane: dict(r) for lane, r in scored.items()},
            method=opts.fusion,
            commit_sizes=sizes,
            size_prior=opts.size_prior,
            commit_scores=commit_scores,
            margin_ref=opts.margin_ref,
        )
        return fused, list(rankings), commit_scores

    def _finish(self, query, fused, lanes_used, commit_scores, opts, meta, cancelled, searcher) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
        top = candidates(fused, opts)
        commits = self.catalog.commit_rows([c.sha for c in top])
        scores = {c.sha: c.fused for c in top}
        rerank_scores: dict[str, float] = {}
        learned_scores: dict[str, float] = {}
        decided: dict[str, list[str]] = {}
        if opts.rerank and top:
            if cancelled and cancelled():
                raise SearchCancelled
            rerank_scores, name, warning = self.dense.rerank(query, top, commits, self._no_messages())
            meta["rerank"] = name
            if warning:
                meta["warnings"].append(warning)
            if not rerank_scores:  # fused order then: the extra candidates would skip commits fused ranked higher
                top = candidates(fused, replace(opts, dense_pool=0))
            else:
                scores = blend(top, rerank_scores, opts.rerank_blend)
                meta["second_stage"] = "blend"
                if self.ordering.applies(opts, lanes_used, name):
                    learned_scores, decided = self._learned(query, top, rerank_scores, commit_scores, meta, searcher)
        now = time.time()
        factors = {c.sha: recency_factor(commits[c.sha]["author_time"], now, opts.recency_weight) for c in top}
        if learned_scores:  # a probability over the candidates; recency reorders only near-equal ones
            probability = calibrated(learned_scores, factors)
            final = [(probability[c.sha], c.sha, factors[c.sha]) for c in top]
        else:
            final = [(apply_recency(scores[c.sha], factors[c.sha]), c.sha, factors[c.sha]) for c in top]
        final.sort(key=lambda t: (-round(t[0], 9), t[1]))
        by_sha = {c.sha: c for c in top}
        sizes = Counter(commits[sha]["n_hunks"] for sha in by_sha)  # twins have as many hunks: digest only those
        maybe_twins = [sha for sha in by_sha if commits[sha]["n_hunks"] and sizes[commits[sha]["n_hunks"]] > 1]
        ranked = results.collapse_twins([sha for _s, sha, _f in final], self.catalog.change_signatures(maybe_twins))
        if opts.hide_reverted:
            fates = self.catalog.consequences([sha for sha, _twins in ranked])
            ranked = [t for t in ranked if not results.stands_reverted([k for k, _by in fates.get(t[0], [])])]
        shown = ranked[: opts.k]
        score_of = {sha: score for score, sha, _f in final}
        hunk_rows = self.catalog.hunk_rows([u for sha, _twins in shown for u in by_sha[sha].hunks])
        twin_rows = self.catalog.commit_rows([t for _sha, twins in shown for t in twins])
        out = []
        for sha, twins in shown:
            c = by_sha[sha]
            why = {
                "lanes": c.lanes,
                "fused": round(c.fused, 6),
                "rerank": rerank_scores.get(sha),
                "learned": learned_scores.get(sha),
                "recency": round(factors[sha], 4),
                "decided_by": decided.get(sha, []),
            }
            hit = results.result(commits[sha], [hunk_rows[u] for u in c.hunks], c.hunk_lanes, score_of[sha], why)
            hit["twins"] = [results.commit_json(twin_rows[t]) for t in twins]
            out.append(hit)
        results.attach_consequences(out, self.catalog)
        return out

    def candidate_features(
        self,
        query: str,
        top: list[FusedCommit],
        rerank: dict[str, float],
        commit_scores: Mapping[str, Mapping[str, float]],
        needed: Collection[str] = FEATURES,
        searcher: tantivy.Searcher | None = None,
    ) -> list[list[float]]:
        """The learned second stage's feature rows for ``top`` (all of them by default: what ``tools/finetune``
        trains on; a model computes only the ``needed`` ones it reads); ``commit_scores``: the lanes' own
        per-commit scores (the dense lane's centroids, the message lane's cosines), as :meth:`_fused` returns them;
        ``searcher``: the snapshot the lanes searched (a search passes it), else the index's latest."""
        with self._lock:  # the commit-text cache
            searcher = searcher if searcher is not None else self._text_index().searcher()
            messages = not self._no_messages()
            return self.ordering.rows(self.catalog, searcher, query, top, rerank, commit_scores, messages, needed)

    def _learned(
        self, query, top, rerank, commit_scores, meta, searcher
    ) -> tuple[dict[str, float], dict[str, list[str]]]:  # type: ignore[no-untyped-def]
        emb = self.dense.embedder()
        model_id = emb.model_id if emb is not None else None
        rows = functools.partial(self.candidate_features, query, top, rerank, commit_scores, searcher=searcher)
        return self.ordering.scores(top, rows, model_id, meta, messages=not self._no_messages())

    def _no_messages(self) -> bool:
        return bool(self.manifest().get("options", {}).get("no_messages"))

    def status(self, thorough: bool = True) -> dict[str, Any]:
        """What is indexed, what each phase still has to do, disk use per component, whether every part of the
        store is sound, and the next step (the shape ``backstory status --json`` prints, docs/protocol.md)."""
        with self._lock, reading_catalogue():  # one catalogue connection: not beside a search's reads
            return status(self, thorough)

    def close(self) -> None:
        """Close the catalogue and the repository's pack files (dulwich complains about open ones at exit)."""
        self.store.close()
        self.repo.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
