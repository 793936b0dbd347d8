"""Benchmarks: ``python -m backstory.evaluation.bench REPO [--runs N] [--dense N]``.

Measures, side by side in one run on the same machine: ``git log -p --no-merges`` (the reference), the
history reader alone and the BM25 index phase, each without and with symbols (alternating run by run; wall and
CPU time of all processes), query and symbol-history latency (``--queries 0``: none), the dense phase and
full-pipeline latency, and index size. Prints JSON (and writes it with ``--out``).
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

from ..history.libgit import walk
from ..history.repo import head_sha, open_repo
from ..index.build import BuildOptions, index_repository


def emit(report: dict[str, Any], out: str | None) -> None:
    """Print a benchmark/evaluation report as JSON, and save it when asked (shared by the bench commands)."""
    text = json.dumps(report, indent=2)
    if out:
        Path(out).write_text(text + "\n")
    print(text)


def _cpu_seconds() -> float:
    """User + system time of this process and of its finished children (the reader processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _median_time(fn: Any, runs: int) -> float:
    return _alternate({"": fn}, runs)[""][0]


def _alternate(fns: dict[str, Any], runs: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each function, over ``runs`` rounds in which every function runs once in
    turn: on a shared machine a change of load hits all of them alike. CPU time counts every process (the
    writer and its reader processes); it is the steadier measure, while the wall time of a phase also depends on
    how well its processes overlap on the cores."""
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            c = _cpu_seconds()
            t = time.perf_counter()
            fn()
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(_cpu_seconds() - c)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fns}


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


def reader_seconds(repo_path: Path, runs: int) -> tuple[dict[str, tuple[float, float]], int]:
    """The history reader alone (its processes, no index), without and with symbols: (wall, CPU) by name."""
    from ..history.policy import PathPolicy
    from ..index.parallel import read_all

    repo = open_repo(repo_path)
    todo = list(walk(repo, head_sha(repo)))
    hunks = [0]

    def go(symbols: bool) -> None:
        hunks[0] = sum(
            sum(len(f.hunks) for f in item.files) for item in read_all(repo, todo, PathPolicy(), symbols)
            if hasattr(item, "files")
        )  # fmt: skip

    return _alternate({"reader_s": lambda: go(False), "reader_symbols_s": lambda: go(True)}, runs), hunks[0]


def index_seconds(repo_path: Path, runs: int, keep: Path) -> dict[str, tuple[float, float]]:
    """The BM25 index phase from scratch, without and with symbols; the last index with symbols is kept."""

    def go(symbols: bool) -> None:
        d = Path(tempfile.mkdtemp(prefix="backstory-bench-"))
        index_repository(repo_path, options=BuildOptions(symbols=symbols), index_dir=d)
        if symbols:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.move(str(d), str(keep))
        else:
            shutil.rmtree(d, ignore_errors=True)

    return _alternate({"index_bm25_s": lambda: go(False), "index_bm25_symbols_s": lambda: go(True)}, runs)


def sample_queries(repo_path: Path, n: int, seed: int = 7) -> list[str]:
    repo = open_repo(repo_path)
    subjects = sorted({c.subject for c in walk(repo, head_sha(repo)) if not c.is_merge and len(c.subject.split()) >= 3})
    random.Random(seed).shuffle(subjects)
    return subjects[:n]


def latency(fn: Any, items: list[Any], warm: int = 3) -> dict[str, Any]:
    for x in items[:warm]:
        fn(x)
    times = []
    for x in items:
        t = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t) * 1000)
    return {
        "p50_ms": round(_pct(times, 50), 2),
        "p95_ms": round(_pct(times, 95), 2),
        "n": len(times),
        "samples_ms": [round(t, 2) for t in times],  # every query, for the latency plot (evaluation/plots.py)
    }


def history_positions(engine: Any, n: int, seed: int = 11) -> list[Any]:
    from .. import symbols
    from ..features.locate import Position, head_blob

    repo = engine.repo
    tree = repo[repo[head_sha(repo).encode()].tree]
    files = [
        p.decode("utf-8", "replace") for p, _m, _s in repo.object_store.iter_tree_contents(tree.id)
        if symbols.language_for_path(p.decode("utf-8", "replace")) in symbols.supported_languages()
    ]  # fmt: skip
    files.sort()
    rnd = random.Random(seed)
    rnd.shuffle(files)
    positions: list[Position] = []
    for f in files:
        defs = symbols.extract_definitions(head_blob(engine, f), symbols.language_for_path(f) or "") or []
        for d in defs[:3]:
            positions.append(Position(f, d.start_line))
        if len(positions) >= n:
            break
    return positions[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.bench")
    ap.add_argument("repo")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--dense", type=int, default=0, help="also embed up to N file units and time dense queries")
    ap.add_argument("--out", help="write JSON results here")
    args = ap.parse_args(argv)
    repo_path = Path(args.repo).resolve()
    load_before = round(os.getloadavg()[0], 2)
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
    # the two configurations of each phase alternate run by run, so a change of load hits both alike
    timed, res["hunks"] = reader_seconds(repo_path, args.runs)
    keep = Path(tempfile.mkdtemp(prefix="backstory-bench-keep-")) / "index"
    timed |= index_seconds(repo_path, args.runs, keep)
    for key, (wall, cpu) in timed.items():
        res[key] = round(wall, 3)
        res[key[:-2] + "_cpu_s"] = round(cpu, 2)  # user + system time of the writer and its reader processes
    n = res["commits"]
    for key in ("reader_s", "reader_symbols_s", "index_bm25_s", "index_bm25_symbols_s"):
        res[key[:-2] + "_commits_per_s"] = round(n / res[key], 1)
        if res["git_log_p_s"]:
            res[key[:-2] + "_ratio_to_git"] = round(res["git_log_p_s"] / res[key], 3)
    res["index_hunks_per_s"] = round(res["hunks"] / res["index_bm25_symbols_s"], 1)
    res["symbols_overhead"] = round(res["index_bm25_symbols_s"] / res["index_bm25_s"] - 1, 3)
    res["symbols_overhead_cpu"] = round(res["index_bm25_symbols_cpu_s"] / res["index_bm25_cpu_s"] - 1, 3)
    res["reader_symbols_overhead"] = round(res["reader_symbols_s"] / res["reader_s"] - 1, 3)
    res["load_average"] = [load_before, round(os.getloadavg()[0], 2)]  # 1-minute load before and after

    from ..features.exact_history import symbol_history
    from ..search.engine import Engine
    from ..search.options import TEXT_LANES, ModelConfig, SearchOptions

    engine = Engine(repo_path, keep, ModelConfig(dense=False, reranker="none"))
    queries = sample_queries(repo_path, args.queries)
    bm25 = SearchOptions(rerank=False, lanes=TEXT_LANES)
    if queries:  # --queries 0: indexing only
        res["query_bm25"] = latency(lambda q: engine.search(q, bm25), queries)
        res["history"] = latency(lambda p: symbol_history(engine, p), history_positions(engine, args.queries))
    res["index_size_mb"] = round(engine.store.size_bytes() / 1e6, 1)
    if args.dense:
        from ..index.dense_build import embed_pending
        from ..models import Embedder, resolve_model

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
        if queries:
            res["query_fused_no_rerank"] = latency(lambda q: full.search(q, SearchOptions(rerank=False)), queries)
            # key kept for comparison with earlier runs: since the tenth session the candidates are the top 20 plus
            # the dense lane's top 10 that fusion ranked lower (SearchOptions.dense_pool)
            res["query_fused_rerank20"] = latency(lambda q: full.search(q, SearchOptions(rerank_top=20)), queries)
            # the same without the learned second stage (rerank + 0.5 x fused), to show what it costs
            blend = SearchOptions(rerank_top=20, second_stage="blend")
            res["query_fused_rerank20_blend"] = latency(lambda q: full.search(q, blend), queries)
    res["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    shutil.rmtree(keep.parent, ignore_errors=True)
    emit(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
