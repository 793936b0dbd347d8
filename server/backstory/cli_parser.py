"""The command line's grammar: every command, flag and help text of ``backstory`` (:func:`build_parser`), and
the exit codes they document.

Its own module because the grammar is most of the command line's text and changes for other reasons than the
commands do: ``cli.py`` runs the commands, this module says what they accept (and docs/reference/cli.md is
generated from it).
"""

from __future__ import annotations

import argparse
import os
import textwrap

from . import __version__
from .search.fusion import FUSION_METHODS

EXIT_OK = 0
EXIT_NO_RESULTS = 1
EXIT_USAGE = 2
EXIT_NO_INDEX = 3
EXIT_ERROR = 4
EXIT_INTERRUPTED = 130

EXIT_CODES = f"""exit codes:
  {EXIT_OK}    done; for query and history: at least one commit found
  {EXIT_NO_RESULTS}    nothing found (query, history)
  {EXIT_USAGE}    usage: an unknown option or a value that cannot be used
  {EXIT_NO_INDEX}    no index yet (run `backstory index`), or it is still being built
  {EXIT_ERROR}    error: not a repository, a busy or damaged index, an unknown revision or position, ...
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); the index stays consistent, run the command again to resume"""


SECOND_STAGES = ("learned", "blend")  # = search.engine.SECOND_STAGES (tested); importing the engine costs 0.25 s
DENSE_POOL = 10  # = search.engine.SearchOptions.dense_pool (tested)
TUNING_ENV = "BACKSTORY_TUNING_HELP"  # set to 1 to list the tuning switches in `query --help`


