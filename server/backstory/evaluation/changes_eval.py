"""How well a change finds its related commits: ``backstory query --changes`` measured on real histories.

Pairs of related commits are mined from the history itself:

- **named**: a commit whose message names another commit of the history by sha (``Fixes: <sha>``, "regression
  from <sha>", "This reverts commit <sha>", "(cherry picked from commit <sha>)", "follow-up to <sha>");
- **pull request**: the non-merge commits a GitHub pull request brought in (``evaluation/pr_titles.py``): the
  query is one of them (the newest), and any other commit of the same pull request answers it.

Each query is a commit's own change, made into a query as ``--changes REV`` makes it, searched on an index of
the whole history with that commit left out. Reported: R@1, R@10, MRR@10 of the first partner, for the full
pipeline (every lane, fusion, rerank, learned ordering) and for plain BM25 on the changed lines (the diff lane
alone, its query the changed lines only, no rerank).

    python -m backstory.evaluation.changes_eval REPO [--index-dir DIR] [--max-pairs 150] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..features.changes import commit_change, prior_art_for_change
from ..models.passages import changed_lines
from ..search.engine import Engine
from ..search.options import SearchOptions
from .pr_titles import pull_requests

SHA_WORD = re.compile(r"\b[0-9a-f]{7,40}\b")
K = 10


@dataclass(frozen=True)
class Pair:
    kind: str  # "named" | "pull-request"
    query: str  # the commit whose change is the query
    answers: frozenset[str]  # any of these found counts


def named_pairs(engine: Engine) -> list[Pair]:
    indexed = engine.catalog.indexed_shas()
    out = []
    for sha in sorted(indexed):
        row = engine.catalog.message_row(sha)
        if row is None:
            continue
        found = set()
        for word in SHA_WORD.findall(f"{row[1]}\n{row[2]}"):
            hits = [s for s in engine.catalog.shas_with_prefix(word, 2) if s != sha]
            if len(hits) == 1 and hits[0] in indexed:
                found.add(hits[0])
        if found:
            out.append(Pair("named", sha, frozenset(found)))
    return out


def pr_pairs(engine: Engine) -> list[Pair]:
    indexed = engine.catalog.indexed_shas()
    out = []
    for pr in pull_requests(engine.root, indexed):
        commits = sorted(
            (c for c in pr.commits if c in indexed and (engine.catalog.message_row(c) or (0,))[0] > 0),
            key=lambda c: (engine.catalog.commit_rows([c])[c]["commit_time"], c),
        )
        if len(commits) >= 2:
            out.append(Pair("pull-request", commits[-1], frozenset(commits[:-1])))
    return out


def rank(result: dict[str, Any], answers: frozenset[str]) -> int | None:
    for i, r in enumerate(result["results"], 1):
        shas = {r["commit"]["sha"], *(t["sha"] for t in r.get("twins", []))}
        if shas & answers:
            return i
    return None


def scores(ranks: list[int | None]) -> dict[str, float]:
    n = max(len(ranks), 1)
    return {
        "n": len(ranks),
        "R@1": round(sum(1 for r in ranks if r == 1) / n, 4),
        "R@10": round(sum(1 for r in ranks if r is not None and r <= K) / n, 4),
        "MRR@10": round(sum(1 / r for r in ranks if r is not None and r <= K) / n, 4),
    }


def bm25_changed_lines(engine: Engine, pair: Pair, change: Any) -> int | None:
    text = "\n".join(line for f in change.files for h in f.hunks for line in changed_lines(h.excerpt))[:4000]
    opts = SearchOptions(k=K + 1, rerank=False, lanes=("diff",))
    result = engine.search(text, opts)
    result["results"] = [r for r in result["results"] if r["commit"]["sha"] != pair.query][:K]
    return rank(result, pair.answers)


def evaluate(repo: str, index_dir: str | None, max_pairs: int, seed: int = 7) -> dict[str, Any]:
    with Engine(repo, index_dir) as engine:
        pairs = named_pairs(engine) + pr_pairs(engine)
        random.Random(seed).shuffle(pairs)
        pairs = pairs[:max_pairs]
        rows: list[dict[str, Any]] = []
        for i, pair in enumerate(pairs):
            change = commit_change(engine, pair.query)
            if not change.files:
                continue
            full = prior_art_for_change(engine, change, SearchOptions(k=K))
            rows.append(
                {
                    "kind": pair.kind,
                    "query": pair.query,
                    "answers": sorted(pair.answers),
                    "full": rank(full, pair.answers),
                    "bm25": bm25_changed_lines(engine, pair, change),
                }
            )
            print(f"{i + 1}/{len(pairs)} {pair.kind} {pair.query[:8]} full={rows[-1]['full']} "
                  f"bm25={rows[-1]['bm25']}", file=sys.stderr)  # fmt: skip
    report: dict[str, Any] = {"repo": repo, "pairs": len(rows), "by_kind": {}}
    for kind in ("all", "named", "pull-request"):
        sel = [r for r in rows if kind == "all" or r["kind"] == kind]
        report["by_kind"][kind] = {
            "full": scores([r["full"] for r in sel]),
            "bm25_changed_lines": scores([r["bm25"] for r in sel]),
        }
    report["rows"] = rows
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("--index-dir")
    ap.add_argument("--max-pairs", type=int, default=150)
    ap.add_argument("--json", help="write the report (with every pair's ranks) here")
    args = ap.parse_args(argv)
    report = evaluate(args.repo, args.index_dir, args.max_pairs)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(json.dumps({"repo": report["repo"], "pairs": report["pairs"], **report["by_kind"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Pair", "evaluate", "named_pairs", "pr_pairs"]
