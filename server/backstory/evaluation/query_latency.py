"""Search latency on an index built before: ``python -m backstory.evaluation.query_latency REPO [--index-dir D]
[--queries 20] [--rounds 5] [--compare CHECKOUT [--compare-index-dir D2]] [--stage-rounds N] [--out F]``.

Why a command of its own: the search target (p50 / p95 of the default pipeline: keyword, dense and message lanes,
MaxSim rerank, learned second stage) is measured on git/git's index with embeddings, which takes over an hour to
build, so it is built once and measured many times. On a 2-core machine one process's figures move by 15-25 %
from round to round with the load and the page cache, so each round runs in a fresh process (warmed by its first
three queries, as the scale benchmark's), and the report gives every round and the median of rounds.

``--compare CHECKOUT`` alternates rounds with another checkout's ``server/`` on the same index (before and
after a change, the same load for both), or on an index of its own (``--compare-index-dir``: a copy of the
index as that checkout left it, when the change is in what an index run stores); the program a round runs uses
only the engine's public API, so an older checkout can be measured too. Every round's results (commit, score,
why) are compared: the same index and queries must give the same results (deterministic), and a change meant
not to alter ranking shows that it did not. ``--stage-rounds N`` adds rounds that time the search's main steps
(keyword lanes, the dense lanes, the candidates' texts, the rerank), to say where a change took its time from.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from .bench import emit
from .procs import machine

SERVER = Path(__file__).resolve().parents[2]  # this checkout's server/ (the package's parent)

#: one round, in a fresh process: argv = repo, index dir (or ""), number of queries; prints one JSON line
ROUND = """
import hashlib, json, sys, time
from pathlib import Path
import backstory
from backstory.evaluation.bench import latency, sample_queries
from backstory.search.engine import Engine
from backstory.search.options import SearchOptions
repo, index_dir, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
engine = Engine(repo, Path(index_dir) if index_dir else None)
queries = sample_queries(repo, n)
answers = []
def search(q):
    results = engine.search(q, SearchOptions())["results"]
    answers.append([[r["commit"]["sha"], r["score"], r["why"]] for r in results])
timed = latency(search, queries)
digest = hashlib.sha256(json.dumps(answers[3:], sort_keys=True).encode()).hexdigest()
print(json.dumps({"p50_ms": timed["p50_ms"], "p95_ms": timed["p95_ms"], "results_sha256": digest,
                  "imported": str(Path(backstory.__file__).resolve().parents[1]),
                  "index": str(engine.store.path.resolve())}))
"""

#: a round of stage timings (``--stage-rounds``): the same searches with the main steps' functions wrapped in a
#: timer (so its total is a little slower than a plain round's); per search, the time spent in each, then the
#: medians over the searches. Steps a checkout does not have are left out.
STAGES = """
import functools, importlib, json, statistics, sys, time
from pathlib import Path
import backstory
from backstory.evaluation.bench import sample_queries
from backstory.search.engine import Engine
from backstory.search.options import SearchOptions
repo, index_dir, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
spent = {}
def wrap(owner, attr, name, by_lane=False):
    f = getattr(owner, attr, None)
    if f is None:
        return
    @functools.wraps(f)
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            key = f"{name} {k.get('lane', a[2] if len(a) > 2 else '?')}" if by_lane else name
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - t
    setattr(owner, attr, timed)
lanes = importlib.import_module("backstory.search.lanes")
wrap(lanes, "search_lane", "keyword lane", by_lane=True)
if hasattr(lanes, "message_index"):
    wrap(lanes.message_index, "search", "message lane (one document a commit)")
wrap(importlib.import_module("backstory.search.features"), "commit_tokens", "candidates' texts")
wrap(importlib.import_module("backstory.search.dense").DenseLane, "rank", "dense lane")
wrap(importlib.import_module("backstory.search.message_lane").MessageLane, "rank", "message_dense lane")
wrap(importlib.import_module("backstory.search.rerank").Rerank, "scores", "MaxSim rerank")
engine = Engine(repo, Path(index_dir) if index_dir else None)
per = []
for i, q in enumerate(sample_queries(repo, n)):
    spent.clear()
    t = time.perf_counter()
    engine.search(q, SearchOptions())
    total = time.perf_counter() - t
    cache = getattr(getattr(engine, "ordering", None), "texts", None)
    if cache is not None:  # each search reads its candidates' texts, as a first search of them would
        cache.clear()
    if i >= 3:
        per.append({**spent, "whole search": total})
