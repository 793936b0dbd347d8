"""The benchmark page's plots: ``python -m backstory.evaluation.plots --bench FILE --quality FILE --out DIR``.

Reads the JSON that ``python -m backstory.evaluation.bench ... --out FILE`` writes (indexing phases against
``git log -p``, and every query's latency in ``samples_ms``) and a ranking-quality file: MRR@10 per history and
per pipeline stage, in ``evaluate``'s report shape (``{"histories": {NAME: {CONFIG: {"MRR@10": x}}}}``; one
``evaluate --out`` report per history, gathered). ``--indexing`` takes the indexing plot from another bench
file (a quiet run without per-query samples). Writes ``indexing.png``, ``latency.png`` and
``quality.png`` (and ``quality-messages.png`` with ``--quality-messages``). Needs matplotlib (a dev extra).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

# pipeline stages in order, as evaluate names its configs, and how the plots label them
STAGES = {
    "bm25": "keyword lanes",
    "dense": "dense lane alone",
    "fused": "fused",
    "fused+rerank-blend": "+ MaxSim rerank",
    "fused+rerank": "+ learned stage\n(shipped)",
}
LATENCIES = {
    "query_bm25": "keyword lanes",
    "query_fused_no_rerank": "fused (with dense)",
    "query_fused_rerank20_blend": "+ rerank, blend",
    "query_fused_rerank20": "+ rerank + learned\n(default)",
    "history": "history (exact)",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: the same data, the same bytes
    return path


def _name(bench: dict[str, Any]) -> str:
    """``flask (5,531 commits)``, and the machine's load when the run recorded a busy one."""
    repo = Path(str(bench.get("repo", "repository"))).name
    load = [x for x in bench.get("load_average") or [] if x is not None]
    busy = f"\nbusy machine: load average {min(load):.0f}-{max(load):.0f} on 2 cores" if load and max(load) >= 2 else ""
    return f"{repo} ({bench.get('commits', 0):,} commits){busy}"


def indexing_plot(bench: dict[str, Any], out: Path) -> Path:
    """Seconds per indexing phase against ``git log -p --no-merges`` reading the same history."""
    plt = _pyplot()
    rows: list[tuple[str, float]] = []
    if bench.get("git_log_p_s"):
        rows.append(("git log -p --no-merges\n(reference)", bench["git_log_p_s"]))
    rows.append(("history reader alone", bench["reader_s"]))
    rows.append(("history phase,\nno symbols", bench["index_bm25_s"]))
    rows.append(("history phase\n(default: with symbols)", bench["index_bm25_symbols_s"]))
    if bench.get("dense_units") and bench.get("dense_units_per_s"):
        rows.append(
            (
                f"embedding phase\n({bench['dense_units']:,} file changes)",
                bench["dense_units"] / bench["dense_units_per_s"],
            )
        )
    fig, ax = plt.subplots(figsize=(7.5, 0.6 * len(rows) + 1.2))
    labels = [r[0] for r in rows][::-1]
    values = [r[1] for r in rows][::-1]
    colors = ["#9e9e9e" if "git log" in label else "#3f7fbf" for label in labels]
    ax.barh(labels, values, color=colors)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.1f} s", va="center")
    ax.set_xlabel("seconds (wall clock)")
    ax.set_xlim(0, max(values) * 1.2)
    ax.set_title(f"Indexing {_name(bench)}")
    return _save(fig, out / "indexing.png")


