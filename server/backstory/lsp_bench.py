"""Language-server benchmark: ``python -m backstory.lsp_bench REPO [--queries N]``.

Starts ``backstory serve`` over stdio with a real pygls client, then measures: time from ``initialize`` to
the first answered search and to "ready" (history and dense phases done), hover p50/p95 (cold and cached),
findPriorArt p50/p95 with and without rerank, and the server's RSS after indexing.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from . import symbols
from .bench import emit, sample_queries


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


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


async def run(repo: Path, n: int, index_dir: str | None) -> dict[str, Any]:
    client = LanguageClient("backstory-bench", "1")
    statuses: list[dict[str, Any]] = []
    client.feature("backstory/status")(lambda params: statuses.append(params))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda params: None)
    await client.start_io(sys.executable, "-m", "backstory", "serve")
    res: dict[str, Any] = {"repo": str(repo)}
    t0 = time.perf_counter()
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    options = {"indexDir": index_dir} if index_dir else {}
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
    while True:
        status = await cmd("backstory.status", {})
        if status.get("server", {}).get("state") == "ready":
            res["ready_s"] = round(time.perf_counter() - t0, 2)
            break
        await asyncio.sleep(0.5)
    res["indexed_commits"] = status["index"]["indexed_commits"]
    res["dense_coverage"] = status["index"].get("dense_coverage")
    positions = _positions(repo, n)
    for path, _line, _col in {p[0]: p for p in positions}.values():
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=path.as_uri(), language_id="x", version=1, text=path.read_text("utf-8", "replace"))))  # fmt: skip

    async def timed(coro_fn: Any, items: list[Any]) -> dict[str, float]:
        times = []
        for it in items:
            t = time.perf_counter()
            await coro_fn(it)
            times.append((time.perf_counter() - t) * 1000)
        return {"p50_ms": _pct(times, 50), "p95_ms": _pct(times, 95), "mean_ms": round(statistics.mean(times), 2)}

    async def hover(p: tuple[Path, int, int]) -> Any:
        doc = types.TextDocumentIdentifier(uri=p[0].as_uri())
        pos = types.Position(line=p[1], character=p[2])
        return await client.text_document_hover_async(types.HoverParams(text_document=doc, position=pos))

    res["hover_cold"] = await timed(hover, positions)
    res["hover_cached"] = await timed(hover, positions)

    def prior(rerank: bool) -> Any:
        return lambda p: cmd(
            "backstory.findPriorArt",
            {"uri": p[0].as_uri(), "position": {"line": p[1], "character": p[2]}, "rerank": rerank},
        )

    res["find_prior_art_no_rerank"] = await timed(prior(False), positions)
    res["find_prior_art_rerank"] = await timed(prior(True), positions)
    res["search_rerank"] = await timed(lambda q: cmd("backstory.search", {"query": q}), queries)
    pid = client._server.pid if client._server else None  # type: ignore[attr-defined]
    res["server_rss_mb"] = _rss_mb(pid) if pid else None
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.lsp_bench")
    ap.add_argument("repo")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--index-dir")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    emit(asyncio.run(run(Path(args.repo).resolve(), args.queries, args.index_dir)), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
