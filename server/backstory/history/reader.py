"""Turn one commit into file diffs and hunks (libgit2 for trees, blobs and line diffs; no git binary).

Non-merge commits are diffed against their parent (root commits against the empty tree) with rename detection;
merges are recorded by the caller but not diffed, so their changes are never indexed twice.
"""

from __future__ import annotations

import stat
from bisect import bisect_left
from collections import Counter

from dulwich.diff_tree import CHANGE_ADD, CHANGE_DELETE, CHANGE_RENAME
from dulwich.repo import Repo

from .. import symbols
from ..symbols.extract import Row
from ..symbols.versions import VersionCache
from . import libgit
from .diff import diff_hunks, diff_ops
from .model import CommitDiff, CommitInfo, FileDiff, SymbolRef
from .policy import PathPolicy
from .renames import detect_renames
from .trees import TreeDiffer

MAX_SIBLINGS = 60


class Reading:
    """What reading one repository's history keeps between commits: the libgit2 handle, recent blobs (walking
    newest first, a commit's old blob is often the next commit's new one) and parsed file versions
    (``versions`` parses a file's old version incrementally from its new one), recent trees (``trees``: likewise)."""

    def __init__(self, repo: Repo) -> None:
        self.git = libgit.of(repo)
        self.blobs = libgit.BlobCache(self.git)
        self.trees = TreeDiffer(self.git)
        self.versions = VersionCache()


_READINGS: dict[int, Reading] = {}


def reading(repo: Repo) -> Reading:
    """One state per open repository object (cheap to look up on every commit)."""
    state = _READINGS.get(id(repo))
    if state is None or state.git is not libgit.of(repo):
        _READINGS.clear()
        state = _READINGS[id(repo)] = Reading(repo)
    return state


def forget(repo: Repo) -> None:
    """Drop what reading ``repo`` keeps (its handle, recent blobs, trees and parsed versions: up to ~10 MB): for a
    long-lived process between indexing runs (a language server showing a commit fills it too)."""
    _READINGS.pop(id(repo), None)


def _is_gitlink(mode: int | None) -> bool:
    return mode is not None and stat.S_ISDIR(mode) is False and (mode & 0o170000) == 0o160000


