"""The names shared by the server and its clients agree: commands, the status notification, the settings section.

The server's names live in ``backstory/lsp/constants.py``; the VS Code client's in ``clients/vscode/src/protocol.ts``
(plus the commands ``package.json`` contributes), the Neovim plugin's in ``clients/neovim/lua/backstory/lsp.lua``.
The clients' sources are read as text: a rename on one side only fails here, before an editor finds out.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types

from backstory.lsp import constants as C

from .conftest import CLIENTS, SERVER, BackstoryClient, initialize_params

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "server" / "backstory"
VSCODE = ROOT / "clients" / "vscode"
NVIM = ROOT / "clients" / "neovim"

SERVER_COMMANDS = set(C.SERVER_COMMANDS)
UI_COMMANDS = {getattr(C, name): name for name in dir(C) if name.startswith("UI_")}  # value -> constant name
# the server command each client-side command calls: the one of the same name (UI_FIND_PRIOR_ART -> FIND_PRIOR_ART)
# unless listed here (the commit view and side-by-side diff are built from showCommit / fileAtRevision)
WRAPS = {C.UI_OPEN_COMMIT: C.SHOW_COMMIT, C.UI_OPEN_CHANGES: C.FILE_AT_REVISION}

# a quoted string that is nothing but a backstory name: "backstory.search", 'backstory.ui.search', "backstory/status"
QUOTED = re.compile(r"""(["'])(backstory[./][A-Za-z0-9_./-]*)\1""")
COMMAND_SHAPED = re.compile(r"backstory\.(?:ui\.)?[A-Za-z]+")
# quoted names in the clients that are not commands
NOT_COMMANDS = {
    "backstory.exe",  # the Windows executable the VS Code client looks for
    "backstory.results",  # the VS Code view's id
}


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def ts_code(text: str) -> str:
    """TypeScript without its comments (``// …`` after a blank or at a line start, ``/* … */``)."""
    return re.sub(r"(^|\s)//[^\n]*", r"\1", re.sub(r"/\*.*?\*/", "", text, flags=re.S), flags=re.M)


def lua_code(text: str) -> str:
    """Lua without its comments and without the module names given to ``require``."""
    return re.sub(r"""require\(\s*(["'])[^"']*\1\s*\)""", "require()", re.sub(r"--[^\n]*", "", text))


def ts_object(text: str, name: str) -> dict[str, str]:
    """``export const NAME = { key: "value", … } as const;`` as a dict."""
    m = re.search(rf"export const {name} = \{{(.*?)\}}( as const)?;", text, re.S)
    assert m, f"no `export const {name} = {{…}}` found"
    return dict(re.findall(r"""(\w+):\s*["']([^"']+)["']""", m.group(1)))


def ts_string(text: str, name: str) -> str:
    m = re.search(rf"""export const {name} = ["']([^"']+)["']""", text)
    assert m, f'no `export const {name} = "…"` found'
    return m.group(1)


def lua_table(text: str, name: str) -> dict[str, str]:
    """``M.name = { key = "value", ["key"] = "value", … }`` (one level, string values) as a dict."""
    m = re.search(rf"^M\.{name} = \{{\n(.*?)^\}}", text, re.S | re.M)
    assert m, f"no `M.{name} = {{…}}` found"
    entries = re.findall(r'(?:\[\s*"([^"]+)"\s*\]|(\w+))\s*=\s*"([^"]+)"', m.group(1))
    return {k1 or k2: v for k1, k2, v in entries}


def quoted_names(code: str) -> set[str]:
    return {m.group(2) for m in QUOTED.finditer(code)}


def assert_known(names: set[str], where: str, ui_known: set[str]) -> None:
    """Every command-shaped name is a server command, or a client-side command the client knows;
    every ``backstory/…`` name is the status notification."""
    for name in sorted(names - NOT_COMMANDS):
        if name.startswith("backstory/"):
            assert name == C.STATUS_NOTIFICATION, f"{where}: unknown notification {name!r}"
        elif name.startswith("backstory.ui."):
            assert name in ui_known, f"{where}: client-side command {name!r} is not defined by the client"
        elif COMMAND_SHAPED.fullmatch(name):
            assert name in SERVER_COMMANDS, f"{where}: {name!r} is not a server command ({sorted(SERVER_COMMANDS)})"


# -- the server ---------------------------------------------------------------------------------------------------


def test_the_constants_are_one_set_of_backstory_names() -> None:
    assert len(C.SERVER_COMMANDS) == len(SERVER_COMMANDS), "a command listed twice"
    assert all(COMMAND_SHAPED.fullmatch(c) and not c.startswith("backstory.ui.") for c in SERVER_COMMANDS)
    assert UI_COMMANDS, "the code actions carry client-side commands"
    assert all(c.startswith("backstory.ui.") for c in UI_COMMANDS)
    assert not SERVER_COMMANDS & set(UI_COMMANDS)
    # each client-side command wraps a server command: the one of the same name unless WRAPS says otherwise
    assert set(WRAPS) <= set(UI_COMMANDS)
    for value, name in UI_COMMANDS.items():
        assert wrapped(value) in SERVER_COMMANDS, name
        if value not in WRAPS:
            assert value.removeprefix("backstory.ui.") == wrapped(value).removeprefix("backstory.")


def wrapped(ui_command: str) -> str:
    """The server command a client-side command calls."""
    return WRAPS.get(ui_command) or getattr(C, UI_COMMANDS[ui_command].removeprefix("UI_"))


def test_the_server_spells_names_only_in_constants() -> None:
    """No module of the package writes a command or notification name as a literal except constants.py (the
    measurement client in evaluation/ may, but only names that exist). Module and logger names
    (``backstory.index``) are not commands."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "lsp" / "constants.py":
            continue
        strings = {
            node.value
            for node in ast.walk(ast.parse(read(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        names = {s for s in strings if QUOTED.fullmatch(f'"{s}"')}
        names = {n for n in names if not _is_module(n)}
        where = str(path.relative_to(ROOT))
        if path.parent.name == "lsp":
            assert not names, f"{where} spells {sorted(names)}: use backstory.lsp.constants"
        assert_known(names, where, set(UI_COMMANDS))


def _is_module(name: str) -> bool:
    parts = name.split(".")[1:]
    return len(parts) > 0 and (
        PACKAGE.joinpath(*parts).is_dir() or PACKAGE.joinpath(*parts).with_suffix(".py").is_file()
    )


@pytest_lsp.fixture(params=CLIENTS, config=SERVER)
async def bare(lsp_client: BackstoryClient, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
    """A server started the way an editor starts it; no workspace work is needed to read its capabilities."""
    lsp_client.initialize_result = await lsp_client.initialize_session(  # type: ignore[attr-defined]
        initialize_params(request.param, tmp_path)
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
@pytest.mark.timeout(120)
async def test_the_server_registers_exactly_the_server_commands(bare: BackstoryClient) -> None:
    result: types.InitializeResult = bare.initialize_result  # type: ignore[attr-defined]
    provider = result.capabilities.execute_command_provider
    assert provider is not None
    assert sorted(provider.commands) == sorted(C.SERVER_COMMANDS)
    # client-side commands must not be there: VS Code's language client would run them on the server
    assert not set(provider.commands) & set(UI_COMMANDS)


# -- the VS Code client -------------------------------------------------------------------------------------------


def test_vscode_protocol_names_match_the_server() -> None:
    protocol = read(VSCODE / "src" / "protocol.ts")
    assert set(ts_object(protocol, "ServerCommands").values()) == SERVER_COMMANDS
    assert len(ts_object(protocol, "ServerCommands")) == len(SERVER_COMMANDS)
    ui = ts_object(protocol, "UiCommands")
    assert set(UI_COMMANDS) <= set(ui.values()), "every command a code action carries is a VS Code command"
    assert ts_string(protocol, "STATUS_NOTIFICATION") == C.STATUS_NOTIFICATION
    assert ts_string(read(VSCODE / "src" / "config.ts"), "SECTION") == C.CONFIG_SECTION


def test_vscode_registers_and_contributes_its_commands() -> None:
    ui = ts_object(read(VSCODE / "src" / "protocol.ts"), "UiCommands")
    source = "\n".join(ts_code(read(p)) for p in sorted((VSCODE / "src").glob("*.ts")))
    registered = {ui[k] for k in re.findall(r"registerCommand\(\s*UiCommands\.(\w+)", source)}
    assert set(ui.values()) <= registered, f"defined but not registered: {set(ui.values()) - registered}"
    assert set(UI_COMMANDS) <= registered, "the code actions' commands need a handler in VS Code"
    manifest = json.loads(read(VSCODE / "package.json"))
    contributed = {c["command"] for c in manifest["contributes"]["commands"]}
    assert contributed <= set(ui.values()), f"contributed but not defined: {contributed - set(ui.values())}"
    assert set(UI_COMMANDS) <= contributed
    for menu, items in manifest["contributes"].get("menus", {}).items():
        assert {i["command"] for i in items} <= contributed, f"menu {menu} names an unknown command"
    settings = manifest["contributes"]["configuration"]["properties"]
    assert settings
    assert all(key.startswith(C.CONFIG_SECTION + ".") for key in settings)


def test_vscode_sends_only_server_commands() -> None:
    protocol = read(VSCODE / "src" / "protocol.ts")
    server, ui = ts_object(protocol, "ServerCommands"), ts_object(protocol, "UiCommands")
    for path in sorted((VSCODE / "src").glob("*.ts")):
        code, where = ts_code(read(path)), str(path.relative_to(ROOT))
        for key in re.findall(r"\bServerCommands\.(\w+)", code):
            assert key in server, f"{where}: ServerCommands.{key} is not defined"
        for key in re.findall(r"\bUiCommands\.(\w+)", code):
            assert key in ui, f"{where}: UiCommands.{key} is not defined"
        # the server is asked through ServerCommands only
        for first in re.findall(r"\.request\s*(?:<[^()]*?>)?\(\s*([^,)]+)", code):
            assert re.fullmatch(r"ServerCommands\.\w+", first.strip()), f"{where}: request({first}, …)"
        assert_known(quoted_names(code), where, set(ui.values()))


# -- the Neovim plugin --------------------------------------------------------------------------------------------


def test_neovim_names_match_the_server() -> None:
    lsp = read(NVIM / "lua" / "backstory" / "lsp.lua")
    server = lua_table(lsp, "server_commands")
    assert set(server.values()) == SERVER_COMMANDS
    assert len(server) == len(SERVER_COMMANDS)
    ui = lua_table(lsp, "ui_commands")
    assert ui == {value: wrapped(value) for value in UI_COMMANDS}
    handlers = lua_code(lsp).split("M.handlers = {", 1)[1]
    assert re.findall(r'\[\s*"([^"]+)"\s*\]\s*=\s*function', handlers) == [C.STATUS_NOTIFICATION]
    config = read(NVIM / "lsp" / "backstory.lua")
    assert re.search(rf"settings = \{{ {re.escape(C.CONFIG_SECTION)} = ", config), "settings under the section"


def test_neovim_sends_only_server_commands() -> None:
    lsp = read(NVIM / "lua" / "backstory" / "lsp.lua")
    server, ui = lua_table(lsp, "server_commands"), lua_table(lsp, "ui_commands")
    files = [*sorted((NVIM / "lua" / "backstory").glob("*.lua")), *sorted((NVIM / "lsp").glob("*.lua"))]
    files += sorted((NVIM / "plugin").glob("*.lua"))
    for path in files:
        code, where = lua_code(read(path)), str(path.relative_to(ROOT))
        for key in re.findall(r"\bserver_commands\.(\w+)", code):
            assert key in server, f"{where}: server_commands.{key} is not defined"
        assert_known(quoted_names(code), where, set(ui))


def test_indexing_phases_agree() -> None:
    """Each client words an indexing phase's progress as the server's table does (index/progress.py)."""
    from backstory.index.progress import PHASES

    vscode = {
        k: (label, unit)
        for k, label, unit in re.findall(
            r'^\s*(\w+): \["([^"]+)", "(\w+)"\],', read(VSCODE / "src" / "statusText.ts"), re.M
        )
    }
    nvim = {
        k: (label, unit)
        for k, label, unit in re.findall(
            r'^\s*(\w+) = \{ "([^"]+)", "(\w+)" \},', read(NVIM / "lua" / "backstory" / "format.lua"), re.M
        )
    }
    assert vscode == PHASES
    assert nvim == PHASES
