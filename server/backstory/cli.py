"""Command line: ``backstory index|query|status|show|history|serve``.

Every command prints human text by default and the documented JSON with ``--json``. Exit codes (``EXIT_*``
below, listed in ``--help`` and docs/reference/cli.md): 0 done (a query or history found something), 1 nothing
found, 2 usage (the command line is wrong), 3 no index yet, 4 an error the user can fix (one line on stderr;
nothing is written to the index on failure), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .history.repo import HistoryError
from .index.store import StoreError
from .search.fusion import FUSION_METHODS
from .search.when import BadDate

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


class UsageError(ValueError):
    """A value on the command line that cannot be used (exit 2)."""


class NoIndex(Exception):
    """The command needs an index and there is none yet (exit 3)."""


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


def _parser(tuning_help: bool | None = None) -> argparse.ArgumentParser:
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(_COMMANDS[args.command](args) or 0)
    except (UsageError, BadDate) as e:
        print(f"backstory {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except NoIndex as e:
        print(f"backstory: {e}", file=sys.stderr)
        return EXIT_NO_INDEX
    except (HistoryError, StoreError, ValueError) as e:
        print(f"backstory: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(
            "backstory: interrupted; the index is consistent, run the command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:  # a file the user pointed at is unusable (--index-dir on a file, no permission)
        where = f" {e.filename}" if e.filename else ""
        print(f"backstory: cannot use{where}: {e.strerror or e}", file=sys.stderr)
        return EXIT_ERROR


def _dump(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def cmd_index(args: argparse.Namespace) -> int:
    from .index.build import BuildOptions
    from .index.job import run_index
    from .views.progress import ProgressView, seconds_text
    from .views.status import unreadable_merges_note

    view = ProgressView(sys.stderr, quiet=args.quiet)
    opts = BuildOptions(no_messages=args.no_messages, symbols=not args.no_symbols, max_file_bytes=args.max_file_bytes)
    try:
        result = run_index(
            args.path, options=opts, index_dir=args.index_dir, rebuild=args.rebuild, dense=not args.no_dense,
            model_path=args.model, progress=view, wait=args.wait, all_branches=args.all_branches,
        )  # fmt: skip
    finally:
        view.close()
    total = view.seconds()
    report = result.report
    dense_note = f"dense phase skipped: {result.dense_note}" if result.dense_note else None
    phases = {name: round(stat.elapsed(stat.ended or 0.0), 3) for name, stat in view.phases.items()}
    if args.json:
        _dump(
            {
                **report.__dict__, "embedded_files": result.embedded, "dense_note": dense_note,
                "seconds_total": round(total, 3), "phase_seconds": phases,
            }
        )  # fmt: skip
        return EXIT_OK
    done = f"indexed {_plural(report.new_commits, 'new commit')} ({_plural(report.hunks, 'hunk')})"
    if not args.no_dense and not result.dense_note and not report.cancelled:
        done += f", embedded {_plural(result.embedded, 'file change')}"
    if report.purged_commits:
        done += f", purged {_plural(report.purged_commits, 'unreachable commit')}"
    done += f" in {seconds_text(total)}"
    labels = {
        "history": "history",
        "merge_paths": "merge listing",
        "merges": "merges",
        "symbols": "symbols",
        "texts": "commit texts",
        "message_index": "message index",
        "dense": "embeddings",
        "messages": "message embeddings",
    }
    split = [f"{labels.get(k, k)} {seconds_text(v)}" for k, v in phases.items()]
    print(done + (f" ({', '.join(split)})" if len(split) > 1 else ""))
    if report.cancelled:
        print("stopped before the end: run `backstory index` again to go on", file=sys.stderr)
    if report.unreadable_merges:
        print(unreadable_merges_note(report.unreadable_merges), file=sys.stderr)
    if report.skipped:
        skipped = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in sorted(report.skipped.items()))
        print(f"skipped files: {skipped} (left out on purpose; see `backstory status`)")
    if dense_note:
        print(dense_note, file=sys.stderr)
    return EXIT_OK


def _engine(args: argparse.Namespace) -> Any:
    from .search.engine import Engine
    from .search.options import ModelConfig

    cross_encoder = getattr(args, "cross_encoder", None)
    no_dense = getattr(args, "no_dense", False)  # as --help says: no embedding model, so no MaxSim rerank either
    models = ModelConfig(
        model_path=getattr(args, "model", None),
        reranker=getattr(args, "reranker", None)
        or ("cross-encoder" if cross_encoder else "none" if no_dense else "maxsim"),
        cross_encoder_dir=getattr(args, "cross_encoder", None),
        dense=not no_dense,
    )  # fmt: skip
    return Engine(args.repo, args.index_dir, models)


def _search_options(args: argparse.Namespace) -> Any:
    from .index.text_index import Filters
    from .search.options import SearchOptions
    from .search.when import parse_when

    if args.k < 1:
        raise UsageError("-k must be at least 1")
    since = parse_when(args.since) if args.since else None
    until = parse_when(args.until, end_of_day=True) if args.until else None
    if since is not None and until is not None and since > until:
        raise UsageError(f"--since {args.since} is after --until {args.until}: no commit can match")
    language = args.language.strip().lower() if args.language else None
    if language is not None:
        from .symbols.languages import known_languages

        if language not in known_languages():
            raise UsageError(f"unknown language {args.language!r}; known: {', '.join(sorted(known_languages()))}")
    filters = Filters(since=since, until=until, path_glob=args.path, author=args.author, language=language)
    lanes = None
    if args.lanes:
        from .search.options import TEXT_LANES

        known = (*TEXT_LANES, "dense", "message_dense")
        lanes = tuple(x.strip() for x in args.lanes.split(",") if x.strip())
        unknown = [x for x in lanes if x not in known]
        if unknown or not lanes:
            raise UsageError(f"unknown lane(s) {', '.join(unknown) or '(none given)'}; lanes are {', '.join(known)}")
    if args.dense_pool < 0:
        raise UsageError(f"--dense-pool must be 0 or more, not {args.dense_pool}")
    if not args.batch and not args.at and args.changes is None and not (args.text and args.text.strip()):
        raise UsageError("give a query TEXT, --at PATH:LINE, --changes [REV] or --batch FILE")
    return SearchOptions(
        k=args.k, filters=filters, rerank=not args.no_rerank, lanes=lanes, fusion=args.fusion,
        second_stage=args.second_stage, dense_pool=args.dense_pool, hide_reverted=args.hide_reverted,
        branch=args.branch, all_branches=args.all_branches,
    )  # fmt: skip


def cmd_query(args: argparse.Namespace) -> int:
    opts = _search_options(args)
    with _engine(args) as engine:
        return _query(engine, args, opts)


def _no_index(meta: dict[str, Any]) -> str | None:
    """Why nothing can be searched yet (no index, an empty one, one being built, an empty repository), or None."""
    index = meta.get("index") or {}
    if index.get("head") is None:
        return f"{meta.get('hint') or 'the repository has no commits yet'}"
    if index.get("indexed_commits"):
        return None
    return meta.get("hint") or "no index yet: run `backstory index`"


def _query(engine: Any, args: argparse.Namespace, opts: Any) -> int:
    from .views.text import notes, print_results, use_color

    if args.batch:
        try:
            src = sys.stdin if args.batch == "-" else open(args.batch, encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            raise UsageError(f"cannot read the query file {args.batch}: {e.strerror or e}") from None
        with src:
            for line in src:
                text = line.rstrip("\n")
                _dump(engine.search(text, opts) if text.strip() else {"query": text, "results": [], "_meta": {}})
                sys.stdout.flush()
        return EXIT_OK
    if args.changes is not None:
        from .features.changes import prior_art_for_changes

        result = prior_art_for_changes(engine, opts, args.changes or None)
    elif args.at:
        from .features.prior_art import prior_art

        result = prior_art(engine, _position(engine, args.at), opts)
    else:
        result = engine.search(args.text, opts)
    found = bool(result.get("results") or result.get("exact"))
    missing = None if found else _no_index(result.get("_meta", {}))
    if args.json:
        _dump(result)
    elif found:
        print_results(result, sys.stdout, hunks=args.hunks, color=use_color(sys.stdout, args.color))
    elif missing is None:  # the warnings and the hint ("no matching commits; try ...") go where errors go
        for line in notes(result.get("_meta", {})) or ["no matching commits"]:
            print(line, file=sys.stderr)
    if missing is not None:
        if not args.json:
            print(f"backstory: {missing}", file=sys.stderr)
        return EXIT_NO_INDEX
    return EXIT_OK if found else EXIT_NO_RESULTS


def cmd_status(args: argparse.Namespace) -> int:
    from .models.cache import cache_report
    from .views.status import print_status
    from .views.text import use_color

    with _engine(args) as engine:
        status = engine.status()
    status["model_cache"] = cache_report()
    if args.json:
        _dump(status)
    else:
        print_status(status, sys.stdout, color=use_color(sys.stdout, args.color))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from .features.show_commit import show
    from .views.consequences import consequence_line

    with _engine(args) as engine:
        sys.stdout.write(show(engine, args.sha, args.path, describe=consequence_line).text)
    return EXIT_OK


def _position(engine: Any, spec: str) -> Any:
    """``PATH:LINE`` from the command line: PATH relative to the current directory (or to the repository's
    root), or absolute."""
    from .features.locate import parse_position

    return parse_position(spec, engine.root, bases=(Path.cwd(), engine.root))


def cmd_history(args: argparse.Namespace) -> int:
    from .features.exact_history import symbol_history
    from .views.text import print_history, use_color

    with _engine(args) as engine:
        result = symbol_history(engine, _position(engine, args.position))
    missing = None if result["commits"] else _no_index(result.get("_meta", {}))
    if args.json:
        _dump(result)
    elif missing is None:
        print_history(result, sys.stdout, hunks=args.hunks, color=use_color(sys.stdout, args.color))
    if missing is not None and result.get("symbol") is not None:
        if not args.json:
            print(f"backstory: {missing}", file=sys.stderr)
        return EXIT_NO_INDEX
    return EXIT_OK if result["commits"] else EXIT_NO_RESULTS


def cmd_serve(args: argparse.Namespace) -> int:
    from .lsp.server import run

    run(tcp=f"{args.tcp[0]}:{args.tcp[1]}" if args.tcp else None)
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp.server import run

    run(args.repo, args.index_dir)
    return 0


_COMMANDS = {
    "index": cmd_index,
    "query": cmd_query,
    "status": cmd_status,
    "show": cmd_show,
    "history": cmd_history,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
}


def _entry() -> None:  # pragma: no cover - console script shim
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    _entry()
