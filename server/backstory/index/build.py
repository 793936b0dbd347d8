"""Incremental indexing: git history -> hunks -> SQLite catalogue + Tantivy lanes.

Newest commits first, in batches, each batch crash-safe (see ``store``). Commits that are no longer reachable
from HEAD (rebase, amend, reset) are purged at the start of every run.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dulwich.repo import Repo

from ..history import libgit
from ..history.model import CommitDiff, CommitInfo
from ..history.policy import PathPolicy
from ..history.repo import head_sha, open_repo, read_head_file, worktree_root
from . import (
    batch_writer,
    commit_terms,
    integrity,
    memory,
    merge_diffs,
    message_index,
    relations,
    symbols_phase,
    texts_phase,
)
from .catalog import UNREADABLE_MERGES, Catalog
from .graph import RUN_HEAD, RUN_TOTAL, SCOPE_BRANCHES, deepened, holds_branches, reachable
from .packing import Packer
from .parallel import read_all
from .progress import Progress
from .store import IndexBusy, RebuildNeeded, Store, StoreError, new_manifest, now_iso, store_for
from .text_index import open_index

BATCH_COMMITS = int(os.environ.get("BACKSTORY_INDEX_BATCH", "200"))  # commits in the first durable batch
BATCH_HUNKS = 4000
PRELUDE_COMMITS = 100  # a first run's newest commits, written before the whole history is walked (`_prelude`)
# later batches double up to these: the first results come as soon as the first batch commits, and past it each
# Tantivy commit and SQLite transaction (~50 ms on git/git) is paid once per larger batch
BATCH_GROWTH_MAX = 8

log = logging.getLogger(__name__)

__all__ = ["BuildOptions", "IndexBusy", "IndexReport", "RebuildNeeded", "index_repository", "store_for"]


@dataclass(frozen=True)
class BuildOptions:
    """Options that change what is indexed; recorded in the manifest (a mismatch means rebuild).

    One policy for the CLI and the language server (:meth:`following`): an option left at its default follows
    the index as it was built, and only an option asked for (a value other than the default) that differs
    from the index's means a rebuild. So ``backstory index --max-file-bytes 2000000`` and an editor's server
    with default settings keep updating one index instead of rebuilding it in turn; ``--rebuild`` builds with
    exactly the options given (the way back to a default)."""

    no_messages: bool = False
    symbols: bool = True
    max_file_bytes: int = 1_000_000
    excludes: tuple[str, ...] = ()

    def following(self, built: Mapping[str, Any]) -> BuildOptions:
        """These options, with each one left at its default taken from ``built`` (an index manifest's options)."""
        defaults = BuildOptions()
        taken: dict[str, Any] = {}
        for f in fields(self):
            if getattr(self, f.name) != getattr(defaults, f.name) or f.name not in built:
                continue
            value = built[f.name]
            if f.name == "excludes" and isinstance(value, list) and all(isinstance(v, str) for v in value):
                taken[f.name] = tuple(value)
            elif type(value) is type(getattr(defaults, f.name)):
                taken[f.name] = value
        return replace(self, **taken)

    def policy(self, repo: Repo, head: str) -> PathPolicy:
        ignore_file = worktree_root(repo) / ".backstoryignore"
        ignore = ignore_file.read_text("utf-8", "replace") if ignore_file.exists() else ""
        return PathPolicy(
            gitattributes=read_head_file(repo, head, ".gitattributes"),
            backstoryignore=ignore or read_head_file(repo, head, ".backstoryignore"),
            extra_excludes=self.excludes,
            max_file_bytes=self.max_file_bytes,
        )

    def manifest_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "no_messages": self.no_messages,
            "symbols": self.symbols,
            "max_file_bytes": self.max_file_bytes,
        }
        if self.excludes:  # absent when empty, as in manifests written before it was recorded
            out["excludes"] = list(self.excludes)
        return out


