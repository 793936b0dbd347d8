"""``backstory show``: a commit's header, message and full unified diff, as text for a terminal or editor.

Also returns where each hunk header sits in that text, so editors can scroll straight to the matching hunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dulwich.errors import NotCommitError
from dulwich.objects import Commit, ObjectID, Tag
from dulwich.objectspec import parse_commit
from dulwich.repo import Repo

from .. import symbols
from ..history.model import CommitDiff, CommitInfo, FileDiff, Hunk
from ..history.policy import PathPolicy
from ..history.reader import read_commit
from ..history.repo import HistoryError, commit_info, head_sha, shallow_roots
from ..index.catalog import Catalog
from ..search.results import consequences_json, iso

if TYPE_CHECKING:
    from ..search.engine import Engine


@dataclass
class ShownCommit:
    sha: str
    title: str
    text: str
    hunks: list[dict[str, object]] = field(default_factory=list)
    # every file the diff shows: {"path", "old_path", "change"} (a merge: each file once)
    files: list[dict[str, object]] = field(default_factory=list)


_REV = re.compile(r"^(?P<base>.*?)(?P<steps>(?:[~^]\d*)*)$")


def resolve_sha(repo: Repo, ref: str, catalogue: Catalog | None = None) -> str:
    """A full commit sha from what a user would type to git: a full or abbreviated sha (at least 4 hex digits),
    a branch, tag or ``HEAD``, each optionally followed by ``~N`` / ``^N`` steps (``HEAD~2``, ``v1.0^2``).
    ``catalogue``: the index's, if there is one (abbreviated shas are looked up there first)."""
    m = _REV.match(ref.strip())
    base, steps = (m.group("base"), m.group("steps")) if m else (ref.strip(), "")
    if not base:
        raise HistoryError(f"not a commit id: {ref!r}")
    sha = _resolve_base(repo, base, catalogue)
    for step in re.findall(r"[~^]\d*", steps):
        n = int(step[1:]) if len(step) > 1 else 1
        for _ in range(n if step[0] == "~" else 1):
            parents = _commit(repo, sha).parents
            index = 0 if step[0] == "~" else n - 1
            if step[0] == "^" and n == 0:
                break
            if index >= len(parents):
                raise HistoryError(f"{ref}: commit {sha[:7]} has no parent number {index + 1}")
            sha = parents[index].decode("ascii")
    return sha


def _commit(repo: Repo, sha: str) -> Commit:
    obj = repo[sha.encode()]
    if not isinstance(obj, Commit):
        raise HistoryError(f"{sha} is not a commit")
    return obj


def _changes_path(repo: Repo, commit: Commit, path: str, parent: str | None) -> bool:
    """Whether ``path`` differs between ``commit`` and ``parent`` (None: a root or a shallow clone's boundary,
    diffed against nothing), for files the diff reader skips."""
    from dulwich.object_store import tree_lookup_path

    raw = path.encode("utf-8", "surrogateescape")  # a file name that is not UTF-8 arrives surrogate-escaped

    def entry(tree: ObjectID) -> tuple[int, bytes] | None:
        try:
            return tree_lookup_path(repo.object_store.__getitem__, tree, raw)
        except KeyError:
            return None

    before = entry(_commit(repo, parent).tree) if parent is not None else None
    return entry(commit.tree) != before


def _resolve_base(repo: Repo, base: str, catalogue: Catalog | None) -> str:
    """A name (HEAD, branch, tag) or a hex sha prefix; a ref wins over a sha prefix that looks the same, as in
    git, and tag objects are peeled to their commit. A prefix is looked up in the index's ``catalogue`` first
    (:func:`_catalogued`), then in the object store (:func:`_stored`)."""
    hexlike = len(base) >= 4 and all(c in "0123456789abcdef" for c in base.lower())
    if not hexlike or _is_ref(repo, base):
        try:
            return parse_commit(repo, base.encode()).id.decode("ascii")  # branches, tags (peeled), HEAD
        except (KeyError, ValueError, NotCommitError):
            if not hexlike:
                head_sha(repo)  # an unborn HEAD says the repository has no commits yet
                raise HistoryError(f"not a commit id, branch or tag: {base!r}") from None
    ref = base.lower()
    if len(ref) == 40 and ref.encode() in repo.object_store:  # type: ignore[operator]
        return _peel(repo, ref)
    commits = _catalogued(repo, catalogue, ref) or _stored(repo, ref)
    if len(commits) > 1:
        more = f" and {len(commits) - 5} more" if len(commits) > 5 else ""
        raise HistoryError(f"ambiguous commit id {ref}: matches {', '.join(commits[:5])}{more}")
    if commits:
        return commits[0]
    raise HistoryError(f"no commit starting with {ref} in this repository")


