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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .cli_parser import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NO_INDEX,
    EXIT_NO_RESULTS,
    EXIT_OK,
    EXIT_USAGE,
    build_parser,
)
from .history.repo import HistoryError
from .index.store import StoreError
from .search.when import BadDate


class UsageError(ValueError):
    """A value on the command line that cannot be used (exit 2)."""


class NoIndex(Exception):
    """The command needs an index and there is none yet (exit 3)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