@dataclass
class IndexReport:
    head: str
    new_commits: int = 0
    purged_commits: int = 0
    hunks: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    cancelled: bool = False
    #: merges git could not read (a missing object): left unlisted, so every run tries them again, and exact
    #: history through them diffs them on the fly when it can
    unreadable_merges: int = 0


def _main_store(repo: Repo, store: Store) -> Store | None:
    """The main checkout's store when ``store`` is a linked worktree's default one (not a configured one)."""
    main = Path(repo.commondir()) / "backstory"
    own = Path(repo.controldir()) / "backstory"
    if store.path != own or main.resolve() == own.resolve():
        return None
    return Store(main)


def index_repository(
    path: str | os.PathLike[str],
    *,
    options: BuildOptions | None = None,
    index_dir: str | os.PathLike[str] | None = None,
    rebuild: bool = False,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    wait: float = 0.0,
    verify: bool = True,
    all_branches: bool = False,
) -> IndexReport:
    """Bring the index up to date with HEAD. Raises HistoryError / StoreError subclasses with clear messages.

    ``verify``: check every catalogue page first (``PRAGMA quick_check``, ~0.5 s per 100 MB); the language
    server's small in-process updates skip it (their process wrote the catalogue last). ``all_branches``: from
    now on the index holds every local branch's history too (searched with ``--branch`` / ``--all-branches``;
    HEAD's history stays the default scope); later runs keep doing so until ``--rebuild``."""
    options = options or BuildOptions()
    repo = open_repo(path)
    try:
        return _index(repo, options, store_for(repo, index_dir), rebuild, progress, cancel, wait, verify, all_branches)
    finally:
        repo.close()


def _index(repo, options, store, rebuild, progress, cancel, wait, verify, all_branches) -> IndexReport:  # type: ignore[no-untyped-def]
    head = head_sha(repo)
    started = time.monotonic()
    with store.write_lock(wait), integrity.reading_catalogue():
        if rebuild:
            store.clear_data()
        elif store.exists():
            options = options.following(store.read_manifest().get("options") or {})
        policy = options.policy(repo, head)
        manifest_opts = {**options.manifest_options(), "rules": policy.digest()}
        main = None if rebuild else _main_store(repo, store)
        if main is not None and not store.exists() and store.seed_from(main, manifest_opts):
            log.info("started the worktree's index as a copy of %s", main.path)
        if store.exists():
            reason = store.verdict(manifest_opts)
            if reason:
                raise RebuildNeeded(f"{reason}; run `backstory index --rebuild`")
            # before writing into it: damage found now is reported, not built upon (see integrity)
            problem = integrity.catalogue_problem(store.db) if verify else None
            problem = problem or integrity.Verified(store.path).tantivy_problem(store.tantivy_path)
            if problem is not None:
                raise StoreError(str(problem))
            try:
                index = open_index(store.tantivy_path, create=False)
            except Exception as e:  # tantivy raises ValueError/OSError variants on damaged files
                raise StoreError(f"the Tantivy index is damaged ({e}); run `backstory index --rebuild`") from None
        else:
            store.clear_data()  # leftovers of an interrupted first run or copy
            index = open_index(store.tantivy_path, create=True)
            with store.transaction() as db:  # creates the catalogue before the manifest claims an index exists
                store.set_state(db, commit_terms.STATE, commit_terms.VERSION)  # every row it writes is current
            store.write_manifest(new_manifest(manifest_opts))
        report = IndexReport(head=head)
        if all_branches and not holds_branches(store):
            with store.transaction() as db:
                store.set_state(db, "scope", SCOPE_BRANCHES)
        _update(repo, store, index, head, options, policy, report, progress, cancel)
    report.seconds = time.monotonic() - started
    return report


