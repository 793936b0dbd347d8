"""Opening a repository with dulwich and walking what is reachable from HEAD.

Works from a subdirectory or a linked worktree; every failure mode a user can hit (not a repository, no commits
yet, shallow clone) becomes a ``HistoryError`` with a sentence that says what to do.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
from pathlib import Path

from dulwich.config import ConfigFile
from dulwich.errors import NotGitRepository
from dulwich.objects import Commit
from dulwich.repo import Repo

from .model import CommitInfo


class HistoryError(Exception):
    """A repository problem the user can act on."""


class EmptyRepository(HistoryError):
    """The repository has no commits yet (HEAD is unborn)."""


def open_repo(path: str | os.PathLike[str]) -> Repo:
    """Open the repository containing ``path`` (the path itself or any parent)."""
    p = Path(path)
    if not p.exists():
        raise HistoryError(f"path does not exist: {p}")
    try:
        return _Repo.discover(str(p if p.is_dir() else p.parent))
    except NotGitRepository:
        raise HistoryError(f"not a git repository (or any parent up to /): {p.resolve()}") from None


#: Settings git reads as sizes, where ``512m`` means 512 MiB (``git config --type=int``), and dulwich reads them
#: with ``int()`` when it opens a repository: a ``core.bigFileThreshold = 512m`` in ``.git/config`` made opening
#: fail with "invalid literal for int()". git refuses a bad ``core`` one in every command; the ``pack`` ones only
#: matter to commands that write packs, so a bad one is left out here, as ``git log`` leaves it.
GIT_SIZES = (
    (b"core", b"bigFileThreshold"),
    (b"core", b"deltaBaseCacheLimit"),
    (b"core", b"packedGitLimit"),
    (b"core", b"packedGitWindowSize"),
    (b"pack", b"bigFileThreshold"),
    (b"pack", b"deltaCacheSize"),
    (b"pack", b"windowMemory"),
)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"\s*\+?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([kKmMgG]?)", re.ASCII)


def git_size(value: bytes) -> int | None:
    """An unsigned size as git reads it (``10``, ``64k``, ``512m``, ``1g``, ``0x10``, ``010``: C's base rules),
    or None where git would refuse the value (``-1``, ``12x``, ``1.5g``, ``512 m``)."""
    match = _SIZE.fullmatch(value.decode("utf-8", "replace"))
    if match is None:
        return None
    digits = match[1]
    base = 16 if digits[:2].lower() == "0x" else 8 if len(digits) > 1 and digits[0] == "0" else 10
    return int(digits, base) * _UNITS[match[2].lower()]


class _Repo(Repo):
    """dulwich's repository, with the repository's sizes read as git reads them (:data:`GIT_SIZES`)."""

    def get_config(self) -> ConfigFile:
        config = super().get_config()
        for section, name in GIT_SIZES:
            try:
                value = config.get((section,), name)
            except KeyError:
                continue
            size = git_size(value)
            if size is not None:
                config.set((section,), name, str(size).encode())
            elif section == b"pack":
                del config[(section,)][name]  # dulwich then uses its default, as git log does
            else:  # as git: "fatal: bad numeric config value"
                raise HistoryError(
                    f"bad numeric config value {value.decode('utf-8', 'replace')!r} for "
                    f"'{section.decode()}.{name.decode()}' in {config.path or 'the repository config'} (or a file it "
                    "includes): git reads a whole number with an optional k, m or g"
                )
        return config


#: What a long-lived reader lets dulwich keep of each pack's resolved delta bases. dulwich's default is git's
#: ``core.deltaBaseCacheLimit``, 96 MiB a pack, sized for one command's run; the language server reads blobs
#: for hours. On git/git, building HEAD's definitions (1,006 files) left the server's heap 29.4 MB larger with
#: the default, 23.4 MB with 8 MiB, in the same 1.6 s; 16.6 / 10.9 MB traced with 8 / 2 MiB, in the same 4.1-4.2 s
#: on a slower day (HEAD's blobs are the packs' bases: their chains are short).
SERVING_DELTA_CACHE = 2 << 20


def bound_delta_cache(repo: Repo, limit: int = SERVING_DELTA_CACHE) -> None:
    """Cap dulwich's delta-base cache for packs opened from now on at ``limit`` bytes, unless the repository's
    own ``core.deltaBaseCacheLimit`` set one (then it is the user's choice; 0, which dulwich reads as unset, is
    capped too)."""
    store = repo.object_store
    if hasattr(store, "delta_base_cache_limit") and not store.delta_base_cache_limit:
        store.delta_base_cache_limit = limit


def common_dir(repo: Repo) -> Path:
    """The git directory shared by all worktrees (``.git`` of the main checkout)."""
    return Path(repo.commondir())


def worktree_root(repo: Repo) -> Path:
    return Path(repo.path)


def repo_relative(root: Path, path: str | os.PathLike[str], bases: tuple[Path, ...] = ()) -> str:
    """``path`` as a slash-separated path relative to the worktree ``root`` (the one helper every view uses).

    An absolute path (an editor's document) is taken as is. A relative one is tried against each of ``bases``
    in order (the CLI passes its working directory, then the root, so a path typed in a subdirectory works);
    with no bases it is already repository-relative. Raises :class:`HistoryError` when it lies outside.
    """
    p = Path(path)
    candidates = [p] if p.is_absolute() else [b / p for b in bases] or [root / p]
    resolved_root = resolve(root)
    for c in candidates:
        try:
            return resolve(c).relative_to(resolved_root).as_posix()
        except ValueError:
            continue
    raise HistoryError(f"{path} is outside the repository {root}")


def resolve(path: Path) -> Path:
    """``path.resolve()``, with a symbolic link that loops (or cannot be followed) as a :class:`HistoryError`."""
    try:
        return path.resolve()
    except RuntimeError:  # Python < 3.13 reports a loop this way
        raise HistoryError(f"{path} is a symbolic link that loops (it never reaches a file)") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise HistoryError(f"{path} is a symbolic link that loops (it never reaches a file)") from None
        raise HistoryError(f"cannot follow {path}: {e.strerror or e}") from None


def head_sha(repo: Repo) -> str:
    """HEAD's commit id; works for branches and detached HEAD."""
    try:
        sha = repo.head()
    except KeyError:
        raise EmptyRepository("the repository has no commits yet; commit something, then index") from None
    return sha.decode("ascii")


def shallow_roots(repo: Repo) -> set[str]:
    """Commits whose parents are missing because the clone is shallow."""
    try:
        return {s.decode("ascii") for s in repo.get_shallow()}
    except Exception:
        return set()


def _codec(encoding: bytes | None) -> str:
    """The Python codec for a commit's ``encoding`` header (git writes one when ``i18n.commitEncoding`` is not
    UTF-8, e.g. ``ISO-8859-1``); UTF-8 when absent or unknown, as git assumes."""
    if encoding:
        try:
            return codecs.lookup(encoding.decode("ascii", "replace").strip()).name
        except LookupError:
            pass
    return "utf-8"


def _split_message(message: bytes, codec: str = "utf-8") -> tuple[str, str]:
    text = message.decode(codec, "replace")
    subject, _, body = text.partition("\n")
    return subject.strip(), body.strip()


def _split_identity(raw: bytes, codec: str = "utf-8") -> tuple[str, str]:
    text = raw.decode(codec, "replace")
    name, _, rest = text.partition("<")
    return name.strip(), rest.rstrip(">").strip()


def commit_info(commit: Commit, shallow: set[str] | None = None) -> CommitInfo:
    """Metadata of a dulwich commit; a shallow root is treated as a root commit."""
    sha = commit.id.decode("ascii")
    parents = () if shallow and sha in shallow else tuple(p.decode("ascii") for p in commit.parents)
    codec = _codec(commit.encoding)
    subject, body = _split_message(commit.message, codec)
    name, email = _split_identity(commit.author, codec)
    return CommitInfo(
        sha=sha,
        parents=parents,
        subject=subject,
        body=body,
        author_name=name,
        author_email=email,
        author_time=int(commit.author_time),
        author_tz=int(commit.author_timezone),
        commit_time=int(commit.commit_time),
        commit_tz=int(commit.commit_timezone),
    )


def read_head_file(repo: Repo, head: str, name: str) -> str:
    """A small text file from HEAD's tree (``.gitattributes``), or "" when absent."""
    try:
        tree = repo[repo[head.encode("ascii")].tree]  # type: ignore[attr-defined]
        _mode, sha = tree[name.encode()]  # type: ignore[index]
        data: bytes = repo[sha].data  # type: ignore[attr-defined]
        return data.decode("utf-8", "replace")
    except KeyError:
        return ""
