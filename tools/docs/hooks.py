"""mkdocs hooks: the reference pages are generated from the code at build time, so they cannot drift from it.

- ``reference/cli.md``: every command and flag, from ``backstory.cli_parser.build_parser`` (tuning switches included, in
  their own section, as ``BACKSTORY_TUNING_HELP=1 backstory query --help`` lists them), and the exit codes.
- ``reference/settings.md``: every server option (``backstory.lsp.options.Options`` and its aliases), every VS
  Code setting (``clients/vscode/package.json`` ``contributes.configuration``), every Neovim key
  (``clients/neovim/lua/backstory/config.lua`` ``M.defaults``) and the environment variables the package reads.
- ``<!-- screenshots: PREFIX -->`` in a page becomes the screenshots ``docs/images/PREFIX*.png`` that exist
  (the editor end-to-end tests write them); nothing when there are none.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]

# environment variables the package reads; tests/test_docs.py checks that every BACKSTORY_* name in the source is here
ENVIRONMENT = {
    "BACKSTORY_INDEX_DIR": "Where the index lives (default `<git dir>/backstory`); same as `--index-dir`.",
    "BACKSTORY_CACHE_DIR": "Where the prepared embedding model is cached (default `$XDG_CACHE_HOME/backstory`, else "
    "`~/.cache/backstory`).",
    "BACKSTORY_LOG": "The language server's log level on stderr (`WARNING` by default; `INFO`, `DEBUG`).",
    "BACKSTORY_TUNING_HELP": "`1` lists the tuning switches in `backstory query --help`.",
    "BACKSTORY_WORKERS": "History reader processes for the indexing phase (default: one per core, at most 2).",
    "BACKSTORY_INDEX_BATCH": "Commits per durable indexing batch (default 200; a measurement knob).",
    "BACKSTORY_DENSE_BATCH": "File changes per embedding batch (a measurement knob; default 256).",
    "BACKSTORY_DENSE_SAVE_SECONDS": "How often the embedding phase saves its vectors (default every 20 seconds).",
    "NO_COLOR": "Any non-empty value turns colours off in the text output (https://no-color.org).",
}

# the Neovim keys that config.lua does not comment on its line
NEOVIM_HELP = {
    "cmd": "The command that starts the language server.",
    "filetypes": "The filetypes the client attaches to: the languages Backstory attributes symbols in "
    "(python, javascript(react), typescript(react), rust, go, java, c, cpp, ruby).",
}

# the server options' meaning where the VS Code settings do not give it
SERVER_HELP = {
    "k": "How many commits a search returns.",
    "rerank": "Rerank the first stage's top candidates (off is faster).",
    "reranker": "`maxsim` (late interaction over stored token states), `cross-encoder` or `none`.",
    "crossEncoderDir": "Directory with a cross-encoder `model.onnx` + `tokenizer.json` (`reranker: cross-encoder`).",
    "secondStage": "How the reranked candidates are ordered: `learned` (default) or `blend`.",
    "hover": "Show past changes to the symbol under the mouse.",
    "hoverMax": "Commits listed in a hover.",
    "hoverPrewarm": "Prepare an opened file's hovers in the background.",
    "indexDir": "Index location (default `<git dir>/backstory`).",
    "modelPath": "Directory with an embedding `model.onnx` + `tokenizer.json` (default: the bundled model).",
    "exclude": "Glob patterns of paths to leave out of the index.",
    "recencyWeight": "How much a recent commit is favoured (0-1; score × (1 + w · exp(−age/90 days))).",
    "dense": "Use the dense (embedding) lane.",
    "allBranches": "Index every local branch's history too, and search all of them (a request's `branch` or "
    "`allBranches` overrides it; HEAD's history only when off).",
}


def _cell(text: Any) -> str:
    """Text for a Markdown table cell (``<git dir>`` must not read as an HTML tag)."""
    parts = str(text).replace("|", "\\|").replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):  # outside code spans only
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    shown = []
    for opt in action.option_strings:
        if action.nargs == 0:
            shown.append(f"`{opt}`")
        else:
            meta = action.metavar or (
                "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
            )
            shown.append(f"`{opt} {meta}`")
    return ", ".join(shown)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
        return ""
    return f"`{action.default}`"


def _table(actions: list[argparse.Action]) -> list[str]:
    rows = ["| argument | default | what it does |", "|---|---|---|"]
    for a in actions:
        help_text = (a.help or "").replace("%(default)s", str(a.default))
        if a.choices and a.option_strings and "{" not in _flags(a):
            help_text += f" (one of: {', '.join(f'`{c}`' for c in a.choices)})"
        rows.append(f"| {_flags(a)} | {_default(a)} | {_cell(help_text)} |")
    return rows


def cli_reference() -> str:
    from backstory import cli_parser

    parser = cli_parser.build_parser(tuning_help=True)
    plain = cli_parser.build_parser(tuning_help=False)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    plain_sub = next(a for a in plain._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    out = [
        "# Command line",
        "",
        "Generated from the program's own argument parser when this site is built; `backstory COMMAND --help`"
        " prints the same.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    out += [f"| [`{name}`](#{name}) | {_cell(helps.get(name, ''))} |" for name in sub.choices]
    for name, sp in sub.choices.items():
        shown = plain_sub.choices[name]
        hidden = {a.dest for a in shown._actions if a.help == argparse.SUPPRESS}
        actions = [a for a in sp._actions if not isinstance(a, argparse._HelpAction)]
        out += ["", f"## `{name}`", "", sp.description or helps.get(name) or "", ""]
        out += ["```text", shown.format_usage().strip(), "```", ""]
        out += _table([a for a in actions if a.dest not in hidden])
        if hidden:
            out += [
                "",
                "**Tuning switches** (for evaluation; hidden from `--help` unless `BACKSTORY_TUNING_HELP=1`; the "
                "defaults were chosen by measurement, see [Benchmarks](../benchmarks.md)):",
                "",
            ]
            out += _table([a for a in actions if a.dest in hidden])
    out += ["", "## Exit codes", "", "Every command exits with one of these (`backstory --help` lists them too):", ""]
    out += ["| code | meaning |", "|---|---|"]
    for line in cli_parser.EXIT_CODES.splitlines()[1:]:
        code, meaning = line.strip().split(None, 1)
        out.append(f"| `{code}` | {_cell(meaning)} |")
    out += [
        "",
        "`status` and `show` exit 0 when they could answer; `query --batch` exits 0 whatever each query found "
        "(each JSON line says). Errors print one line on stderr, starting with `backstory:`.",
        "",
        "## Environment",
        "",
        "| variable | what it does |",
        "|---|---|",
    ]
    out += [f"| `{k}` | {_cell(v)} |" for k, v in ENVIRONMENT.items()]
    return "\n".join(out) + "\n"


def _neovim_defaults() -> list[tuple[str, str, str]]:
    """(key, default, comment) of ``M.defaults`` in the Neovim client's config.lua."""
    text = (ROOT / "clients/neovim/lua/backstory/config.lua").read_text("utf-8")
    body = re.search(r"M\.defaults\s*=\s*\{(.*?)\n\}", text, re.S)
    rows = []
    for line in (body.group(1) if body else "").splitlines():
        m = re.match(r"\s*([a-z_]+)\s*=\s*(.*?),?\s*(?:--\s*(.*))?$", line)
        if m and not line.strip().startswith("--"):
            rows.append((m.group(1), m.group(2).rstrip(","), (m.group(3) or "").strip()))
    return rows


