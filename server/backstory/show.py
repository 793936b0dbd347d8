"""``backstory show``: a commit's header, message and full unified diff, as text for a terminal or editor.

Also returns where each hunk header sits in that text, so editors can scroll straight to the matching hunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dulwich.objects import Commit
from dulwich.repo import Repo

from .history.policy import PathPolicy
from .history.reader import read_commit
from .history.repo import HistoryError, commit_info, shallow_roots
from .search.render import iso


@dataclass
class ShownCommit:
    sha: str
    title: str
    text: str
    hunks: list[dict[str, object]] = field(default_factory=list)


def resolve_sha(repo: Repo, ref: str) -> str:
    """A full sha from a full or abbreviated sha (unique prefix of at least 4 hex digits)."""
    ref = ref.strip().lower()
    if len(ref) == 40:
        if ref.encode() in repo.object_store:  # type: ignore[operator]
            return ref
        raise HistoryError(f"no commit {ref} in this repository")
    if len(ref) < 4 or any(c not in "0123456789abcdef" for c in ref):
        raise HistoryError(f"not a commit id: {ref!r} (give at least 4 hex digits)")
    matches = {s.decode() for s in repo.object_store if s.decode().startswith(ref)}
    commits = [m for m in matches if isinstance(repo[m.encode()], Commit)]
    if not commits:
        raise HistoryError(f"no commit starting with {ref} in this repository")
    if len(commits) > 1:
        raise HistoryError(f"ambiguous commit id {ref}: matches {', '.join(sorted(commits)[:5])}")
    return commits[0]


def show_commit(repo: Repo, ref: str, path: str | None = None) -> ShownCommit:
    sha = resolve_sha(repo, ref)
    obj = repo[sha.encode()]
    if not isinstance(obj, Commit):
        raise HistoryError(f"{ref} is not a commit")
    info = commit_info(obj, shallow_roots(repo))
    lines = [
        f"commit {info.sha}",
        *([f"Merge: {' '.join(p[:7] for p in info.parents)}"] if info.is_merge else []),
        f"Author: {info.author_name} <{info.author_email}>",
        f"Date:   {iso(info.author_time, info.author_tz)}",
        "",
        *("    " + m for m in (info.subject + ("\n\n" + info.body if info.body else "")).split("\n")),
        "",
    ]
    hunks: list[dict[str, object]] = []
    if not info.is_merge:
        cd = read_commit(repo, info, PathPolicy(max_file_bytes=10_000_000), with_symbols=False, full=True)
        files = [f for f in cd.files if path is None or path in (f.path, f.old_path)]
        if path is not None and not files:
            raise HistoryError(f"commit {info.sha[:7]} does not change {path}")
        for f in files:
            a = "/dev/null" if f.change == "add" else f"a/{f.old_path}"
            b = "/dev/null" if f.change == "delete" else f"b/{f.path}"
            lines.append(f"diff --git a/{f.old_path} b/{f.path}")
            if f.change == "rename":
                lines += [f"rename from {f.old_path}", f"rename to {f.path}"]
            lines += [f"--- {a}", f"+++ {b}"]
            for h in f.hunks:
                hunks.append({"path": f.path, "new_start": h.new_start, "old_start": h.old_start, "line": len(lines)})
                lines.extend(h.excerpt.split("\n"))
        if cd.skipped:
            lines.append("")
            lines.append("(not shown: " + ", ".join(f"{v} {k}" for k, v in sorted(cd.skipped.items())) + ")")
    return ShownCommit(sha=info.sha, title=f"{info.sha[:7]} {info.subject}", text="\n".join(lines) + "\n", hunks=hunks)
