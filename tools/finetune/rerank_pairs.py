"""Reranker training groups from one history: commit subject -> the fused first stage's candidates, as text.

usage: python rerank_pairs.py NAME REPO INDEX_DIR OUT_DIR [--queries 300] [--test 200] [--seed 1] [--top 50]

INDEX_DIR holds a backstory index of REPO built with ``--no-messages`` *with* its dense phase done (the default
model), so the candidates are exactly those the shipped first stage hands the second stage, and each
candidate's text is exactly what a text reranker reads (``search.rerank.commit_passages``: the commit's best
hunks). Queries are drawn as the evaluation draws them; its first ``--test`` (seed 1) are skipped, so training
never sees the evaluation's test queries. Writes OUT_DIR/NAME.rerank.json: per query the subject, the right
commit, and the fused top ``--top`` as [sha, passage] best first (the right one may be missing).
"""

import json

from pairs import history_parser

from backstory.evaluation.evaluate import CONFIGS, options_for, sample
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig
from backstory.search.rerank import commit_passages


def main() -> None:
    ap = history_parser()
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--top", type=int, default=50)
    args = ap.parse_args()
    engine = Engine(args.repo, args.index, ModelConfig(dense=True, reranker="maxsim"))
    captured: list[tuple[str, list[str], list[str]]] = []

    def record(query, top, commits, no_messages):  # stands in for the second stage: keeps what it would read
        rows = engine.catalog.hunk_rows([u for c in top for u in c.hunks])
        captured.append((query, [c.sha for c in top], commit_passages(top, rows, commits, no_messages)))
        return {}, None, None

    engine.rerank.scores = record
    opts = options_for(CONFIGS["fused+rerank"], args.top)
    groups = []
    found = 0
    for subject, sha in sample(args.repo, engine, 10**9, args.seed)[args.test : args.test + args.queries]:
        captured.clear()
        engine.search(subject, opts)
        if not captured:
            continue
        _query, shas, passages = captured[0]
        found += sha in shas
        groups.append({"query": subject, "sha": sha, "candidates": [list(p) for p in zip(shas, passages, strict=True)]})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.rerank.json").write_text(json.dumps({"name": args.name, "groups": groups}))
    print(args.name, len(groups), "queries,", found, f"with the right commit in the top {args.top}")


if __name__ == "__main__":
    main()
