"""Side studies ``evaluate`` can add to a ranking run: per-file against per-hunk dense units
(``--unit-experiment``), and exact symbol history against ``git log -L`` (``--history N``)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..features.exact_history import symbol_history
from ..index.values import read_excerpts
from ..models.passages import file_passage
from ..search.engine import Engine
from ..search.options import SearchOptions
from .bench import history_positions
from .ranks import metrics


def unit_experiment(engine: Engine, queries: list[tuple[str, str]]) -> dict[str, Any]:
    """Dense-only ranking quality and embedding cost of per-(commit, file) units vs per-hunk units.

    Both recipes use the same text builder (path, symbols, changed lines; no subject: the index is
    message-blind); per-hunk vectors are computed here and searched exactly with numpy.
    """
    emb = engine.dense.embedder()
    db = engine.store.db
    sql = (
        "SELECT h.uid, f.sha, f.path, h.fid, h.idx, h.symbols FROM hunks h JOIN files f ON f.fid = h.fid ORDER BY h.uid"
    )
    rows = db.execute(sql).fetchall()
    excerpts = read_excerpts(db, (r["fid"] for r in rows))
    texts = [
        file_passage(r["path"], [s[0] for s in json.loads(r["symbols"])], None, [excerpts[r["fid"]][r["idx"]]])
        for r in rows
    ]
    t = time.perf_counter()
    mat = emb.embed(texts)
    hunk_s = time.perf_counter() - t
    files = db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0]
    sha_of = [r["sha"] for r in rows]
    hunk_ranks: list[int | None] = []
    file_ranks: list[int | None] = []
    opts = SearchOptions(k=10, lanes=("dense",), rerank=False, recency_weight=0.0)
    for subject, sha in queries:
        sims = mat @ emb.embed_query(subject)
        order = np.argsort(-sims, kind="stable")
        seen: list[str] = []
        for i in order:
            if sha_of[i] not in seen:
                seen.append(sha_of[i])
            if len(seen) == 10:
                break
        hunk_ranks.append(seen.index(sha) + 1 if sha in seen else None)
        shas = [r["commit"]["sha"] for r in engine.search(subject, opts)["results"]]
        file_ranks.append(shas.index(sha) + 1 if sha in shas else None)
    return {
        "per_file": {**metrics(file_ranks), "units": files},
        "per_hunk": {**metrics(hunk_ranks), "units": len(rows), "embed_s": round(hunk_s, 1),
                     "units_per_s": round(len(rows) / hunk_s, 1)},
    }  # fmt: skip


def history_vs_git(engine: Engine, repo_path: Path, n: int, seed: int) -> dict[str, Any]:
    """Precision and recall of ``backstory history`` against ``git log -L <start>,<end>:<path>`` (the oracle)
    over ``n`` definitions sampled from HEAD (git is only used here, never at run time)."""
    tp = ours_n = oracle_n = exact_match = 0
    checked = 0
    misses: list[str] = []
    for pos in history_positions(engine, n, seed):
        got = symbol_history(engine, pos)
        sym = got["symbol"]
        if sym is None:
            continue
        ours = [c["commit"]["sha"] for c in got["commits"]]
        out = subprocess.run(
            ["git", "-C", str(repo_path), "log", f"-L{sym['start']},{sym['end']}:{sym['path']}", "--format=%H", "-s"],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        oracle = [line for line in out.splitlines() if line.strip()]
        checked += 1
        tp += len(set(ours) & set(oracle))
        ours_n += len(ours)
        oracle_n += len(oracle)
        exact_match += int(set(ours) == set(oracle))
        if set(ours) != set(oracle) and len(misses) < 10:
            misses.append(f"{pos} {sym['name']}: +{len(set(ours) - set(oracle))} -{len(set(oracle) - set(ours))}")
    return {
        "definitions": checked,
        "precision": round(tp / ours_n, 4) if ours_n else None,
        "recall": round(tp / oracle_n, 4) if oracle_n else None,
        "identical_sets": exact_match,
        "commits_ours": ours_n,
        "commits_git": oracle_n,
        "examples_of_differences": misses,
    }
