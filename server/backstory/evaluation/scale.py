"""Large-history figures (issue #23): ``python -m backstory.evaluation.scale SRC --cuts 5000,20000,all
--workdir DIR [--dense] [--runs N] [--queries N] [--out FILE] [--plot PNG]``.

Each cut is the Nth commit of ``git rev-list --reverse --date-order HEAD`` in SRC, fetched alone into its own
repository under DIR (reused when present), so its ``.git`` holds that history only. Per cut, in one run on one
machine: commits, ``.git`` size, ``git log -p --no-merges`` (the reference), ``backstory index --no-dense``
run as a subprocess (wall, CPU of the process tree, peak RSS sampled from /proc), the optional dense phase, the
seconds until a query started beside a fresh index first finds a commit, keyword query latency, and index
size per component and per catalogue table. Prints a table, writes JSON and a PNG. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .bench import emit, git_log_seconds, latency, sample_queries

MB = 1e6
LONG_GIT_LOG_S = 60.0  # a `git log -p` longer than this is run once, whatever --runs says


# -- cuts -------------------------------------------------------------------------------------------------------


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


# -- process tree: RSS from /proc -------------------------------------------------------------------------------


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # gone meanwhile
            out[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])  # after "pid (comm) state"
    return out


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants alive now."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def rss_bytes(pid: int) -> int:
    """VmRSS of one process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def tree_rss(root: int) -> tuple[int, int]:
    """(sum, largest single process) of the VmRSS of ``root``'s process tree, in bytes."""
    sizes = [rss_bytes(pid) for pid in tree_pids(root)]
    return sum(sizes), max(sizes, default=0)


class PeakRss:
    """Samples the tree's RSS every ``every`` seconds in a thread until ``stop()``; keeps the peaks."""

    def __init__(self, root: int, every: float = 0.2) -> None:
        self.root, self.every, self.peak_sum, self.peak_one, self.samples = root, every, 0, 0, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            total, one = tree_rss(self.root)
            self.peak_sum, self.peak_one = max(self.peak_sum, total), max(self.peak_one, one)
            self.samples += 1
            self._done.wait(self.every)

    def stop(self) -> dict[str, Any]:
        self._done.set()
        self._thread.join()
        return {"peak_rss_sum_mb": round(self.peak_sum / MB, 1), "peak_rss_largest_mb": round(self.peak_one / MB, 1)}


# -- timed runs -------------------------------------------------------------------------------------------------


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "backstory", *args]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_run(cmd: list[str]) -> dict[str, Any]:
    """Wall and CPU seconds and peak RSS of ``cmd``'s process tree, with its JSON report when it printed one."""
    cpu, t = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = PeakRss(proc.pid)
    out, err = proc.communicate()
    res = {"wall_s": round(time.perf_counter() - t, 3), "cpu_s": round(_children_cpu() - cpu, 2), **sampler.stop()}
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()[-2000:]}")
    try:
        report = json_report(out)
        res |= {"phase_seconds": report.get("phase_seconds"), "hunks": report.get("hunks")}
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