def settings_reference() -> str:
    import attrs

    from backstory.lsp import options

    package = json.loads((ROOT / "clients/vscode/package.json").read_text("utf-8"))
    vscode = package["contributes"]["configuration"]["properties"]
    aliases: dict[str, list[str]] = {}
    for alias, name in options.ALIASES.items():
        aliases.setdefault(name, []).append(alias)
    vscode_for = {}
    for key in vscode:
        short = key.removeprefix("backstory.")
        vscode_for[options.ALIASES.get(short, short)] = key

    out = [
        "# Settings",
        "",
        "Generated from the code when this site is built: the language server's options, the VS Code extension's "
        "settings and the Neovim client's configuration keys.",
        "",
        "## Language server",
        "",
        "Clients send these as `initializationOptions` and answer `workspace/configuration` for the section "
        "`backstory`. Flat keys (`hoverMax`) and nested ones (`hover.max`) are both accepted; an invalid value is "
        "reported once and replaced by its default.",
        "",
        "| option | type | default | also accepted as | what it does |",
        "|---|---|---|---|---|",
    ]
    for f in attrs.fields(options.Options):
        default = f.default.factory() if isinstance(f.default, attrs.Factory) else f.default  # type: ignore[call-arg]
        vs = vscode_for.get(f.name)
        text = SERVER_HELP.get(f.name) or (vscode[vs].get("markdownDescription", "") if vs else "")
        kind = getattr(f.type, "__name__", None) or str(f.type)
        also = ", ".join(f"`{a}`" for a in sorted(aliases.get(f.name, [])))
        out.append(f"| `{f.name}` | {_cell(kind)} | `{json.dumps(default)}` | {also} | {_cell(text)} |")
    out += [
        "",
        "## VS Code",
        "",
        "From `clients/vscode/package.json` (`contributes.configuration`); set them in Settings → Extensions → "
        "Backstory or in `settings.json`.",
        "",
        "| setting | type | default | what it does |",
        "|---|---|---|---|",
    ]
    for key, spec in vscode.items():
        text = spec.get("markdownDescription") or spec.get("description") or ""
        if spec.get("enum"):
            text += " One of: " + ", ".join(f"`{v}`" for v in spec["enum"]) + "."
        default = json.dumps(spec.get("default"))
        out.append(f"| `{key}` | {spec.get('type', '')} | `{default}` | {_cell(text)} |")
    out += [
        "",
        "## Neovim",
        "",
        "From `clients/neovim/lua/backstory/config.lua`: set them in `vim.g.backstory` (a table) before the "
        'client starts; the LSP fields can also go through `vim.lsp.config("backstory", {...})`. `nil` means '
        "the server's default.",
        "",
        "| key | default | what it does |",
        "|---|---|---|",
    ]
    out += [f"| `{k}` | `{_cell(d)}` | {_cell(c or NEOVIM_HELP.get(k, ''))} |" for k, d, c in _neovim_defaults()]
    return "\n".join(out) + "\n"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/cli.md", content=cli_reference()))
    files.append(File.generated(config, "reference/settings.md", content=settings_reference()))
    return files


SCREENSHOTS = re.compile(r"<!--\s*screenshots:\s*([\w.-]+)\s*-->")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def shots(m: re.Match[str]) -> str:
        prefix = m.group(1)
        images = sorted((Path(config["docs_dir"]) / "images").glob(f"{prefix}*.png"))
        depth = page.file.src_uri.count("/")
        up = "../" * depth
        return "\n\n".join(f"![{p.stem.replace('-', ' ')}]({up}images/{p.name})" for p in images)

    return SCREENSHOTS.sub(shots, markdown)