def _update(repo, store, index, head, options, policy, report, progress, cancel) -> None:  # type: ignore[no-untyped-def]
    again = deepened(store, repo)  # a shallow clone's old boundary, deepened since: indexed again, with its parents
    tips = sorted(libgit.branch_tips(libgit.of(repo)).values()) if holds_branches(store) else []
    relations.ensure(store.db)
    if store.get_state("relations") != relations.VERSION:  # an index made before relations were recorded
        with store.transaction() as db:
            relations.backfill(db)
            store.set_state(db, "relations", relations.VERSION)
    writer = index.writer(heap_size=96_000_000, num_threads=1)
    staging = symbols_phase.Staging(store)
    try:
        if not tips and store.db.execute("SELECT 1 FROM commits LIMIT 1").fetchone() is None:
            _prelude(repo, store, writer, staging, head, policy, options, report, cancel)
        graph = reachable(store, repo, head, forget=again, tips=tips)
        known = {r[0]: r[1] for r in store.db.execute("SELECT sha, state FROM commits")}
        stale = [sha for sha in known if sha not in graph.reachable or sha in again]
        for sha in again:
            known.pop(sha, None)
        todo = [c for c in graph.ordered if known.get(c.sha) != "indexed"]
        if stale or todo:
            # the catalogue is about to change: until this run completes, no head may be taken as "everything
            # indexed is reachable from me" (a run interrupted on another branch would make the old one lie)
            with store.transaction() as db:
                store.set_state(db, "indexed_head", "")
                store.set_state(db, RUN_HEAD, "")
                store.set_state(db, "indexed_at", now_iso())
        if stale:
            batch_writer.purge(store, writer, staging, stale)
            report.purged_commits = len(stale)
        if todo and not tips:  # from here on the catalogue holds only commits reachable from head (graph.RUN_HEAD)
            kept = Catalog.of(store).indexed_count()
            with store.transaction() as db:
                store.set_state(db, RUN_TOTAL, str(kept + len(todo)))
                store.set_state(db, RUN_HEAD, head)
        with memory.frozen_heap():  # the walk stays out of the cycle collector's passes (see memory)
            _keyword_phase(repo, store, writer, staging, todo, policy, options, report, progress, cancel)
        del graph, todo, known  # the walk's commits, messages included (~100 MB on git/git), are done with
        memory.release()
        if not report.cancelled:  # merges' paths, so exact history through them reads the catalogue from now on
            merge_diffs.list_merges(store, repo.controldir(), cancel, progress)
            report.cancelled = cancel is not None and cancel.is_set()
        # then what completes the lanes (symbols), what makes searches faster (the commits' analysed texts:
        # searches answer the same without them), and exact history's merges
        if not report.cancelled and options.symbols:
            with memory.frozen_heap():
                symbols_phase.attach(store, writer, staging, repo, policy, options.no_messages, cancel, progress)
            report.cancelled = cancel is not None and cancel.is_set()
        if not report.cancelled and not options.no_messages:  # written in step; this finishes what a failed
            message_index.sync(store, cancel, progress)  # write or a purge left (nothing to do otherwise)
            report.cancelled = cancel is not None and cancel.is_set()
        if not report.cancelled and not Catalog.of(store).commit_texts_stored():
            # a long run's rows (the search computes a missing one meanwhile), or an index built before these rows
            # were; cancelled, the next run stores the rest
            texts_phase.fill_missing(store, Catalog.of(store), cancel, progress)
            report.cancelled = cancel is not None and cancel.is_set()
        unreadable: list[str] = []
        if not report.cancelled:  # merges' change blocks, for exact symbol history only (diffed on the fly until
            # then): last, so that the lanes and their symbols are complete first
            merge_diffs.fill(store, repo.controldir(), cancel, progress)
            report.cancelled = cancel is not None and cancel.is_set()
            if not report.cancelled:  # `fill` lists every merge it can read first
                unreadable = Catalog.of(store).unlisted_merges()
                report.unreadable_merges = len(unreadable)
        with store.transaction() as db:
            if not report.cancelled:
                store.set_state(db, "indexed_head", head)
                store.set_state(db, UNREADABLE_MERGES, json.dumps(unreadable))  # for `status`
            store.set_state(db, "indexed_at", now_iso())
    finally:
        writer.wait_merging_threads()
        staging.close()


