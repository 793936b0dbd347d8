"""Language-server benchmark: ``python -m backstory.evaluation.lsp_bench REPO [--queries N]``.

Starts ``backstory serve`` over stdio with a real pygls client, then measures: time from ``initialize`` to
the first answered search and to "ready" (history and dense phases done), hover p50/p95 (cold with prewarming
off, or, with ``--prewarm``, first hovers after the opened documents were prewarmed; then cached),
findPriorArt p50/p95 with and without rerank, and the server's RSS after indexing. With ``--during`` it also
searches and hovers once a second while the history indexes, timing each answer by indexing phase, and samples
the server's own RSS (the indexing child apart) until the index is ready. With ``--commit-latency`` it
also commits on a temporary branch of REPO and times how long until that commit is searchable (then checks the
original branch out again and deletes the temporary one; the next indexing run purges the commit).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from .. import symbols
from ..lsp.server import IDLE_SECONDS
from .bench import emit, sample_queries
from .procs import proc_kb, rss_by_mapping, tree_pids


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))], 2)


def _positions(repo: Path, n: int, seed: int = 5) -> list[tuple[Path, int, int]]:
    files = sorted(p for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
                   and symbols.language_for_path(p.name) in symbols.supported_languages())  # fmt: skip
    random.Random(seed).shuffle(files)
    out: list[tuple[Path, int, int]] = []
    for f in files:
        text = f.read_bytes()
        for d in (symbols.extract_definitions(text, symbols.language_for_path(f.name) or "") or [])[:4]:
            line = text.split(b"\n")[d.start_line - 1].decode("utf-8", "replace")
            col = line.find(d.short_name)
            if col >= 0:
                out.append((f, d.start_line - 1, col + 1))
        if len(out) >= n:
            break
    return out[:n]


def _rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """A process's resident memory in MiB (``RssAnon``: its own heap, not files mapped in), None once it is gone."""
    rss = proc_kb(pid, field)
    return round(rss / 1024 / 1024, 1) if rss else None


async def _during_indexing(pid: int | None, cmd: Any, hover: Any, queries: list[str], positions: list[Any]) -> dict:
    """Until the server says "ready": one search and one hover a second, timed and labelled with the phase the
    server reported just before; the server's RSS and its children's (the indexing job) sampled meanwhile."""
    samples: dict[str, dict[str, list[float]]] = {}
    peak = {"server_rss_mb": 0.0, "children_rss_mb": 0.0}
    answered = {"search": 0, "hover": 0}
    k = 0
    t0 = time.perf_counter()
    while True:
        status = (await cmd("backstory.status", {}))["server"]
        if pid is not None:
            peak["server_rss_mb"] = max(peak["server_rss_mb"], _rss_mb(pid) or 0.0)
            kids = sum(_rss_mb(c) or 0.0 for c in tree_pids(pid) if c != pid)
            peak["children_rss_mb"] = max(peak["children_rss_mb"], round(kids, 1))
        if status.get("state") == "ready":
            break
        phase = str(status.get("phase") or status.get("state"))
        bucket = samples.setdefault(phase, {"search": [], "hover": []})
        t = time.perf_counter()
        r = await cmd("backstory.search", {"query": queries[k % len(queries)], "rerank": False})
        bucket["search"].append((time.perf_counter() - t) * 1000)
        answered["search"] += bool(r.get("results"))
        if positions:
            t = time.perf_counter()
            h = await hover(positions[k % len(positions)])
            bucket["hover"].append((time.perf_counter() - t) * 1000)
            answered["hover"] += h is not None
        k += 1
        await asyncio.sleep(1.0)
    phases = {
        phase: {kind: {"n": len(v), "p50_ms": _pct(v, 50), "p95_ms": _pct(v, 95)} for kind, v in kinds.items() if v}
        for phase, kinds in samples.items()
    }
    return {"seconds": round(time.perf_counter() - t0, 1), "answered": answered, "by_phase": phases, **peak}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


async def commit_latency(repo: Path, search: Any, runs: int = 3) -> dict[str, Any]:
    """Seconds from ``git commit`` returning to the commit being the top search hit (HEAD watcher + indexing)."""
    original = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    if original == "HEAD":
        original = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "backstory-bench-tmp")
    times: list[float] = []
    try:
        for i in range(runs):
            token = f"zqxbench{i}{int(time.time())}"
            (repo / "backstory_bench_tmp.py").write_text(f"def {token}_handler():\n    return '{token}'\n")
            _git(repo, "add", "backstory_bench_tmp.py")
            _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m",
                 f"Bench commit {token}")  # fmt: skip
            sha = _git(repo, "rev-parse", "HEAD")
            t = time.perf_counter()
            while time.perf_counter() - t < 60:
                r = await search(token)
                if r.get("results") and r["results"][0]["commit"]["sha"] == sha:
                    break
                await asyncio.sleep(0.05)
            times.append(time.perf_counter() - t)
    finally:
        _git(repo, "checkout", "-q", original)
        _git(repo, "branch", "-q", "-D", "backstory-bench-tmp")
    return {"runs_s": [round(x, 2) for x in times], "median_s": round(statistics.median(times), 2)}