def _catalogued(repo: Repo, catalogue: Catalog | None, prefix: str) -> list[str]:
    """Indexed commits whose sha starts with ``prefix`` (a range scan of the catalogue's primary key: no object
    is read), kept only if the repository still has them (a commit pruned since the last index run is not).

    Asked first because a sha a user types mostly comes from backstory's own output. A prefix that matches one
    indexed commit resolves to it even if an object the index has not seen (a newer or unreachable commit)
    shares the prefix, where git would call it ambiguous; a longer prefix picks the other one."""
    if catalogue is None:
        return []
    shas = catalogue.shas_with_prefix(prefix)  # [] from a damaged or foreign catalogue: the object store answers
    return [sha for sha in shas if sha.encode() in repo.object_store]  # type: ignore[operator]


def _stored(repo: Repo, prefix: str) -> list[str]:
    """Commits (annotated tags peeled) among the objects whose id starts with ``prefix``, from dulwich's prefix
    lookup: the loose objects' fan-out directory and each pack index's fan-out bucket, never a scan of every
    object (which took seconds on a large repository)."""
    commits: set[str] = set()
    for raw in repo.object_store.iter_prefix(prefix.encode("ascii")):
        try:
            commit = _peel(repo, raw.decode("ascii"), strict=False)
        except KeyError:  # listed but unreadable (a damaged pack): not a candidate
            continue
        if commit:
            commits.add(commit)
    return sorted(commits)


