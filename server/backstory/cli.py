"""Command line: ``backstory index|query|status|show|history|serve``.

Every command prints human text by default and the documented JSON with ``--json``. Errors the user can fix
print one line on stderr and exit 1 (2 for usage errors); nothing is written to the index on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .history.repo import HistoryError
from .index.progress import PHASES
from .index.store import StoreError
from .search.fusion import FUSION_METHODS
from .search.when import BadDate

EXIT_ERROR = 1


class ProgressBar:
    """``commits done/total, rate, ETA`` on a TTY; silent otherwise so logs and pipes stay clean."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.phase: str | None = None
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if phase != self.phase:
            if self.phase is not None:
                self.stream.write("\n")
            self.phase, self.started = phase, now
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-6)
        eta = (total - done) / rate if rate > 0 else 0
        unit = PHASES.get(phase, ("", "items"))[1]
        self.stream.write(
            f"\r{phase:8} {done:>7,}/{total:,} {unit}  {rate:7.1f}/s  ETA {int(eta) // 60}:{int(eta) % 60:02d} "
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.phase is not None:
            self.stream.write("\n")
            self.stream.flush()


SECOND_STAGES = ("learned", "blend")  # = search.engine.SECOND_STAGES (tested); importing the engine costs 0.25 s
DENSE_POOL = 10  # = search.engine.SearchOptions.dense_pool (tested)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="backstory", description="Find prior art in a repository's git history.")
    p.add_argument("--version", action="version", version=f"backstory {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, repo_positional: bool = False) -> None:
        if not repo_positional:
            sp.add_argument("-C", "--repo", default=".", help="repository (or a path inside it); default: .")
        sp.add_argument("--index-dir", help="index location (default: <git dir>/backstory)")

    ix = sub.add_parser("index", help="index (or update the index of) a repository's history")
    ix.add_argument("path", nargs="?", default=".")
    common(ix, repo_positional=True)
    ix.add_argument("--rebuild", action="store_true", help="discard the index and build it again")
    ix.add_argument("--no-messages", action="store_true", help="leave commit messages out of every lane")
    ix.add_argument("--no-dense", action="store_true", help="skip the embedding phase")
    ix.add_argument("--no-symbols", action="store_true", help="skip tree-sitter symbol attribution")
    ix.add_argument("--max-file-bytes", type=int, default=1_000_000)
    ix.add_argument("--model", help="directory with model.onnx + tokenizer.json (default: bundled)")
    ix.add_argument("--wait", type=float, default=0.0, help="wait this long for another indexer to finish")
    ix.add_argument("--json", action="store_true")

    q = sub.add_parser("query", help="search the indexed history")
    q.add_argument("text", nargs="?")
    common(q)
    q.add_argument("-k", type=int, default=10, help="number of commits (default 10)")
    q.add_argument("--since")
    q.add_argument("--until")
    q.add_argument("--path", help="path glob, e.g. 'src/**/*.py'")
    q.add_argument("--author", help="author name or email substring")
    q.add_argument("--language", help="language id, e.g. python")
    q.add_argument("--no-rerank", action="store_true")
    q.add_argument(
        "--fusion", choices=FUSION_METHODS, default=FUSION_METHODS[0],
        help="combine lanes by normalised scores (default) or by Reciprocal Rank Fusion (k = 60)",
    )  # fmt: skip
    q.add_argument(
        "--second-stage", choices=SECOND_STAGES, default=SECOND_STAGES[0],
        help="order the reranked candidates by the learned model (default) or by rerank + 0.5 x fused score",
    )  # fmt: skip
    q.add_argument(
        "--dense-pool", type=int, default=DENSE_POOL, metavar="N",
        help="also rerank the dense lane's top N commits that fusion ranked below the reranked top 20 (0 = none)",
    )  # fmt: skip
    q.add_argument("--reranker", choices=["maxsim", "cross-encoder", "none"], default=None)
    q.add_argument("--cross-encoder", help="directory with a cross-encoder model.onnx + tokenizer.json")
    q.add_argument("--model", help="directory with model.onnx + tokenizer.json (default: bundled)")
    q.add_argument("--no-dense", action="store_true")
    q.add_argument("--lanes", help="comma-separated subset of lanes (diff,message,path,symbol,dense)")
    q.add_argument("--at", help="PATH:LINE: prior art for the symbol at this position")
    q.add_argument(
        "--changes", nargs="?", const="", default=None, metavar="REV|REV..REV",
        help="prior art for a change: the uncommitted changes (default), a commit, or a range",
    )  # fmt: skip
    q.add_argument(
        "--hide-reverted", action="store_true", help="leave out commits that were reverted (and not re-applied)"
    )
    q.add_argument("--batch", help="file with one query per line ('-' = stdin); one JSON line out per query")
    q.add_argument("--json", action="store_true")

    st = sub.add_parser("status", help="what is indexed and how fresh it is")
    common(st)
    st.add_argument("--json", action="store_true")

    sh = sub.add_parser("show", help="a commit's message and diff")
    sh.add_argument("sha", metavar="REV", help="a sha (4+ hex digits), branch, tag or HEAD, with ~N / ^N steps")
    common(sh)
    sh.add_argument("--path", help="only this file")

    hi = sub.add_parser("history", help="exact history of the definition at PATH:LINE (like git log -L)")
    hi.add_argument("position", help="PATH:LINE")
    common(hi)
    hi.add_argument("--json", action="store_true")

    sv = sub.add_parser("serve", help="run the language server")
    sv.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    sv.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead, for debugging")

    mc = sub.add_parser("mcp", help="run the MCP server (stdio) for coding agents; see docs/mcp.md")
    common(mc)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(_COMMANDS[args.command](args) or 0)
    except (HistoryError, StoreError, BadDate, ValueError) as e:
        print(f"backstory: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(
            "backstory: interrupted; the index is consistent, run the command again to resume",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # a file the user pointed at is unusable (--index-dir on a file, no permission)
        where = f" {e.filename}" if e.filename else ""
        print(f"backstory: cannot use{where}: {e.strerror or e}", file=sys.stderr)
        return EXIT_ERROR


def _dump(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n")


def cmd_index(args: argparse.Namespace) -> int:
    from .index.build import BuildOptions
    from .index.job import run_index

    bar = ProgressBar(sys.stderr)
    opts = BuildOptions(no_messages=args.no_messages, symbols=not args.no_symbols, max_file_bytes=args.max_file_bytes)
    try:
        result = run_index(
            args.path, options=opts, index_dir=args.index_dir, rebuild=args.rebuild, dense=not args.no_dense,
            model_path=args.model, progress=bar, wait=args.wait,
        )  # fmt: skip
    finally:
        bar.close()
    report = result.report
    dense_note = f"dense phase skipped: {result.dense_note}" if result.dense_note else None
    if args.json:
        _dump({**report.__dict__, "embedded_files": result.embedded, "dense_note": dense_note})
    else:
        print(
            f"indexed {report.new_commits} new commit(s), {report.hunks} hunk(s) in {report.seconds:.1f}s; "
            f"purged {report.purged_commits}; embedded {result.embedded} file unit(s)"
        )
        if report.skipped:
            print("skipped files: " + ", ".join(f"{v} {k}" for k, v in sorted(report.skipped.items())))
        if dense_note:
            print(dense_note, file=sys.stderr)
    return 0


def _engine(args: argparse.Namespace) -> Any:
    from .search.engine import Engine
    from .search.options import ModelConfig

    cross_encoder = getattr(args, "cross_encoder", None)
    models = ModelConfig(
        model_path=getattr(args, "model", None),
        reranker=getattr(args, "reranker", None) or ("cross-encoder" if cross_encoder else "maxsim"),
        cross_encoder_dir=getattr(args, "cross_encoder", None),
        dense=not getattr(args, "no_dense", False),
    )  # fmt: skip
    return Engine(args.repo, args.index_dir, models)


def _search_options(args: argparse.Namespace) -> Any:
    from .index.text_index import Filters
    from .search.options import SearchOptions
    from .search.when import parse_when

    if args.k < 1:
        raise ValueError("-k must be at least 1")
    since = parse_when(args.since) if args.since else None
    until = parse_when(args.until, end_of_day=True) if args.until else None
    if since is not None and until is not None and since > until:
        raise ValueError(f"--since {args.since} is after --until {args.until}: no commit can match")
    language = args.language.strip().lower() if args.language else None
    if language is not None:
        from .symbols.languages import known_languages

        if language not in known_languages():
            raise ValueError(f"unknown language {args.language!r}; known: {', '.join(sorted(known_languages()))}")
    filters = Filters(since=since, until=until, path_glob=args.path, author=args.author, language=language)
    lanes = None
    if args.lanes:
        from .search.options import TEXT_LANES

        known = (*TEXT_LANES, "dense")
        lanes = tuple(x.strip() for x in args.lanes.split(",") if x.strip())
        unknown = [x for x in lanes if x not in known]
        if unknown or not lanes:
            raise ValueError(f"unknown lane(s) {', '.join(unknown) or '(none given)'}; lanes are {', '.join(known)}")
    if args.dense_pool < 0:
        raise ValueError(f"--dense-pool must be 0 or more, not {args.dense_pool}")
    return SearchOptions(
        k=args.k, filters=filters, rerank=not args.no_rerank, lanes=lanes, fusion=args.fusion,
        second_stage=args.second_stage, dense_pool=args.dense_pool, hide_reverted=args.hide_reverted,
    )  # fmt: skip


def cmd_query(args: argparse.Namespace) -> int:
    opts = _search_options(args)
    with _engine(args) as engine:
        return _query(engine, args, opts)


def _query(engine: Any, args: argparse.Namespace, opts: Any) -> int:
    from .views.text import print_results

    if args.batch:
        try:
            src = sys.stdin if args.batch == "-" else open(args.batch, encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            raise ValueError(f"cannot read the query file {args.batch}: {e.strerror or e}") from None
        with src:
            for line in src:
                text = line.rstrip("\n")
                _dump(engine.search(text, opts) if text.strip() else {"query": text, "results": [], "_meta": {}})
                sys.stdout.flush()
        return 0
    if args.changes is not None:
        from .features.changes import prior_art_for_changes

        result = prior_art_for_changes(engine, opts, args.changes or None)
    elif args.at:
        from .features.prior_art import prior_art

        result = prior_art(engine, _position(engine, args.at), opts)
    else:
        if not args.text or not args.text.strip():
            raise ValueError("give a query text, --at PATH:LINE or --batch FILE")
        result = engine.search(args.text, opts)
    if args.json:
        _dump(result)
    else:
        print_results(result, sys.stdout)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .models.cache import cache_report
    from .views.text import print_status

    with _engine(args) as engine:
        status = engine.status()
    status["model_cache"] = cache_report()
    if args.json:
        _dump(status)
    else:
        print_status(status, sys.stdout)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from .features.show_commit import show

    with _engine(args) as engine:
        sys.stdout.write(show(engine, args.sha, args.path).text)
    return 0


def _position(engine: Any, spec: str) -> Any:
    """``PATH:LINE`` from the command line: PATH relative to the current directory (or to the repository's
    root), or absolute."""
    from .features.locate import parse_position

    return parse_position(spec, engine.root, bases=(Path.cwd(), engine.root))


def cmd_history(args: argparse.Namespace) -> int:
    from .features.exact_history import symbol_history
    from .views.text import print_history

    with _engine(args) as engine:
        result = symbol_history(engine, _position(engine, args.position))
    if args.json:
        _dump(result)
    else:
        print_history(result, sys.stdout)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .lsp.server import run

    run(tcp=args.tcp)
    return 0


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
