"""Turn one commit into file diffs and hunks (dulwich only, no git binary).

Non-merge commits are diffed against their parent (root commits against the empty tree) with rename detection;
merges are recorded by the caller but not diffed, so their changes are never indexed twice.
"""

from __future__ import annotations

import stat
from collections import Counter

from dulwich.diff_tree import CHANGE_ADD, CHANGE_DELETE, CHANGE_RENAME, RenameDetector, tree_changes
from dulwich.objects import Commit
from dulwich.repo import Repo

from .. import symbols
from .diff import diff_hunks
from .model import CommitDiff, CommitInfo, FileDiff, SymbolRef
from .policy import PathPolicy

MAX_SIBLINGS = 60


def _is_gitlink(mode: int | None) -> bool:
    return mode is not None and stat.S_ISDIR(mode) is False and (mode & 0o170000) == 0o160000


def _blob(repo: Repo, sha: bytes | None) -> bytes:
    if sha is None:
        return b""
    return repo.object_store[sha].as_raw_string()  # type: ignore[index]


def _decode_path(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def read_commit(
    repo: Repo, info: CommitInfo, policy: PathPolicy, *, with_symbols: bool = True, full: bool = False
) -> CommitDiff:
    """Diff ``info`` against its first parent; skipped files are counted by reason, never raised."""
    skipped: Counter[str] = Counter()
    commit = repo[info.sha.encode("ascii")]
    assert isinstance(commit, Commit)
    parent_tree = None
    if info.parents:
        try:
            parent = repo[info.parents[0].encode("ascii")]
            assert isinstance(parent, Commit)
            parent_tree = parent.tree
        except KeyError:
            parent_tree = None
    detector = RenameDetector(repo.object_store, max_files=200)
    files: list[FileDiff] = []
    changes = tree_changes(repo.object_store, parent_tree, commit.tree, rename_detector=detector)
    for change in changes:
        old, new = change.old, change.new
        old_path = _decode_path(old.path if old else None)
        new_path = _decode_path(new.path if new else None)
        path = new_path or old_path
        if _is_gitlink(old.mode if old else None) or _is_gitlink(new.mode if new else None):
            skipped["submodule"] += 1
            continue
        reason = policy.path_skip_reason(path)
        if reason:
            skipped[reason] += 1
            continue
        old_data = _blob(repo, old.sha if old else None)
        new_data = _blob(repo, new.sha if new else None)
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
            _attribute_symbols(fd, old_data, new_data)
        files.append(fd)
    return CommitDiff(commit=info, files=files, skipped=dict(skipped))


def _attribute_symbols(fd: FileDiff, old_data: bytes, new_data: bytes) -> None:
    """Attach to each hunk the definitions its changed lines fall in (post-image for +, pre-image for -)."""
    assert fd.language is not None
    new_defs = symbols.extract_definitions(new_data, fd.language) if new_data else []
    old_defs = symbols.extract_definitions(old_data, fd.language) if old_data else []
    if new_defs is None or old_defs is None:
        return  # too large / minified: recorded as not parsed
    fd.parsed = True
    for hunk in fd.hunks:
        seen: dict[tuple[str, str], SymbolRef] = {}
        for d in symbols.definitions_touching(new_defs, hunk.added_lines):
            seen.setdefault((d.name, d.kind), SymbolRef(d.name, d.kind, d.start_line, d.end_line))
        for d in symbols.definitions_touching(old_defs, hunk.removed_lines):
            seen.setdefault((d.name, d.kind), SymbolRef(d.name, d.kind, d.start_line, d.end_line))
        hunk.symbols = list(seen.values())
    names: dict[str, None] = {}
    for d in new_defs or old_defs:
        names.setdefault(d.name, None)
        if len(names) >= MAX_SIBLINGS:
            break
    fd.sibling_symbols = list(names)
