"""Code actions: prior art / history for the symbol at the cursor, prior art for a selection.

They carry client-side commands (``backstory.ui.*``): the client calls the server command and shows the result
in its own picker, because a server command run from a code action would have nowhere to show its answer.
"""

from __future__ import annotations

from lsprotocol import types

from .. import symbols
from . import constants as C
from .base import BackstoryServer
from .params import uri_path


def actions_for(uri: str, text: str | None, rng: types.Range, language: str | None) -> list[types.CodeAction]:
    out: list[types.CodeAction] = []
    pos = {"line": rng.start.line, "character": rng.start.character}
    if rng.start != rng.end:
        arg = {"uri": uri, "range": {"start": pos, "end": {"line": rng.end.line, "character": rng.end.character}}}
        cmd = types.Command(title="Find prior art for the selection", command=C.UI_FIND_PRIOR_ART, arguments=[arg])
        out.append(types.CodeAction(title=cmd.title, command=cmd))
    if text is None or language not in symbols.supported_languages():
        return out
    defs = symbols.extract_definitions(text.encode("utf-8"), language or "")
    d = symbols.innermost_definition(defs, rng.start.line + 1) if defs else None
    if d is None:
        return out
    arg = {"uri": uri, "position": pos}
    for title, command in (
        (f"Find prior art for `{d.name}`", C.UI_FIND_PRIOR_ART),
        (f"Show history of `{d.name}`", C.UI_SYMBOL_HISTORY),
    ):
        cmd = types.Command(title=title, command=command, arguments=[arg])
        out.append(types.CodeAction(title=title, command=cmd))
    return out


def code_action(ls: BackstoryServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    path = uri_path(uri)
    if ls.repos.for_path(path, ls.options) is None:
        return None
    try:
        text: str | None = ls.workspace.get_text_document(uri).source
    except Exception:
        text = None
    return actions_for(uri, text, params.range, symbols.language_for_path(path.name)) or None


def register(ls: BackstoryServer) -> None:
    ls.feature(types.TEXT_DOCUMENT_CODE_ACTION)(code_action)