def _is_ref(repo: Repo, name: str) -> bool:
    refs = repo.refs.as_dict()
    return any(f"{prefix}{name}".encode() in refs for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/"))


def _peel(repo: Repo, sha: str, strict: bool = True) -> str:
    """The commit an object id names: itself, or what a (chain of) annotated tag(s) points to. ``strict``:
    anything else (a tree, a blob) is an error; otherwise it gives ``""``."""
    obj = repo[sha.encode()]
    while isinstance(obj, Tag):
        obj = repo[obj.object[1]]
    if isinstance(obj, Commit):
        return obj.id.decode("ascii")
    if strict:
        raise HistoryError(f"{sha} is not a commit")
    return ""


def show_commit(
    repo: Repo,
    ref: str,
    path: str | None = None,
    catalogue: Catalog | None = None,
    later: Callable[[str], list[str]] | None = None,
) -> ShownCommit:
    """``ref``'s header, message and diff (``path``: only that file); ``catalogue`` as in :func:`resolve_sha`;
    ``later`` gives extra header lines for the resolved sha (what became of the commit)."""
    sha = resolve_sha(repo, ref, catalogue)
    commit = _commit(repo, sha)
    info = commit_info(commit, shallow_roots(repo))
    lines = [
        f"commit {info.sha}",
        *([f"Merge: {' '.join(p[:7] for p in info.parents)}"] if info.is_merge else []),
        f"Author: {info.author_name} <{info.author_email}>",
        f"Date:   {iso(info.author_time, info.author_tz)}",
        *(later(info.sha) if later is not None else []),
        "",
        *("    " + m for m in (info.subject + ("\n\n" + info.body if info.body else "")).split("\n")),
        "",
    ]
    hunks: list[dict[str, object]] = []
    files: list[dict[str, object]] = []
    # a file name that is not UTF-8 arrives surrogate-escaped: diffs name it as the reader decodes it (with
    # replacement characters), trees are looked up by its bytes
    shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if path is not None else None
    if not info.is_merge:
        cd = _read(repo, info, shown, 0)
        if path is not None and not cd.files:
            if not _changes_path(repo, commit, path, info.parents[0] if info.parents else None):
                raise HistoryError(f"commit {info.sha[:7]} does not change {shown}")
            lines.append(f"{shown}: changed, not shown (binary, ignored, a submodule or too large)")
        _render(cd, lines, hunks, files, repo, info.parents[0] if info.parents else None)
    elif path is None:
        lines.append("(a merge: `--path FILE` shows that file's diff against each parent)")
    else:  # like `git show -m MERGE -- FILE`: the file against each parent in turn
        changed = [i for i, parent in enumerate(info.parents) if _changes_path(repo, commit, path, parent)]
        if not changed:
            raise HistoryError(f"merge {info.sha[:7]} does not change {shown}: it is the same in every parent")
        for i, parent in enumerate(info.parents):
            lines.append(f"against parent {i + 1} ({parent[:7]}):")
            if i not in changed:
                lines += [f"{shown}: same as in parent {i + 1}", ""]
                continue
            cd = _read(repo, info, shown, i)
            if not cd.files:
                lines.append(f"{shown}: changed, not shown (binary, ignored, a submodule or too large)")
            _render(cd, lines, hunks, files, repo, parent, parent if len(info.parents) > 1 else None)
            lines.append("")
    title = f"{info.sha[:7]} {info.subject}"
    return ShownCommit(sha=info.sha, title=title, text="\n".join(lines) + "\n", hunks=hunks, files=files)


def _read(repo: Repo, info: CommitInfo, path: str | None, parent_index: int) -> CommitDiff:
    """The commit's diff against one parent, all of it or only ``path`` (and what it was renamed from)."""
    policy = PathPolicy(max_file_bytes=10_000_000)
    return read_commit(repo, info, policy, with_symbols=False, full=True, parent_index=parent_index, only_path=path)


def _render(
    cd: CommitDiff,
    lines: list[str],
    hunks: list[dict[str, object]],
    files: list[dict[str, object]],
    repo: Repo,
    parent_sha: str | None,
    parent: str | None = None,
) -> None:
    """Append ``cd``'s file diffs (git's unified format, each hunk header with the definition it changed, like
    git's function context) and skip counts to ``lines``; each hunk header's position to ``hunks`` (with the
    parent it is against, for a merge) and each file to ``files``."""
    for f in cd.files:
        a = "/dev/null" if f.change == "add" else f"a/{f.old_path}"
        b = "/dev/null" if f.change == "delete" else f"b/{f.path}"
        lines.append(f"diff --git a/{f.old_path} b/{f.path}")
        if not any(x["path"] == f.path for x in files):
            files.append({"path": f.path, "old_path": f.old_path, "change": f.change})
        if f.change == "rename":
            lines += [f"rename from {f.old_path}", f"rename to {f.path}"]
        lines += [f"--- {a}", f"+++ {b}"]
        context = _FunctionContext(repo, cd.commit.sha, parent_sha, f)
        for h in f.hunks:
            pos: dict[str, object] = {"path": f.path, "new_start": h.new_start, "old_start": h.old_start}
            hunks.append({**pos, **({"parent": parent} if parent else {}), "line": len(lines)})
            excerpt = h.excerpt.split("\n")
            where = context.of(h)
            if where and excerpt and excerpt[0].startswith("@@"):
                excerpt[0] = f"{excerpt[0]} {where}"
            lines.extend(excerpt)
    if cd.skipped:
        lines.append("")
        lines.append("(not shown: " + ", ".join(f"{v} {k}" for k, v in sorted(cd.skipped.items())) + ")")


class _FunctionContext:
    """The definition a hunk's first change sits in, as its signature line (tree-sitter, both sides parsed on
    first use): what git shows after a hunk header, but the enclosing definition rather than the nearest line
    that looks like one."""

    def __init__(self, repo: Repo, sha: str, parent: str | None, f: FileDiff) -> None:
        self.repo, self.sha, self.parent, self.f = repo, sha, parent, f
        self.sides: dict[str, list[symbols.Definition]] = {}

    def _defs(self, side: str) -> list[symbols.Definition]:
        if side not in self.sides:
            from dulwich.object_store import tree_lookup_path

            rev = self.sha if side == "new" else self.parent
            path = self.f.path if side == "new" else self.f.old_path
            defs: list[symbols.Definition] = []
            language = symbols.language_for_path(path)
            if rev is not None and language in symbols.supported_languages():
                try:
                    tree = _commit(self.repo, rev).tree
                    _mode, blob = tree_lookup_path(self.repo.object_store.__getitem__, tree, path.encode("utf-8"))
                    data = self.repo[blob].data  # type: ignore[attr-defined]
                    defs = symbols.definitions(data, language or "") or []
                except (KeyError, AttributeError, HistoryError):
                    defs = []
            self.sides[side] = defs
        return self.sides[side]

    def of(self, h: Hunk) -> str:
        """The signature of the definition the hunk's first changed line that is not blank sits in (the new side
        for an addition, the old side for a removal), else of the last definition that starts before it."""
        if self.f.language not in symbols.supported_languages():
            return ""
        excerpt = h.excerpt.split("\n")[1:]
        added = [t[1:] for t in excerpt if t.startswith("+")]
        removed = [t[1:] for t in excerpt if t.startswith("-")]
        side, numbers, texts = ("new", h.added_lines, added) if h.added_lines else ("old", h.removed_lines, removed)
        if not numbers:
            return ""
        line = next((n for n, t in zip(numbers, texts, strict=False) if t.strip()), numbers[0])
        defs = self._defs(side)
        d = symbols.innermost_definition(defs, line)
        if d is None:
            before = [x for x in defs if x.start_line < line]
            d = max(before, key=lambda x: (x.start_line, -x.end_line)) if before else None
        return d.signature if d is not None else ""


def show(
    engine: Engine,
    ref: str,
    path: str | None = None,
    describe: Callable[[list[dict[str, Any]]], str] | None = None,
) -> ShownCommit:
    """:func:`show_commit` in ``engine``'s repository, resolving abbreviated shas through its catalogue first
    when there is an index (``show`` works without one). With ``describe`` (a view's wording of
    :func:`~backstory.search.results.consequences_json` items), a ``Later:`` header line says what became of
    the commit."""
    catalog = engine.catalog if engine.has_index() else None

    def later(sha: str) -> list[str]:
        if describe is None or catalog is None:
            return []
        items = consequences_json(catalog, [sha]).get(sha, [])
        return [f"Later:  {describe(items)}"] if items else []

    return show_commit(engine.repo, ref, path, catalog, later)
