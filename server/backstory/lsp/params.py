"""Validation of command arguments: malformed params become InvalidParams with a sentence, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from ..features.locate import Position
from ..history.repo import HistoryError, repo_relative


def document_position(root: Path, uri: str, pos: types.Position) -> Position:
    """The one adapter from an LSP document position (URI, 0-based line) to the engine's structured
    :class:`Position` (repository-relative path, 1-based line); the path is resolved once, here."""
    try:
        rel = repo_relative(root, uri_path(uri))
    except HistoryError as e:  # outside the repository, or a symbolic link that loops
        raise invalid(str(e)) from None
    return Position(rel, pos.line + 1)


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message)


def single_object(command: str, args: tuple[Any, ...]) -> dict[str, Any]:
    if len(args) == 0:
        return {}
    if len(args) != 1 or not isinstance(args[0], dict):
        raise invalid(f"{command} takes one object argument (see docs/protocol.md), got {list(args)!r:.200}")
    return args[0]


def get_str(obj: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise invalid(f"'{key}' must be a non-empty string")
    if "\x00" in value:
        raise invalid(f"'{key}' must not contain NUL characters")
    return value


def get_int(obj: dict[str, Any], key: str, default: int, lo: int = 1, hi: int = 200) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise invalid(f"'{key}' must be an integer between {lo} and {hi}")
    return value


def uri_path(uri: str) -> Path:
    path = to_fs_path(uri)
    if not path:
        raise invalid(f"not a file URI: {uri!r}")
    return Path(path)


def position(obj: dict[str, Any], key: str = "position") -> types.Position:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise invalid(f"'{key}' must be an object with 'line' and 'character'")
    line, char = value.get("line"), value.get("character", 0)
    if isinstance(line, bool) or not isinstance(line, int) or line < 0:
        raise invalid(f"'{key}.line' must be a non-negative integer")
    if isinstance(char, bool) or not isinstance(char, int) or char < 0:
        raise invalid(f"'{key}.character' must be a non-negative integer")
    return types.Position(line=line, character=char)


def range_(obj: dict[str, Any]) -> types.Range:
    value = obj.get("range")
    if not isinstance(value, dict):
        raise invalid("'range' must be an object with 'start' and 'end'")
    return types.Range(start=position(value, "start"), end=position(value, "end"))