def latency_plot(bench: dict[str, Any], out: Path) -> Path:
    """Every query's latency per pipeline configuration (box: quartiles; whiskers: 5th-95th percentile)."""
    plt = _pyplot()
    rows = [
        (label, bench[key]["samples_ms"]) for key, label in LATENCIES.items() if bench.get(key, {}).get("samples_ms")
    ]
    if not rows:
        raise SystemExit("the bench file has no samples_ms: run the bench with --queries N (and --dense N)")
    fig, ax = plt.subplots(figsize=(7.5, 0.7 * len(rows) + 1.2))
    labels = [r[0] for r in rows][::-1]
    data = [r[1] for r in rows][::-1]
    ax.boxplot(data, orientation="horizontal", whis=(5, 95), showfliers=True, flierprops={"markersize": 3})
    ax.set_yticks(range(1, len(labels) + 1), labels)
    for i, values in enumerate(data, start=1):
        ax.text(max(values) * 1.05, i, f"p50 {statistics.median(values):.0f} ms", va="center", fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds per query (log scale)")
    name, _, busy = _name(bench).partition("\n")
    ax.set_title(f"Query latency, {name}, {len(rows[0][1])} queries" + (f"\n{busy}" if busy else ""))
    ax.set_xlim(right=max(max(v) for v in data) * 3)
    return _save(fig, out / "latency.png")


def quality_plot(quality: dict[str, Any], out: Path, name: str = "quality.png") -> Path:
    """MRR@10 per pipeline stage: one line per history, the mean in bold."""
    plt = _pyplot()
    histories: dict[str, dict[str, Any]] = quality["histories"]
    stages = [s for s in STAGES if any(s in h for h in histories.values())]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    xs = list(range(len(stages)))
    means = []
    for s in stages:
        vals = [h[s]["MRR@10"] for h in histories.values() if s in h]
        means.append(statistics.mean(vals))
    ends = []
    for hist, configs in histories.items():
        pts = [(x, configs[s]["MRR@10"]) for x, s in zip(xs, stages, strict=True) if s in configs]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color="#9bb8d8", linewidth=1)
        ends.append([pts[-1][1], pts[-1][0], hist])
    ax.plot(xs, means, marker="o", color="#1f4f8f", linewidth=2.5, label="mean")
    ends.sort()
    low, high = ax.get_ylim()
    for lower, upper in itertools.pairwise(ends):  # keep the history names at the right end from overlapping
        upper[0] = max(upper[0], lower[0] + (high - low) * 0.045)
    for y, x, hist in ends:
        ax.annotate(hist, (x, y), xytext=(8, 0), textcoords="offset points", fontsize=8, va="center", color="#55708f")
    for x, m in zip(xs, means, strict=True):
        ax.annotate(f"{m:.3f}", (x, m), xytext=(0, 8), textcoords="offset points", ha="center", fontweight="bold")
    ax.set_xticks(xs, [STAGES[s] for s in stages])
    ax.set_xlim(-0.3, len(stages) - 0.4)
    ax.set_ylabel("MRR@10")
    ax.set_title(quality.get("title", "Ranking quality per pipeline stage"))
    ax.legend(loc="upper left")
    return _save(fig, out / name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.plots", description=__doc__.split("\n")[0])
    ap.add_argument("--bench", help="JSON written by `python -m backstory.evaluation.bench REPO --out FILE`")
    ap.add_argument("--indexing", help="another bench JSON for the indexing plot (default: --bench's)")
    ap.add_argument("--quality", help="MRR@10 per history and stage (message-blind)")
    ap.add_argument("--quality-messages", help="the same for an index with messages")
    ap.add_argument("--out", default="docs/images/bench", help="folder for the PNG files (default docs/images/bench)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if args.indexing or args.bench:
        written.append(indexing_plot(json.loads(Path(args.indexing or args.bench).read_text("utf-8")), out))
    if args.bench:
        written.append(latency_plot(json.loads(Path(args.bench).read_text("utf-8")), out))
    if args.quality:
        written.append(quality_plot(json.loads(Path(args.quality).read_text("utf-8")), out))
    if args.quality_messages:
        data = json.loads(Path(args.quality_messages).read_text("utf-8"))
        written.append(quality_plot(data, out, "quality-messages.png"))
    if not written:
        ap.error("give --bench and/or --quality")
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