def _tcp(spec: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``/``PORT`` for 127.0.0.1) for ``serve --tcp``."""
    host, sep, port = spec.rpartition(":")
    if not sep:
        host, port = "", spec
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port from 1 to 65535, got {spec!r}")
    return host, int(port)


def _position_spec(spec: str) -> str:
    """``PATH:LINE`` with a 1-based line (checked here so that a malformed one is a usage error)."""
    path, sep, line = spec.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise argparse.ArgumentTypeError(f"expected PATH:LINE with a 1-based line, got {spec!r}")
    return spec


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    return value


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


def build_parser(tuning_help: bool | None = None) -> argparse.ArgumentParser:
    """The whole command line. ``tuning_help`` lists the evaluation switches in ``query --help`` (default: when
    ``BACKSTORY_TUNING_HELP=1``); they work either way."""
    if tuning_help is None:
        tuning_help = os.environ.get(TUNING_ENV, "") not in ("", "0")
    p = argparse.ArgumentParser(
        prog="backstory",
        description="Find prior art in a repository's git history: past commits that did something like what "
        "you are about to do.",
        epilog="first steps:\n  backstory index                 index this repository (incremental, resumable)\n"
        '  backstory query "retry with backoff"\n  backstory status                what is indexed, what to do next\n\n'
        + EXIT_CODES,
        formatter_class=_Formatter,
    )
    p.add_argument("--version", action="version", version=f"backstory {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        text = textwrap.fill(description or help[0].upper() + help[1:] + ".", width=100)
        return sub.add_parser(
            name, help=help, description=text, epilog=EXIT_CODES,
            formatter_class=_Formatter,
        )  # fmt: skip

    def common(sp: argparse.ArgumentParser, repo_positional: bool = False) -> None:
        if not repo_positional:
            sp.add_argument(
                "-C", "--repo", default=".", metavar="PATH", help="repository (or a path inside it); default: ."
            )
        sp.add_argument(
            "--index-dir", metavar="DIR", help="index location (default: <git dir>/backstory, or $BACKSTORY_INDEX_DIR)"
        )

    def color(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--color", choices=("auto", "always", "never"), default="auto",
            help="colour the text output: auto (default) = on a terminal unless NO_COLOR is set",
        )  # fmt: skip

    ix = command(
        "index", "index (or update the index of) a repository's history",
        "Index a repository's history: new commits' hunks (newest first), merges' diffs, then embeddings. "
        "Incremental and resumable: Ctrl-C or a crash loses nothing, the next run goes on.",
    )  # fmt: skip
    ix.add_argument("path", nargs="?", default=".", metavar="PATH", help="repository (or a path inside it); default: .")
    common(ix, repo_positional=True)
    ix.add_argument("--rebuild", action="store_true", help="discard the index and build it again")
    ix.add_argument("--no-messages", action="store_true", help="leave commit messages out of every lane (measurement)")
    ix.add_argument("--no-dense", action="store_true", help="skip the embedding phase (keyword search only)")
    ix.add_argument("--no-symbols", action="store_true", help="skip tree-sitter symbol attribution")
    ix.add_argument(
        "--all-branches", action="store_true",
        help="index every local branch's history too, from now on (search them with query --branch / "
        "--all-branches; HEAD's history stays the default); --rebuild goes back to HEAD's only",
    )  # fmt: skip
    ix.add_argument(
        "--max-file-bytes", type=_count, default=1_000_000, metavar="N",
        help="skip file versions larger than this (default 1000000)",
    )  # fmt: skip
    ix.add_argument("--model", metavar="DIR", help="directory with model.onnx + tokenizer.json (default: bundled)")
    ix.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS",
        help="wait this long for another indexer to finish (default: fail at once)",
    )  # fmt: skip
    ix.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    ix.add_argument("--json", action="store_true", help="print the run's report as JSON")

    q = command(
        "query", "search the indexed history",
        "Search the indexed history for commits like TEXT (or like the definition at --at PATH:LINE). "
        "Prints one or two lines per commit: sha, subject, author, age, where and why it matched.",
    )  # fmt: skip
    q.add_argument("text", nargs="?", metavar="TEXT", help="what you are looking for, in words or code")
    common(q)
    q.add_argument("-k", type=_count, default=10, metavar="N", help="number of commits (default 10)")
    q.add_argument(
        "--since", metavar="WHEN",
        help="only commits authored on or after WHEN: YYYY-MM-DD, an RFC 3339 time, or an age (30d, 2w, 6m, 1y)",
    )  # fmt: skip
    q.add_argument(
        "--until", metavar="WHEN", help="only commits authored on or before WHEN (same forms; a date counts whole)"
    )
    q.add_argument("--path", metavar="GLOB", help="only changes to these paths: a glob ('src/**/*.py') or a directory")
    q.add_argument("--author", metavar="TEXT", help="author name or email substring")
    q.add_argument("--language", metavar="ID", help="language id, e.g. python")
    q.add_argument(
        "--at",
        metavar="PATH:LINE",
        type=_position_spec,
        help="prior art for the definition at this position, instead of TEXT",
    )
    q.add_argument(
        "--no-dense", action="store_true", help="keyword lanes only: no embedding model is loaded (faster start)"
    )
    q.add_argument(
        "--changes", nargs="?", const="", default=None, metavar="REV|REV..REV",
        help="prior art for a change instead of TEXT: the uncommitted changes (default), a commit, or a range",
    )  # fmt: skip
    q.add_argument(
        "--hide-reverted", action="store_true", help="leave out commits that were reverted (and not re-applied)"
    )
    scope = q.add_mutually_exclusive_group()
    scope.add_argument(
        "--branch", metavar="REF", help="search REF's history (a branch, tag or commit) instead of HEAD's"
    )
    scope.add_argument(
        "--all-branches", action="store_true", help="search every branch's history (an index built with it)"
    )
    q.add_argument("--hunks", "-v", action="store_true", help="show each commit's matching hunks")
    color(q)
    q.add_argument("--json", action="store_true", help="print the result as JSON (docs/protocol.md)")
    q.add_argument(
        "--batch", metavar="FILE",
        help="one query per line of FILE ('-' = stdin); prints one JSON object per line (implies --json)",
    )  # fmt: skip
    tuning = q.add_argument_group(
        "tuning (for evaluation; the defaults were chosen by measurement, see the benchmarks page)"
    )

    def hidden(text: str) -> str:
        return text if tuning_help else argparse.SUPPRESS

    tuning.add_argument("--no-rerank", action="store_true", help=hidden("skip the rerank and the second stage"))
    tuning.add_argument(
        "--fusion", choices=FUSION_METHODS, default=FUSION_METHODS[0],
        help=hidden("combine lanes by normalised scores (default) or by Reciprocal Rank Fusion (k = 60)"),
    )  # fmt: skip
    tuning.add_argument(
        "--second-stage", choices=SECOND_STAGES, default=SECOND_STAGES[0],
        help=hidden("order the reranked candidates by the learned model (default) or by rerank + 0.5 x fused score"),
    )  # fmt: skip
    tuning.add_argument(
        "--dense-pool", type=_count, default=DENSE_POOL, metavar="N",
        help=hidden("also rerank the dense lane's top N commits that fusion left below the top 20 (0 = none)"),
    )  # fmt: skip
    tuning.add_argument(
        "--reranker", choices=["maxsim", "cross-encoder", "none"], default=None,
        help=hidden("the rerank: MaxSim over stored token states (default), a cross-encoder, or none"),
    )  # fmt: skip
    tuning.add_argument(
        "--cross-encoder", metavar="DIR", help=hidden("directory with a cross-encoder model.onnx + tokenizer.json")
    )
    tuning.add_argument(
        "--model", metavar="DIR", help=hidden("directory with model.onnx + tokenizer.json (default: bundled)")
    )
    tuning.add_argument(
        "--lanes",
        metavar="LANES",
        help=hidden("comma-separated subset of lanes: diff,message,path,symbol,dense,message_dense"),
    )

    st = command("status", "what is indexed, what is pending and what to do next")
    common(st)
    color(st)
    st.add_argument("--json", action="store_true", help="print the same facts as JSON")

    sh = command("show", "a commit's message and diff (like git show)")
    sh.add_argument("sha", metavar="REV", help="a sha (4+ hex digits), branch, tag or HEAD, with ~N / ^N steps")
    common(sh)
    sh.add_argument("--path", metavar="PATH", help="only this file (for a merge: this file against each parent)")

    hi = command(
        "history", "exact history of the definition at PATH:LINE (like git log -L)",
        "Every commit that changed the definition enclosing PATH:LINE (function, method, class ...), newest first, "
        "like `git log -L :name:path`. PATH is relative to the current directory or the repository's root.",
    )  # fmt: skip
    hi.add_argument(
        "position", metavar="PATH:LINE", type=_position_spec, help="a file and a 1-based line inside the definition"
    )
    common(hi)
    hi.add_argument("--hunks", "-v", action="store_true", help="show the hunks that touched the definition")
    color(hi)
    hi.add_argument("--json", action="store_true", help="print the result as JSON (docs/protocol.md)")

    sv = command(
        "serve", "run the language server (editors start it)",
        "Run the language server over stdio (what the VS Code and Neovim clients start).",
    )  # fmt: skip
    sv.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    sv.add_argument("--tcp", metavar="HOST:PORT", type=_tcp, help="listen on TCP instead, for debugging")

    mc = command(
        "mcp", "run the MCP server for coding agents (stdio)",
        "Run the Model Context Protocol server over stdio: find_prior_art, symbol_history, show_commit and "
        "index_status for coding agents, indexing in the background like the language server (docs/mcp.md).",
    )  # fmt: skip
    common(mc)
    return p
