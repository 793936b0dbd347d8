"""Measuring processes through Linux's /proc, for the benchmarks: a process tree's pids, CPU and memory now, sampled
over a run (:class:`PeakRss`) and cut into the phases the run reported; and what machine a figure was measured on.
Nothing here asserts; on a system without /proc the figures read as zero or None.
"""

from __future__ import annotations

import itertools
import os
import resource
import threading
import time
from pathlib import Path
from typing import Any

MB = 1e6


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants alive now (parents read from every /proc/PID/stat)."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])  # "pid (comm) state ppid ..."
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], []))
    return found


def proc_kb(pid: int, field: str, name: str = "status") -> int:
    """A ``Field:  N kB`` line of /proc/PID/NAME, in bytes (0 once the process is gone or hides it)."""
    try:
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def rss_by_mapping(pid: int, top: int = 8) -> dict[str, float]:
    """Where a process's resident memory is, in MB: its largest mappings by resident size (/proc/PID/smaps),
    files by name, anonymous memory summed as ``[anon]`` (the heap included). Why: RSS alone mixes the process's
    own heap with index files' pages mapped in, which the kernel can drop and other readers share."""
    sizes: dict[str, int] = {}
    name = "[anon]"
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:  # a mapping's first line: range perms offset dev inode path
            path = head[5] if len(head) > 5 else ""
            name = path if path.startswith("/") else "[anon]"
        elif head and head[0] == "Rss:":
            sizes[name] = sizes.get(name, 0) + int(head[1]) * 1024
    ranked = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    out = {k: round(v / MB, 1) for k, v in ranked[:top]}
    out["other"] = round(sum(v for _k, v in ranked[top:]) / MB, 1)
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root``'s process tree so far: each live process's user + system time, plus what the
    root's reaped children used (a reader process that exited counts through its parent)."""
    total = 0
    for pid in tree_pids(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
        if pid == root:
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / _TICK


def phase_cpu(series: list[tuple[float, float]], phases: dict[str, float]) -> dict[str, float]:
    """CPU seconds per phase from a (seconds since start, tree CPU) series, the phases taken as consecutive
    from the start (the first one includes the process's start-up) with the durations the indexer reported."""
    out: dict[str, float] = {}
    start = 0.0
    for name, seconds in phases.items():
        end = start + seconds
        out[name] = round(_cpu_at(series, end) - _cpu_at(series, start), 1)
        start = end
    return out


def phase_peaks(series: list[tuple[float, int]], phases: dict[str, float]) -> dict[str, float]:
    """The highest summed RSS (MB) per phase from a (seconds since start, that second's peak) series, phases
    consecutive from the start as in :func:`phase_cpu`; a sample belongs to the phase its second ends in."""
    out: dict[str, float] = {}
    start = 0.0
    for name, seconds in phases.items():
        end = start + seconds
        inside = [v for t, v in series if start < t <= end or (t == 0.0 and start == 0.0)]
        out[name] = round(max(inside, default=0) / MB, 1)
        start = end
    return out


def _cpu_at(series: list[tuple[float, float]], t: float) -> float:
    """The series' CPU at ``t``, interpolated linearly (clamped to the ends)."""
    if not series:
        return 0.0
    if t <= series[0][0]:
        return series[0][1]
    for (t0, c0), (t1, c1) in itertools.pairwise(series):
        if t <= t1:
            return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1
    return series[-1][1]


def tree_rss(root: int) -> dict[str, int]:
    """Bytes of ``root``'s process tree now: VmRSS summed (pages forked workers share counted in each) and of
    the largest process, and the proportional set size summed (shared pages split between their users)."""
    pids = tree_pids(root)
    rss = [proc_kb(pid, "VmRSS") for pid in pids]
    pss = sum(proc_kb(pid, "Pss", "smaps_rollup") for pid in pids)
    return {"peak_rss_sum": sum(rss), "peak_rss_largest": max(rss, default=0), "peak_pss_sum": pss}


class PeakRss:
    """Samples the tree's memory every ``every`` seconds in a thread until ``stop()``; keeps each peak."""

    def __init__(self, root: int, every: float = 0.2) -> None:
        self.root, self.every, self.peaks, self.samples = root, every, tree_rss(root), 1  # a sample before return
        self._t0 = time.perf_counter()
        self.cpu: list[tuple[float, float]] = [(0.0, tree_cpu(root))]  # the tree's CPU over time, for phases
        self.rss: list[tuple[float, int]] = [(0.0, self.peaks["peak_rss_sum"])]  # summed RSS, each second's top
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        top = 0
        while not self._done.wait(self.every):
            now = tree_rss(self.root)
            for k, v in now.items():
                self.peaks[k] = max(self.peaks[k], v)
            top = max(top, now["peak_rss_sum"])
            if self.samples % 5 == 0:  # once a second
                t = time.perf_counter() - self._t0
                self.cpu.append((t, tree_cpu(self.root)))
                self.rss.append((t, top))
                top = 0
            self.samples += 1

    def stop(self) -> dict[str, Any]:
        self._done.set()
        self._thread.join()
        return {**{f"{k}_mb": round(v / MB, 1) for k, v in self.peaks.items()}, "rss_samples": self.samples}


def children_cpu() -> float:
    """CPU seconds of this process's reaped children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: the CPU's vector extensions that change this project's speed most (the int8 encoder; usearch's kernels)
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def machine() -> dict[str, Any]:
    """What a figure was measured on. The vector extensions are named because the same model name ("AMD EPYC")
    came with and without AVX-512 VNNI, and the int8 encoder ran over three times as fast with it."""
    info: dict[str, Any] = {"cpu_count": os.cpu_count(), "cpu_model": None, "ram_gb": None, "cpu_vector": None}
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        info["cpu_model"] = next(
            (ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("model name")), None
        )
        flags = next((ln.split(":", 1)[1].split() for ln in cpu.splitlines() if ln.startswith("flags")), [])
        info["cpu_vector"] = [f for f in VECTOR_FLAGS if f in flags]
        mem = Path("/proc/meminfo").read_text().split("MemTotal:", 1)[1].split()[0]
        info["ram_gb"] = round(int(mem) * 1024 / 1e9, 1)
    except (OSError, IndexError, ValueError):
        pass
    return info