def first_results(cut: Path, index_dir: Path, query: str, timeout: float) -> float | None:
    """Seconds from starting ``backstory index`` on an empty index until ``backstory query`` beside it finds a
    commit (polled every 0.5 s); the indexer is then interrupted (it resumes cleanly, and this index is thrown
    away). None when nothing was found within ``timeout``."""
    shutil.rmtree(index_dir, ignore_errors=True)
    t = time.perf_counter()
    indexer = subprocess.Popen(
        _cli("index", str(cut), "--index-dir", str(index_dir), "--no-dense", "-q"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    found = None
    ask = _cli("query", query, "-C", str(cut), "--index-dir", str(index_dir), "--no-dense", "--json", "-k", "1")
    while time.perf_counter() - t < timeout:
        if subprocess.run(ask, capture_output=True).returncode == 0:
            found = round(time.perf_counter() - t, 2)
            break
        if indexer.poll() is not None and subprocess.run(ask, capture_output=True).returncode != 0:
            break  # finished and still nothing
        time.sleep(0.5)
    if indexer.poll() is None:
        os.killpg(indexer.pid, signal.SIGINT)  # this run's own process group (start_new_session)
        try:
            indexer.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(indexer.pid, signal.SIGKILL)
            indexer.wait()
    shutil.rmtree(index_dir, ignore_errors=True)
    return found


def git_log_reference(cut: Path, runs: int) -> dict[str, Any]:
    """Median seconds of ``git log -p --no-merges`` over ``runs``, or one run when the first is long."""
    times = [git_log_seconds(cut, 1) or 0.0]
    if times[0] < LONG_GIT_LOG_S:
        times += [git_log_seconds(cut, 1) or 0.0 for _ in range(runs - 1)]
    return {"git_log_p_s": round(statistics.median(times), 3), "git_log_p_runs": len(times)}


# -- one cut ----------------------------------------------------------------------------------------------------


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
    if args.dense:
        res["dense"] = timed_run(_cli(*base))
    subject = _git(cut, "log", "--no-merges", "-1", "--format=%s")
    if args.first_results:
        res["first_results_s"] = first_results(cut, index_dir.with_name(index_dir.name + "-first"), subject, 3600)
        res["first_results_query"] = subject
    engine = Engine(cut, index_dir, ModelConfig(dense=False, reranker="none"))
    queries = sample_queries(cut, args.queries)
    if queries:
        lat = latency(lambda q: engine.search(q, SearchOptions(rerank=False, lanes=TEXT_LANES)), queries)
        res["query_bm25"] = {k: v for k, v in lat.items() if k != "samples_ms"}
    if args.dense and queries:
        full = Engine(cut, index_dir)
        lat = latency(lambda q: full.search(q, SearchOptions()), queries)
        res["query_default"] = {k: v for k, v in lat.items() if k != "samples_ms"}
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


# -- report -----------------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cpu_count": os.cpu_count(), "cpu_model": None, "ram_gb": None}
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        info["cpu_model"] = next(
            (ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("model name")), None
        )
        mem = Path("/proc/meminfo").read_text().split("MemTotal:", 1)[1].split()[0]
        info["ram_gb"] = round(int(mem) * 1024 / 1e9, 1)
    except (OSError, IndexError, ValueError):
        pass
    return info


COLUMNS: list[tuple[str, Any]] = [
    ("commits", lambda r: f"{r['commits']:,}"),
    (".git MB", lambda r: f"{r['git_dir_mb']:.0f}"),
    ("git log -p s", lambda r: f"{r['git_log_p_s']:.1f}"),
    ("index s", lambda r: f"{r['index']['wall_s']:.1f}"),
    ("x git log", lambda r: f"{r['index_ratio_to_git_log'] or 0:.1f}"),
    ("CPU s", lambda r: f"{r['index']['cpu_s']:.0f}"),
    ("peak RSS MB sum/max", lambda r: f"{r['index']['peak_rss_sum_mb']:.0f}/{r['index']['peak_rss_largest_mb']:.0f}"),
    ("index MB", lambda r: f"{r['index_size_mb']:.0f}"),
    ("x .git", lambda r: f"{r['index_ratio_to_git_dir'] or 0:.1f}"),
    ("first hit s", lambda r: str(r.get("first_results_s", "-"))),
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
    x = [r["commits"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    panels = [
        ("seconds", [("backstory index --no-dense", [r["index"]["wall_s"] for r in rows]),
                     ("git log -p --no-merges", [r["git_log_p_s"] for r in rows])]),
        ("peak RSS, MB", [("process tree (sum)", [r["index"]["peak_rss_sum_mb"] for r in rows]),
                          ("largest process", [r["index"]["peak_rss_largest_mb"] for r in rows])]),
        ("MB on disk", [("index", [r["index_size_mb"] for r in rows]), (".git", [r["git_dir_mb"] for r in rows])]),
    ]  # fmt: skip
    if any("dense" in r for r in rows):
        panels[0][1].append(("+ dense phase", [r.get("dense", {}).get("wall_s") for r in rows]))
    for ax, (ylabel, series) in zip(axes, panels, strict=True):
        for name, ys in series:
            ax.plot(x, ys, marker="o", label=name)
        ax.set_xlabel("commits")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    m = report["machine"]
    load = report["load_average"]
    fig.suptitle(f"{report['repo_name']} cuts on {m['cpu_count']} cores ({m['cpu_model']}), {m['ram_gb']} GB RAM; "
                 f"load {load[0]}-{load[1]}")  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    return _save(fig, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.scale")
    ap.add_argument("src", help="source repository (cuts are fetched from it; it is not modified)")
    ap.add_argument("--cuts", default="5000,20000,40000,all", help="commit counts, comma-separated; 'all' = HEAD")
    ap.add_argument("--workdir", required=True, help="where the cut repositories and their indexes go")
    ap.add_argument("--dense", action="store_true", help="also time the embedding phase (a separate step)")
    ap.add_argument("--runs", type=int, default=3, help=f"git log -p runs (1 when one takes > {LONG_GIT_LOG_S:.0f} s)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--no-first-results", dest="first_results", action="store_false")
    ap.add_argument("--out", help="write the JSON report here")
    ap.add_argument("--plot", help="draw the PNG here")
    args = ap.parse_args(argv)
    src, work = Path(args.src).resolve(), Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    revs = _git(src, "rev-list", "--reverse", "--date-order", "HEAD").splitlines()
    report: dict[str, Any] = {
        "repo": str(src), "repo_name": src.name, "cut_rule": "Nth of git rev-list --reverse --date-order HEAD",
        "machine": machine(), "load_average": [round(os.getloadavg()[0], 2)], "runs": args.runs,
        "long_git_log_s": LONG_GIT_LOG_S, "rss_note": "sum of VmRSS counts pages shared by forked workers twice",
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
