"""Prior art for a change: the uncommitted change of the worktree, a commit, or a range of commits.

The query is the change itself, written like a stored unit of the dense lane (``models/passages.py``: paths,
the definitions it touches, its changed lines), so the dense lane embeds it as it embedded history, and the
keyword lanes read its identifiers. Large changes are condensed: every file contributes in turn, blank and
repeated lines are dropped, and the text stops at :data:`QUERY_CHARS` (the dense lane reads only its first
window of tokens anyway; the keyword lanes' term list stays bounded). The change's own commits are left out of
the results.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..history.libgit import walk
from ..history.model import CommitDiff, FileDiff
from ..history.reader import read_commit
from ..history.repo import HistoryError, commit_info, head_sha
from ..history.worktree import worktree_changes
from ..models.passages import changed_lines
from .show_commit import resolve_sha

if TYPE_CHECKING:
    from ..search.engine import Engine
    from ..search.options import SearchOptions

QUERY_CHARS = 4000
MAX_RANGE_COMMITS = 200
# lanes a change is searched in unless the caller chose some: the message lane only matched the change's
# identifiers against commit messages, and the learned ordering (fitted on questions) then gives way to the
# rerank blend; MRR@10 on related-commit pairs, default pipeline -> these lanes: rust-lang/log 0.424 -> 0.514,
# tqdm 0.375 -> 0.491 (BM25 on the changed lines: 0.489, 0.483; docs/changes.md)
CHANGE_LANES = ("diff", "dense")
HEAD_PART_CHARS = 600  # paths, and touched definitions: each at most this much of the query


@dataclass
class Change:
    """What the query is made from: file diffs, and the commits they come from (none for the worktree)."""

    source: str  # "worktree" | "commit" | "range"
    spec: str | None
    files: list[FileDiff]
    commits: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "spec": self.spec,
            "commits": list(self.commits),
            "files": [
                {
                    "path": f.path,
                    "old_path": f.old_path,
                    "change": f.change,
                    "added": sum(len(h.added_lines) for h in f.hunks),
                    "removed": sum(len(h.removed_lines) for h in f.hunks),
                    "symbols": list(dict.fromkeys(s.name for h in f.hunks for s in h.symbols)),
                }
                for f in self.files
            ],
        }


def _policy(engine: Engine) -> Any:
    from ..index.build import BuildOptions

    return BuildOptions().policy(engine.repo, head_sha(engine.repo))


def commit_change(engine: Engine, spec: str) -> Change:
    """The change of one commit (``REV``) or of the commits in ``A..B`` (reachable from B, not from A)."""
    repo = engine.repo
    policy = _policy(engine)
    if ".." in spec:
        base, _, tip = spec.partition("..")
        tip_sha = resolve_sha(repo, tip or "HEAD", engine.catalog)
        base_sha = resolve_sha(repo, base or "HEAD", engine.catalog)
        excluded = {c.sha for c in walk(repo, base_sha)}
        infos = [c for c in walk(repo, tip_sha, stop=excluded)][:MAX_RANGE_COMMITS]
        source = "range"
    else:
        sha = resolve_sha(repo, spec, engine.catalog)
        infos = [commit_info(repo[sha.encode("ascii")])]  # type: ignore[arg-type]
        source = "commit"
    diffs: list[CommitDiff] = [read_commit(repo, c, policy) for c in infos if not c.is_merge]
    return Change(source, spec, [f for cd in diffs for f in cd.files], [c.sha for c in infos])


def worktree_change(engine: Engine, paths: list[str] | None = None) -> Change:
    return Change("worktree", None, worktree_changes(engine.root, paths, _policy(engine)))


def _capped(words: list[str]) -> str:
    out: list[str] = []
    size = 0
    for w in words:
        if size + len(w) > HEAD_PART_CHARS and out:
            break
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def change_query(files: list[FileDiff], limit: int = QUERY_CHARS) -> str:
    """The change as one query: paths, touched definitions (innermost first), then changed lines taken from
    each file in turn, without blanks or repeats, up to ``limit`` characters."""
    paths = [f.path if f.old_path == f.path else f"{f.old_path} -> {f.path}" for f in files]
    names: dict[str, None] = {}
    for f in files:
        for h in f.hunks:
            for s in sorted(h.symbols, key=lambda s: s.end - s.start):
                names.setdefault(s.name, None)
    head = [_capped(paths)]
    if names:
        head.append(_capped(list(names)))
    size = sum(len(h) + 1 for h in head)
    queues = [[line.strip() for h in f.hunks for line in changed_lines(h.excerpt)] for f in files]
    seen: set[str] = set()
    body: list[str] = []
    i = 0
    while size < limit and any(i < len(q) for q in queues):
        for q in queues:
            if i < len(q) and q[i] and q[i] not in seen:
                seen.add(q[i])
                body.append(q[i])
                size += len(q[i]) + 1
        i += 1
    return "\n".join(head + body)[:limit]


def prior_art_for_change(engine: Engine, change: Change, opts: SearchOptions) -> dict[str, Any]:
    """Search results for ``change`` (its own commits left out), with ``change`` described under ``changes``."""
    query = change_query(change.files)
    own = set(change.commits)
    if opts.lanes is None:
        opts = dataclasses.replace(opts, lanes=CHANGE_LANES)
    if not query.strip():
        info, _allowed, _hint = engine.freshness()  # the answer still says how fresh the index is
        meta: dict[str, Any] = {"repo": str(engine.root), "index": info, "hint": None, "warnings": []}
        result: dict[str, Any] = {"query": "", "results": [], "_meta": meta}
        result["_meta"]["hint"] = (
            "no changes to search for: the worktree has no uncommitted changes to indexed kinds of files"
            if change.source == "worktree"
            else f"{change.spec} changes no indexed kind of file"
        )
    else:
        result = engine.search(query, dataclasses.replace(opts, k=opts.k + len(own)))
        result["results"] = [r for r in result["results"] if r["commit"]["sha"] not in own][: opts.k]
    result["changes"] = change.json()
    return result


def prior_art_for_changes(
    engine: Engine, opts: SearchOptions, spec: str | None = None, paths: list[str] | None = None
) -> dict[str, Any]:
    """``backstory query --changes [SPEC]``: the worktree's uncommitted change (optionally only ``paths``), or
    the change of a commit or range."""
    if spec:
        change = commit_change(engine, spec)
        if paths:
            change.files = [f for f in change.files if f.path in paths or f.old_path in paths]
    else:
        if engine.head() is None:
            raise HistoryError("the repository has no commits yet")
        change = worktree_change(engine, paths)
    return prior_art_for_change(engine, change, opts)
