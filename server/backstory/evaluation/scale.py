"""Large-history figures (issue #23): ``python -m backstory.evaluation.scale SRC --cuts 5000,20000,all
--workdir DIR [--dense] [--runs N] [--queries N] [--out FILE] [--plot PNG]``; ``--replot REPORT --plot PNG`` draws a
saved report again.

Each cut is the Nth commit of ``git rev-list --reverse --date-order HEAD`` in SRC, fetched alone into its own
repository under DIR (reused when present), so its ``.git`` holds that history only. Per cut, in one run on one
machine: commits, ``.git`` size, ``git log -p --no-merges`` (the reference), ``backstory index --no-dense``
run as a subprocess (wall, CPU of the process tree, peak RSS sampled from /proc), the optional dense phase, the
seconds until a query started beside a fresh index first finds a commit, keyword query latency, and index
size per component and per catalogue table; the seconds until the keyword lanes and the symbols are complete
come from the phases the index run reports (:func:`milestones`). Prints a table, writes JSON and a PNG.
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .bench import emit, git_log_seconds, latency, sample_queries
from .procs import MB, PeakRss, children_cpu, machine, phase_cpu, phase_peaks

LONG_GIT_LOG_S = 60.0  # a `git log -p` longer than this is run once, whatever --runs says


def select_cuts(revs: list[str], spec: str) -> list[tuple[str, str]]:
    """(label, sha) per cut of ``spec`` ("5000,20000,all"): the Nth of ``revs`` (oldest first), ``all`` the
    last; a number past the end is an error, and cuts come out once each, smallest first."""
    if not revs:
        raise ValueError("the source repository has no commits")
    picked: dict[str, tuple[int, str]] = {}
    for word in (w.strip() for w in spec.split(",") if w.strip()):
        n = len(revs) if word == "all" else int(word)
        if not 1 <= n <= len(revs):
            raise ValueError(f"cut {word}: the history has {len(revs):,} commits")
        picked.setdefault(revs[n - 1], (n, "all" if n == len(revs) else str(n)))
    return [(label, sha) for sha, (_n, label) in sorted(picked.items(), key=lambda kv: kv[1][0])]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def make_cut(src: Path, sha: str, dest: Path) -> Path:
    """A repository at ``dest`` whose only branch is ``sha`` of ``src`` (kept when it already is)."""
    if (dest / ".git").is_dir():
        try:
            if _git(dest, "rev-parse", "HEAD") == sha:
                return dest
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(dest)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    _git(dest, "fetch", "-q", str(src), f"{sha}:refs/heads/main")
    _git(dest, "checkout", "-q", "main")
    return dest


def du_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (apparent sizes, like the index's own component sizes)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "backstory", *args]


def timed_run(cmd: list[str]) -> dict[str, Any]:
    """Wall and CPU seconds and peak RSS of ``cmd``'s process tree, with its JSON report when it printed one."""
    cpu, t = children_cpu(), time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = PeakRss(proc.pid)
    out, err = proc.communicate()
    res = {"wall_s": round(time.perf_counter() - t, 3), "cpu_s": round(children_cpu() - cpu, 2), **sampler.stop()}
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-2000:]}")
    try:
        report = json_report(out)
        res |= {"phase_seconds": report.get("phase_seconds"), "hunks": report.get("hunks")}
        if report.get("phase_seconds"):
            res["phase_cpu_s"] = phase_cpu(sampler.cpu, report["phase_seconds"])
            res["phase_peak_rss_sum_mb"] = phase_peaks(sampler.rss, report["phase_seconds"])
    except ValueError:
        pass  # no JSON: the figures above stand alone
    return res


def json_report(out: str) -> dict[str, Any]:
    """The last line of ``out`` that is a JSON object (the index command's ``--json`` report)."""
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    raise ValueError("no JSON report")


