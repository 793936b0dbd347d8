"""``backstory.findPriorArtForChanges``: prior art for the uncommitted change of a workspace's repository.

Argument ``{"uri"?, "paths"?: [file URIs or repository-relative paths], "rev"?, "k"?, "hideReverted"?}``;
the result is the search JSON of docs/protocol.md with ``changes`` (what the query was made of).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..features.changes import prior_art_for_changes
from ..history.repo import repo_relative
from . import constants as C
from .base import BackstoryServer
from .commands import _guard, _no_repo, _options, _state_for, run_cancellable
from .params import get_str, invalid, single_object, uri_path


def _paths(root: Any, obj: dict[str, Any]) -> list[str] | None:
    raw = obj.get("paths")
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise invalid("'paths' must be a list of strings (file URIs or repository-relative paths)")
    return [repo_relative(root, uri_path(p)) if p.startswith("file:") else p.strip("/") for p in raw]


async def find_prior_art_for_changes(ls: BackstoryServer, *args: Any) -> Any:
    obj = single_object(C.FIND_PRIOR_ART_FOR_CHANGES, args)
    state = _state_for(ls, obj)
    if state is None:
        return _no_repo(ls)
    opts = _options(ls, obj)
    rev = get_str(obj, "rev", required=False)
    paths = _paths(state.root, obj)

    async def go() -> Any:
        def work(cancelled: Callable[[], bool]) -> Any:
            return prior_art_for_changes(state.engine, opts, rev, paths)

        return await run_cancellable(work)

    return await _guard(go)


def register(ls: BackstoryServer) -> None:
    ls.command(C.FIND_PRIOR_ART_FOR_CHANGES)(find_prior_art_for_changes)