def _keyword_phase(repo, store, writer, staging, todo, policy, options, report, progress, cancel) -> None:  # type: ignore[no-untyped-def]
    """Read ``todo`` (in reader processes) and write it in growing batches, the message index in step."""
    total = len(todo)
    messages = None
    if todo and not options.no_messages:
        messages = message_index.Batches.start(store, cancel)
    packer = store.packer(train=bool(todo))  # the index's dictionaries, trained now if it has become long enough
    done = 0
    if progress:
        progress("history", 0, total)
    batch: list[CommitDiff | CommitInfo] = []
    batch_hunks = 0
    growth = 1
    # a long run indexes the keyword lanes first and attaches symbols in a phase of its own (searchable
    # sooner), then stores the commits' analysed texts; a short one reads each commit once
    inline = len(todo) < symbols_phase.DEFER_FROM
    if not inline:
        texts_phase.defer(store)
    for item in read_all(
        repo, todo, policy, options.symbols and inline, options.no_messages, terms=inline,
        dictionaries=packer.dictionaries,
    ):  # fmt: skip
        if cancel is not None and cancel.is_set():
            report.cancelled = True
            break
        batch.append(item)
        if isinstance(item, CommitDiff):
            batch_hunks += sum(len(f.hunks) for f in item.files)
        if len(batch) >= BATCH_COMMITS * growth or batch_hunks >= BATCH_HUNKS * growth:
            _write(store, writer, staging, batch, options, report, not inline, messages, packer)
            done += len(batch)
            batch, batch_hunks = [], 0
            growth = min(growth * 2, BATCH_GROWTH_MAX)
            memory.release()
            if progress:
                progress("history", done, total)
    if batch:
        _write(store, writer, staging, batch, options, report, not inline, messages, packer)
        done += len(batch)
        if progress:
            progress("history", done, total)


def _prelude(repo, store, writer, staging, head, policy, options, report, cancel) -> None:  # type: ignore[no-untyped-def]
    """A first run's newest commits, found by a date-ordered walk that stops after them and written before the
    whole history is walked (on git/git that walk takes ~3 s: without this, nothing was searchable for 5 s).
    The walk that follows finds them indexed, like a resumed run's. Their symbols and analysed texts come
    after the walk, as a long run's do."""
    newest = libgit.newest(repo, head, PRELUDE_COMMITS)
    if len(newest) < PRELUDE_COMMITS or (cancel is not None and cancel.is_set()):
        return  # a short history: the ordinary run is as quick
    newest.sort(key=lambda c: (-c.commit_time, -c.author_time, c.sha))
    texts_phase.defer(store)
    batch: list[CommitDiff | CommitInfo] = list(read_all(repo, newest, policy, False, options.no_messages, terms=False))
    messages = None if options.no_messages else message_index.Batches.start(store, cancel)
    _write(store, writer, staging, batch, options, report, True, messages, Packer())  # no dictionary yet
    with store.transaction() as db:  # all of HEAD's so far; how many more is known once the walk is done
        store.set_state(db, RUN_TOTAL, "")
        store.set_state(db, RUN_HEAD, head)


def _write(store, writer, staging, batch, options, report, defer, messages, packer) -> None:  # type: ignore[no-untyped-def]
    """One batch written (``defer``: symbols come in their own phase), counted in ``report``."""
    written = batch_writer.write_batch(
        store, writer, staging, batch, no_messages=options.no_messages, symbols_later=options.symbols and defer,
        messages=messages, packer=packer,
    )  # fmt: skip
    report.new_commits += written.commits
    report.hunks += written.hunks
    for k, v in written.skipped.items():
        report.skipped[k] = report.skipped.get(k, 0) + v
