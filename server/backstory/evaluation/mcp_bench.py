"""MCP server benchmark: ``python -m backstory.evaluation.mcp_bench REPO [--calls N] [--index-dir DIR]``.

Starts ``backstory mcp -C REPO`` over stdio with the MCP SDK's own client (what an agent host runs), then
measures the time to the answered ``initialize``, to an index that is ready (history and embeddings; from
scratch when the index directory is new), the first call of each tool (models load), and then p50/p95 of each
tool over ``--calls`` calls, as the client sees them (JSON-RPC, validation, the work and both renderings):
``find_prior_art`` with a free-text query (commit subjects of the repository, k = 5), with a position (the
start of definitions at HEAD), ``symbol_history`` at the same positions, ``show_commit`` of the sampled commits
(400-line cap), and ``index_status``. With ``--commit-latency`` it also commits on a temporary branch of REPO
and times the first ``find_prior_art`` after ``git commit`` returns until it ranks that commit first (the
language server benchmark's procedure: the branch is deleted afterwards). Prints one JSON report, with the
machine it ran on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from .. import symbols
from .bench import emit, sample_queries
from .lsp_bench import commit_latency


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (milliseconds), rounded to 0.1 ms."""
    s = sorted(values)
    return round(s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))], 1)


def positions(repo: Path, n: int, seed: int = 5) -> list[tuple[str, int]]:
    """``n`` (path, line) pairs: the line after a definition's first, in files tracked at HEAD."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout
    files = sorted(f for f in listed.decode("utf-8", "replace").split("\0") if f)
    files = [f for f in files if symbols.language_for_path(f) in symbols.supported_languages()]
    random.Random(seed).shuffle(files)
    out: list[tuple[str, int]] = []
    for f in files:
        path = repo / f
        if not path.is_file():
            continue
        data = path.read_bytes()
        defs = symbols.extract_definitions(data, symbols.language_for_path(f) or "") or []
        out.extend((f, min(d.start_line + 1, d.end_line)) for d in defs[:3])
        if len(out) >= n:
            break
    return out[:n]


def revisions(repo: Path, n: int, seed: int = 9) -> list[str]:
    shas = subprocess.run(
        ["git", "log", "--no-merges", "--format=%h", "-n", "2000"], cwd=repo, capture_output=True, check=True, text=True
    ).stdout.split()
    random.Random(seed).shuffle(shas)
    return shas[:n]


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(), "system": platform.system()}


async def _timed(session: ClientSession, name: str, args: dict[str, Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    result = await session.call_tool(name, args)
    ms = (time.perf_counter() - t) * 1000
    if result.is_error:
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        raise RuntimeError(f"{name}({args}) failed: {text}")
    return ms, result.structured_content


async def run(repo: Path, calls: int, index_dir: str | None, timeout: float, commits: bool) -> dict[str, Any]:
    args = ["-m", "backstory", "mcp", "-C", str(repo), *(["--index-dir", index_dir] if index_dir else [])]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    report: dict[str, Any] = {"repo": str(repo), "machine": machine(), "calls_per_tool": calls}
    queries = sample_queries(repo, calls)
    where = positions(repo, calls)
    shas = revisions(repo, calls)
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        report["initialize_s"] = round(time.perf_counter() - started, 2)
        status: dict[str, Any] = {}
        while time.perf_counter() - started < timeout:
            _ms, status = await _timed(session, "index_status", {})
            if status["server"]["state"] == "ready" and status["index"].get("dense_coverage") == 1.0:
                break
            await asyncio.sleep(1.0)
        else:
            raise RuntimeError(f"the index was not ready within {timeout:.0f} s: {status}")
        report["ready_s"] = round(time.perf_counter() - started, 1)
        report["index"] = {k: status["index"].get(k) for k in ("indexed_commits", "dense_coverage")}
        report["index"].update({k: status.get(k) for k in ("hunks", "files", "size_bytes")})
        plan: dict[str, list[dict[str, Any]]] = {
            "find_prior_art (query)": [{"query": q, "k": 5} for q in queries],
            "find_prior_art (path+line)": [{"path": p, "line": n, "k": 5} for p, n in where],
            "symbol_history": [{"path": p, "line": n} for p, n in where],
            "show_commit": [{"revision": s} for s in shas],
            "index_status": [{} for _ in range(calls)],
        }
        first: dict[str, float] = {}
        tools: dict[str, Any] = {}
        for label, calls_ in plan.items():
            name = label.split(" ")[0]
            if not calls_:
                continue
            first[label] = round((await _timed(session, name, calls_[0]))[0], 1)
            times = [(await _timed(session, name, a))[0] for a in calls_]
            tools[label] = {
                "n": len(times), "p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95),
                "max_ms": round(max(times), 1),
            }  # fmt: skip
        report["first_call_ms"] = first
        report["tools"] = tools
        if commits:

            async def search(query: str) -> dict[str, Any]:
                return (await _timed(session, "find_prior_art", {"query": query, "k": 5}))[1]  # type: ignore[no-any-return]

            report["commit_to_first_hit"] = await commit_latency(repo, search)
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m backstory.evaluation.mcp_bench", description=__doc__)
    p.add_argument("repo", type=Path, help="a git repository with a work tree")
    p.add_argument("--calls", type=int, default=30, help="calls per tool (default 30)")
    p.add_argument("--index-dir", help="index location (default: the repository's own, as the server uses)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the index (default 3600)")
    p.add_argument("--commit-latency", action="store_true", help="commit on a temporary branch and time it")
    p.add_argument("--out", help="also write the JSON report here")
    a = p.parse_args(argv)
    emit(asyncio.run(run(a.repo.resolve(), a.calls, a.index_dir, a.timeout, a.commit_latency)), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
