"""The scale benchmark's pure parts (``backstory.evaluation.scale``, ``.procs``): which commits the cuts are, the
process tree's memory read from /proc, and the indexer's JSON report picked out of its output. No indexing here."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from backstory.evaluation.procs import PeakRss, phase_cpu, phase_peaks, tree_cpu, tree_pids, tree_rss
from backstory.evaluation.scale import json_report, milestones, select_cuts, table

MB = 1_000_000


def test_cuts_are_the_nth_commits_once_each_smallest_first() -> None:
    revs = [f"{i:040x}" for i in range(1, 11)]  # oldest first
    assert select_cuts(revs, "7, 3,all,10,3") == [("3", revs[2]), ("7", revs[6]), ("all", revs[9])]
    assert select_cuts(revs, "1") == [("1", revs[0])]
    for bad in ("11", "0", "-2"):
        with pytest.raises(ValueError, match="10 commits"):
            select_cuts(revs, bad)
    with pytest.raises(ValueError):
        select_cuts([], "all")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="reads Linux's /proc")
def test_tree_memory_counts_a_child_and_its_peak_is_kept() -> None:
    # a child holding 80 MB it has written (so the pages are resident), waiting to be told to exit
    code = "import sys; b = b'x' * 80_000_000; print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert {os.getpid(), child.pid} <= set(tree_pids(os.getpid()))
        assert child.pid in tree_pids(child.pid) and os.getpid() not in tree_pids(child.pid)
        mine, alone = tree_rss(os.getpid()), tree_rss(child.pid)
        assert alone["peak_rss_largest"] == alone["peak_rss_sum"] > 80 * MB
        assert mine["peak_rss_sum"] > alone["peak_rss_sum"] + 1 * MB  # this process counts too
        assert mine["peak_rss_largest"] <= mine["peak_rss_sum"]
        assert 80 * MB < alone["peak_pss_sum"] <= alone["peak_rss_sum"]
        sampler = PeakRss(child.pid, every=0.05)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
    peaks = sampler.stop()  # the child is gone: the peak stays what it was while it lived
    assert peaks["rss_samples"] >= 1 and peaks["peak_rss_sum_mb"] > 80
    assert tree_rss(child.pid) == {"peak_rss_sum": 0, "peak_rss_largest": 0, "peak_pss_sum": 0}


def test_the_index_report_is_the_last_json_line_and_the_table_lines_up() -> None:
    out = 'progress {not json\n{"hunks": 3, "phase_seconds": {"history": 1.5}}\n'
    assert json_report(out) == {"hunks": 3, "phase_seconds": {"history": 1.5}}
    with pytest.raises(ValueError):
        json_report("indexed 4,846 new commits in 21.6 s\n")
    row = {
        "commits": 19790, "git_dir_mb": 27.0, "git_log_p_s": 10.0, "index_ratio_to_git_log": 18.4,
        "index_cpu_ratio_to_git_log": 23.3,
        "index": {"wall_s": 184.0, "cpu_s": 233.0, "peak_rss_sum_mb": 900.0, "peak_pss_sum_mb": 600.0,
                  "peak_rss_largest_mb": 300.0},
        "index_size_mb": 144.5, "index_ratio_to_git_dir": 5.4, "first_results": {"s": 6.5},
        "query_bm25": {"p50_ms": 12.5, "p95_ms": 18.1},
    }  # fmt: skip
    lines = table({"20000": row, "all": {**row, "commits": 81966}}).splitlines()
    assert len(lines) == 3 and len({len(line) for line in lines}) == 1
    assert lines[1].split() == ["20000", "19,790", "27", "10.0", "184.0", "18.4", "-", "-", "233", "23.3", "-",
                                "900/600/300", "144", "5.4", "6.5", "12.5/18.1"]  # fmt: skip


def test_milestones_add_up_the_phases_until_the_symbols() -> None:
    phases = {"history": 88.6, "merge_paths": 7.1, "symbols": 209.5, "texts": 16.1, "merges": 45.4}
    assert milestones({"phase_seconds": phases}) == {"keyword_lanes_s": 88.6, "symbols_s": 305.2}
    # a short run has no symbols phase of its own (its readers attach them): nothing to report, not a guess
    assert milestones({"phase_seconds": {"history": 3.0, "merges": 0.5}}) == {"keyword_lanes_s": 3.0, "symbols_s": None}
    assert milestones({}) == {"keyword_lanes_s": None, "symbols_s": None}


def test_phase_cpu_splits_the_series_at_the_reported_phases() -> None:
    series = [(0.0, 0.0), (10.0, 20.0), (20.0, 30.0), (30.0, 60.0)]
    # consecutive from the start: history 0-15 s, merges 15-20 s, symbols 20-40 s (past the end: clamped)
    assert phase_cpu(series, {"history": 15.0, "merges": 5.0, "symbols": 20.0}) == {
        "history": 25.0, "merges": 5.0, "symbols": 30.0,
    }  # fmt: skip
    assert phase_cpu([], {"history": 1.0}) == {"history": 0.0}


def test_phase_peaks_are_the_highest_second_inside_each_phase() -> None:
    mb = MB  # the sampler keeps bytes
    series = [(0.0, 100 * mb), (1.0, 300 * mb), (2.0, 200 * mb), (3.0, 900 * mb), (4.0, 400 * mb)]
    # history 0-2 s (the start-up sample included), merges 2-3 s, symbols 3-10 s
    assert phase_peaks(series, {"history": 2.0, "merges": 1.0, "symbols": 7.0}) == {
        "history": 300.0, "merges": 900.0, "symbols": 400.0,
    }  # fmt: skip
    assert phase_peaks([], {"history": 1.0}) == {"history": 0.0}


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads Linux's /proc")
def test_tree_cpu_counts_a_busy_child_and_a_reaped_one() -> None:
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    before = tree_cpu(os.getpid())
    subprocess.run([sys.executable, "-c", spin], check=True)  # exited and reaped: counted through this process
    assert tree_cpu(os.getpid()) - before >= 0.45
    child = subprocess.Popen([sys.executable, "-c", spin + "\nimport sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while tree_cpu(child.pid) < 0.45 and time.monotonic() < deadline:  # alive: its own time
            time.sleep(0.05)
        assert tree_cpu(child.pid) >= 0.45
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