def first_results(cut: Path, index_dir: Path, query: str, timeout: float) -> dict[str, Any]:
    """Seconds from starting ``backstory index`` on an empty index until ``backstory query`` beside it finds a
    commit (polled every 0.5 s; ``query_s``: that query's own run, process start included), then the indexer is
    interrupted (it would resume cleanly; this index is thrown away). ``s`` is None when nothing was found."""
    shutil.rmtree(index_dir, ignore_errors=True)
    t = time.perf_counter()
    indexer = subprocess.Popen(
        _cli("index", str(cut), "--index-dir", str(index_dir), "--no-dense", "-q"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    res: dict[str, Any] = {"query": query, "s": None}
    ask = _cli("query", "-C", str(cut), "--index-dir", str(index_dir), "--no-dense", "--json", "-k", "1", "--", query)
    while time.perf_counter() - t < timeout:
        finished, asked = indexer.poll() is not None, time.perf_counter()
        if subprocess.run(ask, capture_output=True).returncode == 0:
            now = time.perf_counter()
            res |= {"s": round(now - t, 2), "query_s": round(now - asked, 2)}
            break
        if finished:
            break  # the whole index answers nothing
        time.sleep(0.5)
    if indexer.poll() is None:
        os.killpg(indexer.pid, signal.SIGINT)  # the group of the indexer started above (start_new_session)
        try:
            indexer.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(indexer.pid, signal.SIGKILL)
            indexer.wait()
    shutil.rmtree(index_dir, ignore_errors=True)
    return res


def git_log_reference(cut: Path, runs: int) -> dict[str, Any]:
    """Median wall and CPU seconds of ``git log -p --no-merges`` over ``runs``, or one run when the first is
    long. CPU is the fairer reference on a machine with other load: it is what the indexer's CPU is set against."""
    times: list[float] = []
    cpus: list[float] = []
    while len(times) < (runs if not times or times[0] < LONG_GIT_LOG_S else 1):
        cpu = children_cpu()
        times.append(git_log_seconds(cut, 1) or 0.0)
        cpus.append(children_cpu() - cpu)
    return {
        "git_log_p_s": round(statistics.median(times), 3),
        "git_log_p_cpu_s": round(statistics.median(cpus), 2),
        "git_log_p_runs": len(times),
    }


def measure_cut(cut: Path, index_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from ..search.engine import Engine
    from ..search.options import TEXT_LANES, ModelConfig, SearchOptions

    git_bytes = du_bytes(cut / ".git")
    res: dict[str, Any] = {
        "commits": int(_git(cut, "rev-list", "--count", "HEAD")),
        "non_merge_commits": int(_git(cut, "rev-list", "--count", "--no-merges", "HEAD")),
        "git_dir_mb": round(git_bytes / MB, 1),
        **git_log_reference(cut, args.runs),
    }
    shutil.rmtree(index_dir, ignore_errors=True)
    base = ("index", str(cut), "--index-dir", str(index_dir), "--json", "-q")
    res["index"] = timed_run(_cli(*base, "--no-dense"))
    res["index_ratio_to_git_log"] = (
        round(res["index"]["wall_s"] / res["git_log_p_s"], 2) if res["git_log_p_s"] else None
    )
    if res["git_log_p_cpu_s"]:  # CPU over CPU: what load beside the run moves least
        res["index_cpu_ratio_to_git_log"] = round(res["index"]["cpu_s"] / res["git_log_p_cpu_s"], 2)
        res["phase_cpu_ratio_to_git_log"] = {
            k: round(v / res["git_log_p_cpu_s"], 2) for k, v in res["index"].get("phase_cpu_s", {}).items()
        }
    if args.dense:
        res["dense"] = timed_run(_cli(*base))
    if args.first_results:  # the newest commit's subject: the first batch indexed holds it
        subject = _git(cut, "log", "--no-merges", "-1", "--format=%s")
        res["first_results"] = first_results(cut, index_dir.with_name(index_dir.name + "-first"), subject, 3600)
    engine = Engine(cut, index_dir, ModelConfig(dense=False, reranker="none"))
    queries = sample_queries(cut, args.queries)
    engines = {"query_bm25": (engine, SearchOptions(rerank=False, lanes=TEXT_LANES))}
    if args.dense:  # the default pipeline: dense lane, rerank, learned stage
        engines["query_default"] = (Engine(cut, index_dir), SearchOptions())
    for key, (eng, opts) in engines.items() if queries else ():
        res[key] = {
            k: v for k, v in latency(lambda q, e=eng, o=opts: e.search(q, o), queries).items() if k != "samples_ms"
        }
    sizes = engine.store.component_sizes()
    total = sum(sizes.values())
    res["index_size_mb"] = round(total / MB, 1)
    res["index_components_mb"] = {k: round(v / MB, 2) for k, v in sizes.items()}
    tables = engine.catalog.table_sizes()
    res["catalogue_tables_mb"] = (
        None if tables is None else {k: {p: round(b / MB, 2) for p, b in v.items()} for k, v in tables.items()}
    )
    res["index_ratio_to_git_dir"] = round(total / git_bytes, 2) if git_bytes else None
    engine.store.close()
    return res


def milestones(index: dict[str, Any]) -> dict[str, float | None]:
    """Seconds until the keyword lanes and the symbols are complete: the issue's two time targets. Counted from
    the first phase's start (the indexer's own start before it is in ``wall_s`` only: 0.5-1.7 s on git/git's
    cuts). The phases run one after another in the order the report lists them, so the symbols are complete at
    the sum of the phases up to theirs; None when the run reported no such phase (an empty history, an older
    report)."""
    phases: dict[str, float] = index.get("phase_seconds", {})
    out: dict[str, float | None] = {"keyword_lanes_s": phases.get("history"), "symbols_s": None}
    elapsed = 0.0
    for name, seconds in phases.items():
        elapsed += seconds
        if name == "symbols":
            out["symbols_s"] = round(elapsed, 1)
    return out


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


COLUMNS: list[tuple[str, Any]] = [
    ("commits", lambda r: f"{r['commits']:,}"),
    (".git MB", lambda r: f"{r['git_dir_mb']:.0f}"),
    ("git log -p s", lambda r: f"{r['git_log_p_s']:.1f}"),
    ("index s", lambda r: f"{r['index']['wall_s']:.1f}"),
    ("x git log", lambda r: f"{r['index_ratio_to_git_log'] or 0:.1f}"),
    ("keyword s", lambda r: _seconds(milestones(r["index"])["keyword_lanes_s"])),
    ("symbols s", lambda r: _seconds(milestones(r["index"])["symbols_s"])),
    ("CPU s", lambda r: f"{r['index']['cpu_s']:.0f}"),
    ("CPU x git log", lambda r: f"{r.get('index_cpu_ratio_to_git_log') or 0:.1f}"),
    ("dense s", lambda r: f"{r['dense']['wall_s']:.1f}" if "dense" in r else "-"),
    (
        "peak MB rss/pss/max",
        lambda r: "{peak_rss_sum_mb:.0f}/{peak_pss_sum_mb:.0f}/{peak_rss_largest_mb:.0f}".format(**r["index"]),
    ),
    ("index MB", lambda r: f"{r['index_size_mb']:.0f}"),
    ("x .git", lambda r: f"{r['index_ratio_to_git_dir'] or 0:.1f}"),
    ("first hit s", lambda r: str(r.get("first_results", {}).get("s", "-"))),
    ("query p50/p95 ms", lambda r: "{p50_ms}/{p95_ms}".format(**r["query_bm25"]) if "query_bm25" in r else "-"),
]


def table(rows: dict[str, dict[str, Any]]) -> str:
    """The cuts side by side with ``git log -p``, one line each."""
    lines = [["cut", *(h for h, _ in COLUMNS)]] + [[label, *(f(r) for _, f in COLUMNS)] for label, r in rows.items()]
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in lines)


def plot(report: dict[str, Any], out: Path) -> Path:
    from .plots import _pyplot, _save

    plt = _pyplot()
    rows = list(report["cuts"].values())
    x, ix = [r["commits"] for r in rows], [r["index"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels: list[tuple[str, dict[str, list[Any]]]] = [
        ("seconds", {"backstory index --no-dense": [i["wall_s"] for i in ix],
                     "… symbols complete": [milestones(i)["symbols_s"] for i in ix],
                     "… keyword lanes complete": [milestones(i)["keyword_lanes_s"] for i in ix],
                     "git log -p --no-merges": [r["git_log_p_s"] for r in rows]}),
        ("peak memory of the indexer, MB", {"RSS, process tree": [i["peak_rss_sum_mb"] for i in ix],
                                            "PSS, process tree": [i["peak_pss_sum_mb"] for i in ix],
                                            "RSS, largest process": [i["peak_rss_largest_mb"] for i in ix]}),
        ("MB on disk", {"index": [r["index_size_mb"] for r in rows], ".git": [r["git_dir_mb"] for r in rows]}),
    ]  # fmt: skip
    if any("dense" in r for r in rows):
        panels[0][1]["then the dense phase"] = [r.get("dense", {}).get("wall_s") for r in rows]
    for ax, (ylabel, series) in zip(axes, panels, strict=True):
        for name, ys in series.items():
            ax.plot(x, ys, marker="o", label=name)
        ax.set_xlabel("commits")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    m = report["machine"]
    load = report["load_average"]
    fig.suptitle(f"{report['name']} cuts on {m['cpu_count']} cores ({m['cpu_model']}), {m['ram_gb']} GB RAM; "
                 f"load {load[0]}-{load[1]}")  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    return _save(fig, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.scale")
    ap.add_argument("src", nargs="?", help="source repository (cuts are fetched from it; it is not modified)")
    ap.add_argument("--cuts", default="5000,20000,40000,all", help="commit counts, comma-separated; 'all' = HEAD")
    ap.add_argument("--workdir", help="where the cut repositories and their indexes go (required to measure)")
    ap.add_argument("--dense", action="store_true", help="also time the embedding phase (a separate step)")
    ap.add_argument("--runs", type=int, default=3, help=f"git log -p runs (1 when one takes > {LONG_GIT_LOG_S:.0f} s)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--no-first-results", dest="first_results", action="store_false")
    ap.add_argument("--name", help="the history's name in the plot's title (default: SRC's folder name)")
    ap.add_argument("--out", help="write the JSON report here")
    ap.add_argument("--plot", help="draw the PNG here")
    ap.add_argument("--replot", metavar="REPORT", help="measure nothing: print the table of a report written by --out "
                    "and draw its plot (--plot), e.g. after the plot's panels changed")  # fmt: skip
    args = ap.parse_args(argv)
    if args.replot:
        if args.out:
            ap.error("--replot measures nothing, so there is no report to --out: it only prints and draws")
        saved = json.loads(Path(args.replot).read_text())
        print(table(saved["cuts"]), file=sys.stderr)
        if args.plot:
            plot(saved, Path(args.plot))
        return 0
    if not args.src or not args.workdir:
        ap.error("give the source repository and --workdir (or --replot REPORT)")
    src, work = Path(args.src).resolve(), Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    revs = _git(src, "rev-list", "--reverse", "--date-order", "HEAD").splitlines()
    report: dict[str, Any] = {
        "repo": str(src), "name": args.name or src.name, "cut_rule": "Nth of git rev-list --reverse --date-order HEAD",
        "machine": machine(), "load_average": [round(os.getloadavg()[0], 2)], "runs": args.runs,
        "long_git_log_s": LONG_GIT_LOG_S,
        "rss_note": "peak_rss_sum counts pages that forked workers share once per process; peak_pss_sum splits them",
        "cuts": {},
    }  # fmt: skip
    for label, sha in select_cuts(revs, args.cuts):
        cut = make_cut(src, sha, work / f"cut-{label}")
        print(f"cut {label}: {sha[:12]} ...", file=sys.stderr)
        report["cuts"][label] = {"sha": sha, **measure_cut(cut, work / f"index-{label}", args)}
    report["load_average"].append(round(os.getloadavg()[0], 2))
    print(table(report["cuts"]), file=sys.stderr)
    if args.plot:
        report["plot"] = str(plot(report, Path(args.plot)))
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