async def run(
    repo: Path,
    n: int,
    index_dir: str | None,
    measure_commit: bool = False,
    prewarm: bool = False,
    during: bool = False,
    dense: bool = True,
) -> dict[str, Any]:
    client = LanguageClient("backstory-bench", "1")
    statuses: list[dict[str, Any]] = []
    client.feature("backstory/status")(lambda params: statuses.append(params))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda params: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    res: dict[str, Any] = {"repo": str(repo)}
    t0 = time.perf_counter()
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    options: dict[str, Any] = {"hoverPrewarm": prewarm, "dense": dense}
    if index_dir:
        options["indexDir"] = index_dir
    await client.initialize_async(
        types.InitializeParams(capabilities=caps, root_uri=repo.as_uri(), initialization_options=options)
    )
    client.initialized(types.InitializedParams())
    queries = sample_queries(repo, n)

    async def cmd(name: str, arg: dict[str, Any]) -> Any:
        return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=[arg]))

    while True:
        r = await cmd("backstory.search", {"query": queries[0]})
        if r.get("results"):
            res["first_answer_s"] = round(time.perf_counter() - t0, 2)
            break
        await asyncio.sleep(0.2)
    positions = _positions(repo, n)
    for path, _line, _col in {p[0]: p for p in positions}.values():
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=path.as_uri(), language_id="x", version=1, text=path.read_text("utf-8", "replace"))))  # fmt: skip

    async def hover(p: tuple[Path, int, int]) -> Any:
        doc = types.TextDocumentIdentifier(uri=p[0].as_uri())
        pos = types.Position(line=p[1], character=p[2])
        return await client.text_document_hover_async(types.HoverParams(text_document=doc, position=pos))

    pid = client._server.pid if client._server else None  # type: ignore[attr-defined]
    if during:
        res["during_indexing"] = await _during_indexing(pid, cmd, hover, queries, positions)
    while True:
        status = await cmd("backstory.status", {})
        if status.get("server", {}).get("state") == "ready":
            res["ready_s"] = round(time.perf_counter() - t0, 2)
            break
        await asyncio.sleep(0.5)
    res["indexed_commits"] = status["index"]["indexed_commits"]
    res["dense_coverage"] = status["index"].get("dense_coverage")

    async def timed(coro_fn: Any, items: list[Any]) -> dict[str, float]:
        times = []
        for it in items:
            t = time.perf_counter()
            await coro_fn(it)
            times.append((time.perf_counter() - t) * 1000)
        return {"p50_ms": _pct(times, 50), "p95_ms": _pct(times, 95), "mean_ms": round(statistics.mean(times), 2)}

    if prewarm:  # let the background prewarm of the opened documents finish, as a reader would
        t, last = time.perf_counter(), -1
        while (cached := (await cmd("backstory.status", {}))["server"]["hovers_cached"]) != last:
            last = cached
            await asyncio.sleep(1.0)
        res["prewarm"] = {"hovers_cached": cached, "seconds": round(time.perf_counter() - t - 1.0, 2)}
    res["hover_first" if prewarm else "hover_cold"] = await timed(hover, positions)
    res["hover_cached"] = await timed(hover, positions)

    def prior(rerank: bool) -> Any:
        return lambda p: cmd(
            "backstory.findPriorArt",
            {"uri": p[0].as_uri(), "position": {"line": p[1], "character": p[2]}, "rerank": rerank},
        )

    res["find_prior_art_no_rerank"] = await timed(prior(False), positions)
    res["find_prior_art_rerank"] = await timed(prior(True), positions)
    res["search_rerank"] = await timed(lambda q: cmd("backstory.search", {"query": q}), queries)
    if measure_commit:
        res["commit_to_searchable"] = await commit_latency(
            repo, lambda q: cmd("backstory.search", {"query": q, "rerank": False})
        )
    res["server_rss_mb"] = _rss_mb(pid) if pid else None
    if pid:  # the part of it that is the server's own heap, not index files' pages mapped in (Tantivy's mmap)
        res["server_rss_anon_mb"] = _rss_mb(pid, "RssAnon")
        res["server_rss_by_mapping_mb"] = rss_by_mapping(pid)
        await asyncio.sleep(IDLE_SECONDS * 2.5)  # quiet: the server gives its free heap back (lsp.server)
        res["server_rss_quiet_mb"] = _rss_mb(pid)
        res["server_rss_quiet_anon_mb"] = _rss_mb(pid, "RssAnon")
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.lsp_bench")
    ap.add_argument("repo")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--index-dir")
    ap.add_argument("--out")
    ap.add_argument("--commit-latency", action="store_true", help="commit on a temporary branch and time it")
    ap.add_argument("--prewarm", action="store_true", help="let hover prewarming run before the first hovers")
    ap.add_argument("--during", action="store_true", help="search and hover while the history indexes")
    ap.add_argument("--no-dense", action="store_true", help="the server's dense option off (keyword lanes only)")
    args = ap.parse_args(argv)
    report = asyncio.run(
        run(
            Path(args.repo).resolve(),
            args.queries,
            args.index_dir,
            args.commit_latency,
            args.prewarm,
            during=args.during,
            dense=not args.no_dense,
        )
    )
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
