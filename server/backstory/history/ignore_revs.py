"""Revisions exact history leaves out, like ``git blame --ignore-revs-file``: formatting-only commits a project lists.

Read as data, never run: the conventional ``.git-blame-ignore-revs`` at the worktree root (the file GitHub's blame
honours) and the file ``blame.ignoreRevsFile`` names in the repository's config, if any. Lines are full shas or
abbreviations (resolved by the caller); ``#`` starts a comment.
"""

from __future__ import annotations

import re
from pathlib import Path

from dulwich.repo import Repo

CONVENTIONAL = ".git-blame-ignore-revs"
_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


def ignore_files(repo: Repo, root: Path) -> list[Path]:
    """The ignore-revs files that exist: the conventional one, then the configured one (relative to the root)."""
    found: list[Path] = []
    conventional = root / CONVENTIONAL
    if conventional.is_file():
        found.append(conventional)
    try:
        configured = repo.get_config().get((b"blame",), b"ignoreRevsFile")
    except KeyError:
        configured = None
    if configured:
        path = Path(configured.decode("utf-8", "surrogateescape")).expanduser()
        path = path if path.is_absolute() else root / path
        if path.is_file() and path not in found:
            found.append(path)
    return found


def read_ignore_revs(files: list[Path]) -> list[str]:
    """The revisions listed in ``files``, lower-cased, in order, without duplicates (unreadable files skipped)."""
    out: dict[str, None] = {}
    for path in files:
        try:
            text = path.read_text("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            word = line.split("#", 1)[0].strip()
            if _HEX.match(word):
                out.setdefault(word.lower(), None)
    return list(out)
