"""Training pairs from one history: commit subject -> the commit's (commit, file) passages, BM25 hard negatives.

usage: python pairs.py NAME REPO INDEX_DIR OUT_DIR [--test 200] [--seed 1]

INDEX_DIR holds a keyword-only backstory index of REPO built with ``--no-messages`` (made or brought up to date
here; no embedding is needed): passages are the dense recipe's text without the subject, exactly what the
model embeds when a user indexes. Queries are drawn as the evaluation draws them (``evaluate.sample``); the
first ``--test`` of the same seed are the evaluation's test queries and are written but flagged, so training
never sees them. Hard negatives: the five best-ranked wrong commits of the keyword lanes for each query.
"""

import argparse
import json
from pathlib import Path

from backstory.evaluation.evaluate import CONFIGS, options_for, sample
from backstory.index.build import BuildOptions, index_repository
from backstory.index.dense_build import unit_passages
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig


def history_parser() -> argparse.ArgumentParser:
    """NAME REPO INDEX_DIR OUT_DIR [--test N] [--seed S]: what every per-history data script takes (the
    evaluation's test queries are the first ``--test`` of seed ``--seed``, so they must agree everywhere)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("repo", type=Path)
    ap.add_argument("index", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    return ap


def main() -> None:
    args = history_parser().parse_args()
    index_repository(args.repo, options=BuildOptions(no_messages=True), index_dir=args.index)
    engine = Engine(args.repo, args.index, ModelConfig(dense=False, reranker="none"))
    # every unit the dense phase would embed: the files of indexed commits, tombstones (embedded=-1) left out
    rows = engine.store.db.execute(
        "SELECT f.sha, f.fid FROM files f JOIN commits c ON c.sha=f.sha"
        " WHERE f.embedded>=0 AND c.state='indexed' ORDER BY f.fid"
    ).fetchall()
    fids = [fid for _, fid in rows]
    texts: list[str] = []
    for i in range(0, len(fids), 500):
        texts += unit_passages(engine.store, fids[i : i + 500], no_messages=True)
    pairs = sample(args.repo, engine, 10**9, args.seed)
    keyword = options_for(CONFIGS["bm25"], 20)
    negatives = {}
    for subject, sha in pairs[args.test :]:
        found = engine.search(subject, keyword)["results"]
        negatives[sha] = [r["commit"]["sha"] for r in found if r["commit"]["sha"] != sha][:5]
    out = {
        "name": args.name,
        "test": args.test,
        "pairs": [[subject, sha] for subject, sha in pairs],
        "units": [[sha, fid, text] for (sha, fid), text in zip(rows, texts, strict=True)],
        "negatives": negatives,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(out))
    print(args.name, len(pairs), "pairs,", len(rows), "units")


if __name__ == "__main__":
    main()
