"""Which files the history reader skips, and why.

Generated and vendored files (``.gitattributes`` ``linguist-generated`` / ``linguist-vendored``), paths listed in
``.backstoryignore`` (gitignore syntax), lockfiles and minified bundles drown real prior art in noise; binary
files, Git LFS pointers, submodules and huge blobs carry no searchable text. Every skip is counted by reason.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pathspec

DEFAULT_IGNORES = (
    "*.min.js",
    "*.min.css",
    "*.map",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "Cargo.lock",
    "poetry.lock",
    "uv.lock",
    "go.sum",
    "Gemfile.lock",
    "composer.lock",
)
LFS_PREFIX = b"version https://git-lfs.github.com/spec/v1"
BINARY_SNIFF = 8000


def _attr_patterns(gitattributes: str) -> list[str]:
    """Patterns marked linguist-generated or linguist-vendored (set, or ``=true``)."""
    patterns: list[str] = []
    for raw in gitattributes.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        pattern, attrs = parts[0], parts[1:]
        for attr in attrs:
            name, _, value = attr.partition("=")
            if name in ("linguist-generated", "linguist-vendored") and value in ("", "true", "1"):
                patterns.append(pattern)
                break
    return patterns


@dataclass
class PathPolicy:
    """Decides per path and per blob whether it is indexed; built once per index run from HEAD's rules."""

    gitattributes: str = ""
    backstoryignore: str = ""
    extra_excludes: tuple[str, ...] = ()
    max_file_bytes: int = 1_000_000
    _generated: pathspec.PathSpec = field(init=False, repr=False)
    _ignored: pathspec.PathSpec = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._generated = pathspec.PathSpec.from_lines("gitignore", _attr_patterns(self.gitattributes))
        lines = [*DEFAULT_IGNORES, *self.backstoryignore.splitlines(), *self.extra_excludes]
        self._ignored = pathspec.PathSpec.from_lines("gitignore", lines)

    def digest(self) -> str:
        """Stable fingerprint of the rules: a change means the index no longer matches them."""
        h = hashlib.sha256()
        for part in (
            self.gitattributes,
            self.backstoryignore,
            "\n".join(self.extra_excludes),
            str(self.max_file_bytes),
        ):
            h.update(part.encode("utf-8", "replace"))
            h.update(b"\0")
        return h.hexdigest()[:16]

    def path_skip_reason(self, path: str) -> str | None:
        if self._generated.match_file(path):
            return "generated"
        if self._ignored.match_file(path):
            return "ignored"
        return None

    def blob_skip_reason(self, data: bytes) -> str | None:
        if len(data) > self.max_file_bytes:
            return "too_large"
        if data.startswith(LFS_PREFIX):
            return "lfs_pointer"
        if b"\0" in data[:BINARY_SNIFF]:
            return "binary"
        return None