def _decode_path(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def read_commit(
    repo: Repo,
    info: CommitInfo,
    policy: PathPolicy,
    *,
    with_symbols: bool = True,
    full: bool = False,
    parent_index: int = 0,
    only_path: str | None = None,
    languages: frozenset[str] | None = None,
) -> CommitDiff:
    """Diff ``info`` against its first parent (``parent_index``: another one, for showing a merge); skipped
    files are counted by reason, never raised. ``only_path`` diffs just the file at (or renamed from) that path
    (``backstory show --path``); ``languages``: just the files in these languages (the symbols phase re-reads
    only the files waiting for symbols; their blobs are not even read). Renames are still detected over the
    whole commit."""
    skipped: Counter[str] = Counter()
    state = reading(repo)
    commit = libgit.commit(state.git, info.sha)
    if commit is None:
        raise KeyError(info.sha)
    parent_tree = None
    if len(info.parents) > parent_index:
        parent = libgit.commit(state.git, info.parents[parent_index])
        parent_tree = parent.tree_id.raw if parent is not None else None
    files: list[FileDiff] = []
    changes = detect_renames(state.trees.changes(parent_tree, commit.tree_id.raw), state.blobs.get)
    for change in changes:
        old, new = change.old, change.new
        old_path = _decode_path(old.path if old else None)
        new_path = _decode_path(new.path if new else None)
        path = new_path or old_path
        if only_path is not None and only_path not in (new_path, old_path):
            continue
        if languages is not None and symbols.language_for_path(path) not in languages:
            continue
        if _is_gitlink(old.mode if old else None) or _is_gitlink(new.mode if new else None):
            skipped["submodule"] += 1
            continue
        reason = policy.path_skip_reason(path)
        if reason:
            skipped[reason] += 1
            continue
        old_blob = state.blobs.get(old.sha if old else None)
        new_blob = state.blobs.get(new.sha if new else None)
        if old_blob is None or new_blob is None:
            skipped["missing_object"] += 1
            continue
        old_data, new_data = old_blob, new_blob
        reason = policy.blob_skip_reason(old_data) or policy.blob_skip_reason(new_data)
        if reason:
            skipped[reason] += 1
            continue
        hunks = diff_hunks(old_data, new_data, full=full)
        if change.type == CHANGE_ADD:
            kind = "add"
        elif change.type == CHANGE_DELETE:
            kind = "delete"
        elif change.type == CHANGE_RENAME:
            kind = "rename"
        else:
            kind = "modify"
        if not hunks and kind != "rename":
            continue  # mode-only change
        fd = FileDiff(
            path=path,
            old_path=old_path or path,
            change=kind,
            language=symbols.language_for_path(path),
            hunks=hunks,
        )
        if with_symbols and fd.language in symbols.supported_languages():
            _attribute_symbols(fd, state, (old.sha if old else None, old_data), (new.sha if new else None, new_data))
        files.append(fd)
    return CommitDiff(commit=info, files=files, skipped=dict(skipped))


def _rows(store: Reading, key: tuple[bytes | None, str], data: bytes) -> list[Row] | None:
    """A version's definitions (parsed incrementally from a version read before, when one is kept)."""
    return store.versions.rows(key, data, key[1])


def _from_sibling(versions: VersionCache, path: str, key: tuple[bytes | None, str], source: bytes) -> None:
    """Derive a version no commit read before leads to (a topic branch's last version of a file, which the
    merge's version follows) from the path's version read last, diffed on the fly, rather than parse it from
    scratch (`VersionCache.sibling`); nothing when it is known, no other version is kept, or the two differ in
    more than half of its lines (a re-parse of most of the file costs what a fresh parse does)."""
    if versions.knows(key):
        return
    base = versions.sibling(path, key[1])
    if base is None:
        return
    base_key, base_source = base
    blocks = [(a, n, b, m) for a, n, b, m, _ops in diff_ops(source, base_source)]
    if 2 * sum(n for _a, n, _b, _m in blocks) > source.count(b"\n") + 1:
        versions.stats["sibling_too_far"] += 1
        return
    versions.derive(base_key, key, source, blocks)
    versions.stats["sibling" if versions.knows(key) else "sibling_failed"] += 1


def _touching(rows: list[Row], lines: list[int], seen: dict[tuple[str, str], SymbolRef]) -> None:
    """Add to ``seen`` every definition containing one of ``lines`` (ascending, as hunks list them), in
    canonical order: what `symbols.definitions_touching` gives, on rows, stopping at the last line."""
    if not lines:
        return
    last = lines[-1]
    n = len(lines)
    for start, neg_end, name, kind, _short, end, _sig in rows:
        if start > last:
            break  # rows are sorted by start line: no later one can contain a line
        if -neg_end < lines[0]:
            continue
        i = bisect_left(lines, start)
        if i < n and lines[i] <= end and (name, kind) not in seen:
            seen[(name, kind)] = SymbolRef(name, kind, start, end)


def _attribute_symbols(
    fd: FileDiff, store: Reading, old: tuple[bytes | None, bytes], new: tuple[bytes | None, bytes]
) -> None:
    """Attach to each hunk the definitions its changed lines fall in (post-image for +, pre-image for -)."""
    language = fd.language
    assert language is not None
    versions = store.versions
    new_key = (new[0], language)
    old_key = (old[0], language)
    if new[0] is not None and new[1]:
        _from_sibling(versions, fd.path, new_key, new[1])
    new_defs = _rows(store, new_key, new[1]) if new[0] is not None and new[1] else []
    versions.note(fd.path, new_key)
    if old[0] is not None and new[0] is not None and old[1]:
        # the old version is the new version of the next commit (in walk order) that changed this file
        versions.derive(
            new_key, old_key, old[1], [(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in fd.hunks]
        )
        versions.note(fd.old_path, old_key)
    # the pre-image only matters for removed lines: pure additions need no definitions of it
    needs_old = old[0] is not None and bool(old[1]) and any(h.removed_lines for h in fd.hunks)
    old_defs = _rows(store, old_key, old[1]) if needs_old else []
    if new_defs is None or old_defs is None:
        return  # too large / minified: recorded as not parsed
    fd.parsed = True
    for hunk in fd.hunks:
        seen: dict[tuple[str, str], SymbolRef] = {}
        _touching(new_defs, hunk.added_lines, seen)
        _touching(old_defs, hunk.removed_lines, seen)
        hunk.symbols = list(seen.values())
    names: dict[str, None] = {}
    for row in new_defs or old_defs:
        names.setdefault(row[2], None)
        if len(names) >= MAX_SIBLINGS:
            break
    fd.sibling_symbols = list(names)
