"""Benchmarks: ``python -m backstory.bench REPO [--runs N] [--dense N]``.

Measures, side by side in one run on the same machine: ``git log -p --no-merges`` (the reference), the
history reader alone, the BM25 index phase with and without symbols, query and symbol-history latency, the dense
phase and full-pipeline latency, and index size. Prints a markdown table and writes JSON next to it.
Medians of ``--runs`` runs; nothing here asserts: numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .history.repo import head_sha, open_repo, walk
from .index.build import BuildOptions, index_repository


def emit(report: dict[str, Any], out: str | None) -> None:
    """Print a benchmark/evaluation report as JSON, and save it when asked (shared by the bench commands)."""
    text = json.dumps(report, indent=2)
    if out:
        Path(out).write_text(text + "\n")
    print(text)


def _median_time(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def git_log_seconds(repo: Path, runs: int) -> float | None:
    if shutil.which("git") is None:
        return None
    return _median_time(
        lambda: subprocess.run(
            ["git", "-C", str(repo), "log", "-p", "--no-merges"], stdout=subprocess.DEVNULL, check=True
        ),
        runs,
    )


def reader_seconds(repo_path: Path, runs: int, symbols: bool) -> tuple[float, int]:
    from .history.policy import PathPolicy
    from .index.parallel import read_all

    repo = open_repo(repo_path)
    todo = list(walk(repo, head_sha(repo)))
    hunks = [0]

    def go() -> None:
        hunks[0] = sum(
            sum(len(f.hunks) for f in item.files) for item in read_all(repo, todo, PathPolicy(), symbols)
            if hasattr(item, "files")
        )  # fmt: skip

    return _median_time(go, runs), hunks[0]


def index_seconds(repo_path: Path, runs: int, symbols: bool, keep: Path | None) -> tuple[float, int, int]:
    times, commits, hunks = [], 0, 0
    for i in range(runs):
        d = Path(tempfile.mkdtemp(prefix="backstory-bench-"))
        t = time.perf_counter()
        report = index_repository(repo_path, options=BuildOptions(symbols=symbols), index_dir=d)
        times.append(time.perf_counter() - t)
        commits, hunks = report.new_commits, report.hunks
        if keep is not None and i == runs - 1:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.move(str(d), str(keep))
        else:
            shutil.rmtree(d, ignore_errors=True)
    return statistics.median(times), commits, hunks


def sample_queries(repo_path: Path, n: int, seed: int = 7) -> list[str]:
    repo = open_repo(repo_path)
    subjects = sorted({c.subject for c in walk(repo, head_sha(repo)) if not c.is_merge and len(c.subject.split()) >= 3})
    random.Random(seed).shuffle(subjects)
    return subjects[:n]


def latency(fn: Any, items: list[Any], warm: int = 3) -> dict[str, float]:
    for x in items[:warm]:
        fn(x)
    times = []
    for x in items:
        t = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": round(_pct(times, 50), 2), "p95_ms": round(_pct(times, 95), 2), "n": len(times)}


def history_positions(engine: Any, n: int, seed: int = 11) -> list[str]:
    from . import symbols
    from .symbols_history import head_blob

    repo = engine.repo
    tree = repo[repo[head_sha(repo).encode()].tree]
    files = [
        p.decode("utf-8", "replace") for p, _m, _s in repo.object_store.iter_tree_contents(tree.id)
        if symbols.language_for_path(p.decode("utf-8", "replace")) in symbols.supported_languages()
    ]  # fmt: skip
    files.sort()
    rnd = random.Random(seed)
    rnd.shuffle(files)
    positions: list[str] = []
    for f in files:
        defs = symbols.extract_definitions(head_blob(engine, f), symbols.language_for_path(f) or "") or []
        for d in defs[:3]:
            positions.append(f"{f}:{d.start_line}")
        if len(positions) >= n:
            break
    return positions[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.bench")
    ap.add_argument("repo")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--dense", type=int, default=0, help="also embed up to N file units and time dense queries")
    ap.add_argument("--out", help="write JSON results here")
    args = ap.parse_args(argv)
    repo_path = Path(args.repo).resolve()
    repo = open_repo(repo_path)
    commits = list(walk(repo, head_sha(repo)))
    res: dict[str, Any] = {
        "repo": str(repo_path),
        "commits": len(commits),
        "non_merge_commits": sum(1 for c in commits if not c.is_merge),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "runs": args.runs,
    }
    res["git_log_p_s"] = git_log_seconds(repo_path, args.runs)
    res["reader_s"], res["hunks"] = reader_seconds(repo_path, args.runs, symbols=False)
    res["reader_symbols_s"], _ = reader_seconds(repo_path, args.runs, symbols=True)
    res["index_bm25_s"], _, _ = index_seconds(repo_path, args.runs, symbols=False, keep=None)
    keep = Path(tempfile.mkdtemp(prefix="backstory-bench-keep-")) / "index"
    res["index_bm25_symbols_s"], _, _ = index_seconds(repo_path, args.runs, symbols=True, keep=keep)
    n = res["commits"]
    for key in ("reader_s", "reader_symbols_s", "index_bm25_s", "index_bm25_symbols_s"):
        res[key[:-2] + "_commits_per_s"] = round(n / res[key], 1)
        if res["git_log_p_s"]:
            res[key[:-2] + "_ratio_to_git"] = round(res["git_log_p_s"] / res[key], 3)
    res["index_hunks_per_s"] = round(res["hunks"] / res["index_bm25_symbols_s"], 1)
    res["symbols_overhead"] = round(res["index_bm25_symbols_s"] / res["index_bm25_s"] - 1, 3)

    from .search.engine import TEXT_LANES, Engine, ModelConfig, SearchOptions
    from .symbols_history import symbol_history

    engine = Engine(repo_path, keep, ModelConfig(dense=False, reranker="none"))
    queries = sample_queries(repo_path, args.queries)
    bm25 = SearchOptions(rerank=False, lanes=TEXT_LANES)
    res["query_bm25"] = latency(lambda q: engine.search(q, bm25), queries)
    res["history"] = latency(lambda p: symbol_history(engine, p), history_positions(engine, args.queries))
    res["index_size_mb"] = round(engine.store.size_bytes() / 1e6, 1)
    if args.dense:
        from .index.dense_build import embed_pending
        from .models import Embedder, resolve_model

        embedder = Embedder(resolve_model(None))
        embedder.embed(["warm up"])
        engine.store.db.execute(
            "UPDATE files SET embedded=2 WHERE fid NOT IN (SELECT fid FROM files ORDER BY author_time DESC LIMIT ?)",
            (args.dense,),
        )  # only the newest N units, the rest are set aside for this benchmark
        t = time.perf_counter()
        done = embed_pending(engine.store, embedder)
        res["dense_units"] = done
        res["dense_units_per_s"] = round(done / (time.perf_counter() - t), 1)
        full = Engine(repo_path, keep, ModelConfig(dense=True, reranker="maxsim"))
        res["query_fused_no_rerank"] = latency(lambda q: full.search(q, SearchOptions(rerank=False)), queries)
        res["query_fused_rerank20"] = latency(lambda q: full.search(q, SearchOptions(rerank_top=20)), queries)
    res["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    shutil.rmtree(keep.parent, ignore_errors=True)
    emit(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