names = sorted({k for p in per for k in p})
print(json.dumps({"ms": {k: round(statistics.median([p.get(k, 0.0) for p in per]) * 1000, 2) for k in names},
                  "imported": str(Path(backstory.__file__).resolve().parents[1])}))
"""


def run_round(server: Path, repo: Path, index_dir: Path | None, queries: int, program: str = ROUND) -> dict[str, Any]:
    """One round's p50 / p95, a digest of its results and where the package came from (``imported``: ``server``
    itself, or the measurement would be of other code), measured in a new process importing ``server``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(server), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    args = [sys.executable, "-c", program, str(repo), str(index_dir or ""), str(queries)]
    # run from ``server``: ``-c`` puts the working directory first on the path, which must not be another checkout
    done = subprocess.run(args, env=env, cwd=server, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a round failed ({server}):\n{done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["imported"]) != server.resolve():
        raise SystemExit(f"a round meant for {server} imported backstory from {result['imported']}")
    return result


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the rounds' p50 and p95, their ranges, and whether every round gave the same results."""
    p50 = [r["p50_ms"] for r in rounds]
    p95 = [r["p95_ms"] for r in rounds]
    return {
        "p50_ms_median_of_rounds": round(statistics.median(p50), 1),
        "p95_ms_median_of_rounds": round(statistics.median(p95), 1),
        "p50_ms_range": [min(p50), max(p50)],
        "p95_ms_range": [min(p95), max(p95)],
        "rounds_identical": len({r["results_sha256"] for r in rounds}) == 1,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.query_latency")
    ap.add_argument("repo", help="an indexed repository")
    ap.add_argument("--index-dir", help="its index, when not in the repository's .git/backstory")
    ap.add_argument(
        "--queries", type=int, default=20, help="commit subjects sampled from the history (the first 3 warm)"
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", help="another checkout (its server/ is imported), alternated round by round")
    ap.add_argument("--compare-index-dir", help="the compared checkout's own copy of the index (default: the same)")
    ap.add_argument("--stage-rounds", type=int, default=0, help="then this many rounds timing the search's main steps")
    ap.add_argument("--out", help="write the JSON report here")
    args = ap.parse_args(argv)
    repo = Path(args.repo).resolve()
    index_dir = Path(args.index_dir).resolve() if args.index_dir else None
    arms = {"this checkout": SERVER}
    indexes = {"this checkout": index_dir}
    if args.compare:
        arms = {"compared": Path(args.compare).resolve() / "server", **arms}
        indexes["compared"] = Path(args.compare_index_dir).resolve() if args.compare_index_dir else index_dir
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
    for i in range(args.rounds):
        order = list(arms.items())
        for name, server in order if i % 2 == 0 else order[::-1]:  # neither arm always runs first
            rounds[name].append(run_round(server, repo, indexes[name], args.queries))
            r = rounds[name][-1]
            print(f"round {i + 1} {name}: p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms", file=sys.stderr)
    stages: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    for i in range(args.stage_rounds):
        order = list(arms.items())
        for name, server in order if i % 2 == 0 else order[::-1]:
            stages[name].append(run_round(server, repo, indexes[name], args.queries, STAGES)["ms"])
            print(f"stage round {i + 1} {name}: {stages[name][-1]}", file=sys.stderr)
    digests = {r["results_sha256"] for rs in rounds.values() for r in rs}
    report = {
        "repo": str(repo), "index_dirs": {name: str(d) if d else None for name, d in indexes.items()},
        "machine": machine(),
        "load_average": os.getloadavg()[0], "queries": args.queries, "warm_queries": 3,
        "pipeline": "default SearchOptions (every lane the index has, MaxSim rerank, learned second stage)",
        "arms": {name: str(server) for name, server in arms.items()},
        "summary": {name: summary(rs) for name, rs in rounds.items()},
        "results_identical_across_arms": len(digests) == 1,
        "results_sha256": hashlib.sha256("".join(sorted(digests)).encode()).hexdigest()[:16],
        "rounds": rounds,
        "stage_rounds_ms": stages if args.stage_rounds else None,
    }  # fmt: skip
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
