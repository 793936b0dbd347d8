"""One repository's search engine: the state a search reads, and the search run on it.

The pipeline, one module per step: the lanes on one snapshot of the index (:mod:`.lanes`, fused by
:mod:`.fusion`) -> the candidates' rerank, learned or blended order and recency nudge (:mod:`.second_stage`)
-> commits as results (:mod:`.results`). This module holds what they share and what must be read first: the
repository, the store and its open Tantivy indexes, the models, the rebuild a long-lived process must follow,
and the freshness (:mod:`.freshness`) and scope (:mod:`.topology`) of what is indexed.

One ``Engine`` per repository. It is cheap to construct; Tantivy, usearch and the models open lazily, and the
long-lived language server keeps one engine per repository so that those costs are paid once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import tantivy

from ..history import libgit, reader
from ..history.ignore_revs import ignore_files, read_ignore_revs
from ..history.repo import HistoryError, bound_delta_cache, head_sha, open_repo, worktree_root
from ..index import message_index
from ..index.analyzer import query_terms
from ..index.catalog import Catalog
from ..index.dense_build import dense_stamp
from ..index.graph import holds_branches
from ..index.integrity import Verified, reading_catalogue
from ..index.store import IndexBusy, StoreError, store_for
from ..index.text_index import index_exists, open_index, reading_tantivy
from .dense import DenseLane
from .features import FEATURES
from .freshness import Freshness
from .fusion import FusedCommit
from .health import status
from .lanes import Lanes
from .message_lane import MessageLane
from .options import SECOND_STAGES, Cancelled, ModelConfig, SearchOptions, bounded_query
from .ordering import Ordering
from .rerank import Rerank
from .results import search_results
from .second_stage import SecondStage
from .topology import Topology

log = logging.getLogger(__name__)

SMALL_UPDATE_COMMITS = 50  # see Engine.small_update_due
SMALL_UPDATE_UNITS = 300
# merges diffed on the fly (see Engine.merge_blocks) remembered; git/git's whole history crosses 21,215 merges,
# and each entry is a few hundred bytes
MERGE_MEMO = 30_000


class Engine:
    def __init__(
        self, path: str | Path, index_dir: str | Path | None = None, models: ModelConfig | None = None
    ) -> None:
        self.repo = open_repo(path)
        bound_delta_cache(self.repo)  # a language server reads through this handle for hours
        self.root = worktree_root(self.repo)
        self.store = store_for(self.repo, index_dir)
        self.catalog = Catalog.of(self.store)
        self.models = models or ModelConfig()
        self._index: tantivy.Index | None = None
        self._staging: tantivy.Index | None = None
        self._messages: tantivy.Index | None = None  # the message lane's per-commit index
        self._messages_known: tuple[tuple[int, int, int], bool] | None = None  # (catalogue version, built)
        self._messages_checked = message_index.verified(self.store)  # its files already checked
        self._generation: str | None = None
        self._lock = threading.RLock()
        self._merge_ops: dict[tuple[str, str, str], str] = {}
        self._blobs: dict[tuple[str, str], Any] = {}  # (commit, path) -> blob id, for merge_blocks
        self._memo_for: str | None = None  # the index's `indexed_at` when the two memos started
        self._git: Any = None  # pygit2 repository for merge diffs, opened on first use
        self._ignored: tuple[Any, set[str]] | None = None
        self.dense = DenseLane(self.store, self.models)
        self.messages = MessageLane(self.dense)
        self.rerank = Rerank(self.dense)
        self.ordering = Ordering(self.models.second_stage_path)
        self._texts_version: tuple[int, int, int] | None = None  # the catalogue its commit-text cache read
        self.graph = Topology(self.store, self.repo, self.catalog)
        self.fresh = Freshness(self.store, self.repo, self.catalog, self.graph, self.dense)
        self.lanes = Lanes(self.catalog, self.dense, self.messages)
        self.second_stage = SecondStage(self.catalog, self.dense, self.rerank, self.ordering)
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

    def _message_index(self) -> tantivy.Index | None:
        """The message lane's per-commit index (`index.message_index`), or None while there is none to read (not
        built yet, damaged, being built again: the next indexing run builds it; the lane says so). Derived data:
        one that cannot be read is never an error here. It may lag the catalogue for a moment (a batch between
        its two commits): a document whose commit is not indexed finds no hunks and is dropped."""
        try:
            if not self._messages_built() or message_index.damaged(self.store, self._messages_checked):
                self._messages = None
                return None
            with reading_tantivy():
                if self._messages is None:
                    self._messages = message_index.open_messages(self.store.messages_path, create=False)
                self._messages.reload()
        except (StoreError, OSError, ValueError) as e:
            log.warning("the message index cannot be read (%s); the message lane is left out", e)
            self._messages = None
        return self._messages

    def _messages_built(self) -> bool:
        """`message_index.built`, asked again only when the catalogue changed."""
        version = self.store.data_version()
        if self._messages_known is None or self._messages_known[0] != version:
            self._messages_known = (version, message_index.built(self.store))
        return self._messages_known[1]

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
        with self._lock:
            return self._ignored_revisions(files, key)

    def _ignored_revisions(self, files: list[Path], key: tuple[tuple[str, int], ...]) -> set[str]:
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
        when the child did it). An index built before the second stage's commit texts were stored gets them in
        such a child too (a minute of analysis on git/git), not in the server, and so does one built before the
        message lane's own index."""
        try:
            if not self.has_index() or not self.catalog.commit_texts_stored():
                return False
            if not self._no_messages() and not message_index.built(self.store):
                return False  # every message read once (~10 s, 60,000 of them, on git/git): a child's work too
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
        compare): False means the next index run embeds every unit again (or, when only the stored states'
        step changed, re-encodes them)."""
        model = self.dense.embedder() if self.models.dense else None
        stamp = self.manifest().get("dense")
        return model is None or stamp is None or stamp == dense_stamp(model)

    def merge_blocks(self, merge: str, parent: str, path: str) -> str:
        """A merge's change blocks for ``path`` against one parent, diffed now (memoised): for merges the
        catalogue has no stored blocks for (indexed before they were stored, or not indexed yet)."""
        key = (merge, parent, path)
        ops = self._merge_ops.get(key)
        if ops is None:
            if len(self._merge_ops) > MERGE_MEMO:  # replaced, not cleared: another thread may be reading them
                self._merge_ops = {}
            if len(self._blobs) > 2 * MERGE_MEMO:
                self._blobs = {}
            git = self._git  # once: release_git may drop it from another thread meanwhile
            if git is None:
                git = self._git = libgit.of(self.repo)
            from ..index import merge_diffs  # the indexing stack: only exact history through a merge needs it

            ops = self._merge_ops[key] = merge_diffs.merge_blocks(git, merge, parent, path, self._blobs)
        return ops  # the local: another thread may replace the memo meanwhile

    def release_git(self) -> None:
        """Let go of libgit2 between indexing runs: the merge diffs' handle and memo (what a run's hovers diffed
        through merges is read from the catalogue after it), this repository's cached handle, which keeps the pack
        index and the pack pages it touched resident (:func:`libgit.release`), and what reading it keeps
        (:func:`reader.forget`). Each is opened again on demand."""
        with self._lock:
            self._merge_ops = {}
            self._blobs = {}
            self._git = None
        libgit.release(self.repo)
        reader.forget(self.repo)

    def holds_branches(self) -> bool:
        """Whether the index holds every local branch's history (``backstory index --all-branches``)."""
        return holds_branches(self.store)

    def configure_models(self, models: ModelConfig) -> None:
        """Use other models from the next search on (the language server's settings changed)."""
        self.models = models
        self.dense.config = models

    @property
    def catalogue_lock(self) -> threading.RLock:
        """Held around every read of the one catalogue connection the language server's threads share (status,
        searches, hovers, prewarming): SQLite's Python binding does not let two threads use one connection at
        once (a status poll beside a prewarmed hover's history failed in CI with a ``SystemError``)."""
        return self._lock

    def topology(self, head: str) -> tuple[dict[str, list[str]], list[str]]:
        """Parents of indexed commits and a child-before-parent order from ``head`` (cached per head and index)."""
        with self._lock, reading_catalogue():
            parents, order, _new = self.graph.of(head, self._generation)
            return parents, order

    def indexed_merges(self) -> set[str]:
        """Merges whose changed paths the catalogue knows (others are compared through git on the fly)."""
        with self._lock:
            return self._indexed_merges()

    def _indexed_merges(self) -> set[str]:
        stamp = self.store.get_state("indexed_at")
        if stamp != self._memo_for:  # a run started or ended: the merges' blocks it stores (its last phase) are read
            self._memo_for = stamp  # from the catalogue after it, so what was diffed on the fly during it is let
            self._merge_ops = {}  # go (a run's hovers fill up to ~20 MB on git/git)
            self._blobs = {}
        return self.graph.merges(self._generation)

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
            self._messages = None
            self._messages_known = None
            self.dense.reset()
            self.messages.reset()
            self.ordering.texts.clear()  # a rebuild may store other excerpts (options changed)
            self._generation = generation

    def freshness(self) -> tuple[dict[str, Any], set[str] | None, str | None]:
        """Index freshness for ``_meta``, the reachable indexed set (None = all), and a hint when stale.

        Under the engine's lock: the language server asks from several threads (status, hovers, searches), and
        they share one catalogue connection and the cache of counts."""
        with self._lock, reading_catalogue():
            self._follow_rebuilds()
            return self.fresh.report(self._generation, self.models.dense)

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
            allowed = self.graph.scope(opts, allowed, meta, self._generation)
            index = self._text_index()  # one snapshot for the lanes and the second stage's features
            no_messages = self._no_messages()
            fused, lanes_used, commit_scores = self.lanes.fused(
                query, opts, allowed, meta, cancelled, index, self._staging_index(), no_messages,
                None if no_messages else self._message_index(),
            )  # fmt: skip
            self._current_texts()
            ranked = self.second_stage.rank(
                query, fused, lanes_used, commit_scores, opts, meta, cancelled, index.searcher(), no_messages
            )
            results = search_results(self.catalog, ranked, opts.k, opts.hide_reverted)
        meta["lanes"] = lanes_used
        if not results and hint is None:
            meta["hint"] = "no matching commits; try other words, fewer filters, or `backstory status`"
        meta["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return {"query": query, "results": results, "_meta": meta}

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
        per-commit scores (the dense lane's centroids, the message lane's cosines), as :meth:`.Lanes.fused`
        returns them; ``searcher``: the snapshot the lanes searched, else the index's latest."""
        with self._lock:  # the commit-text cache
            self._current_texts()
            searcher = searcher if searcher is not None else self._text_index().searcher()
            messages = not self._no_messages()
            return self.ordering.rows(self.catalog, searcher, query, top, rerank, commit_scores, messages, needed)

    def _current_texts(self) -> None:
        """Empty the second stage's commit-text cache when the catalogue changed since it was filled: a commit's
        text is fixed, but the symbols its hunks touch arrive later (the symbols phase), and a long-lived engine
        must then give what a new one would."""
        version = self.store.data_version()
        if version != self._texts_version:
            self.ordering.texts.clear()
            self._texts_version = version

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
