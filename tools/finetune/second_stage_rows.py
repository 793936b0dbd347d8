"""Training rows for the learned second stage from one history: per commit-subject query, the feature rows
(``search.features``) of the candidates the shipped first stage + MaxSim rerank hand it, and which is right.

usage: python second_stage_rows.py NAME REPO INDEX_DIR OUT_DIR [--queries 400] [--test 200] [--seed 1]
       [--model DIR] [--pr-titles | --questions FILE.jsonl] [--dense-pool N] [--rerank-top N]

INDEX_DIR holds a backstory index of REPO, its dense phase done with the default model: built with
``--no-messages`` for commit-subject queries (the evaluation's protocol), with messages for the queries a
message-holding index is searched with. The engine computes the rows itself (``Engine.candidate_features``),
so training sees exactly what search scores. Subject queries are drawn as the evaluation draws them, after its
first ``--test`` (pass ``--test 0`` for a history that is never evaluated); ``--pr-titles`` uses pull-request
titles instead, drawn as ``evaluate --pr-titles`` draws them, after its first ``--test`` too (any of the pull
request's commits is right; a group's ``paraphrased`` says whether the title is none of their subjects);
``--questions`` uses a natural-question set (tools/questions/, the dev set's recipe; for training, never a
development history's): every question whose commit has indexed hunks, in the file's order (``--queries``,
``--test`` and ``--seed`` do not apply), its ``sha`` the right commit and the group's ``kind`` its ``kind``
(``question`` or ``phrase``). Writes OUT_DIR/NAME.rows.json (name question rows e.g. ``NAME+q``, so that
``train_second_stage.py`` reports them as their own kind); a group's ``relevant`` lists the right commits.
"""

import json
from pathlib import Path

from pairs import history_parser

from backstory.evaluation.evaluate import CONFIGS, indexed_commits, load_questions, options_for, pr_title_sample, sample
from backstory.search.engine import Engine
from backstory.search.features import FEATURES
from backstory.search.options import ModelConfig, SearchOptions


def main() -> None:
    ap = history_parser()
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--model", help="the embedding model the index was built with, when not the default")
    kind = ap.add_mutually_exclusive_group()
    kind.add_argument("--pr-titles", action="store_true", help="pull-request titles as queries, not commit subjects")
    kind.add_argument("--questions", type=Path, help="a natural-question set (JSON lines) as queries")
    ap.add_argument("--dense-pool", type=int, default=SearchOptions().dense_pool, help="see SearchOptions.dense_pool")
    ap.add_argument("--rerank-top", type=int, default=SearchOptions().rerank_top, help="see SearchOptions.rerank_top")
    args = ap.parse_args()
    engine = Engine(args.repo, args.index, ModelConfig(dense=True, reranker="maxsim", model_path=args.model))
    seen: dict = {}
    rerank, fused = engine.rerank.scores, engine.lanes.fused

    def record_rerank(query, top, commits, no_messages):
        out = rerank(query, top, commits, no_messages)
        seen["rerank"], seen["top"] = out[0], top
        return out

    def record_fused(*args):  # (candidates, lanes, lanes' commit scores)
        out = fused(*args)
        seen["scores"] = out[2]
        return out

    engine.rerank.scores = record_rerank
    engine.lanes.fused = record_fused
    recorded = {**CONFIGS["fused+rerank"], "second_stage": "blend", "dense_pool": args.dense_pool}
    opts = options_for(recorded, args.rerank_top)
    if args.questions:  # (query, right commits, the group's extra keys)
        kept, left_out = load_questions(args.questions, indexed_commits(engine))
        queries = [(q["question"], [q["sha"]], {"kind": q["kind"]}) for q in kept]
        if left_out:
            print(args.name, left_out, "questions left out: their commit has no indexed hunks")
    elif args.pr_titles:  # paraphrased: a pull-request title that is none of its commits' subjects
        prs = pr_title_sample(args.repo, engine, args.queries, args.seed, skip=args.test)
        queries = [(pr.title, sorted(pr.commits), {"paraphrased": not pr.same_as_subject}) for pr in prs]
    else:
        drawn = sample(args.repo, engine, 10**9, args.seed)[args.test :][: args.queries]
        queries = [(s, [sha], {}) for s, sha in drawn]
    groups = []
    for query, relevant, extra in queries:
        seen.clear()
        engine.search(query, opts)
        if "rerank" not in seen:
            continue
        top = seen["top"]
        rows = engine.candidate_features(query, top, seen["rerank"], seen["scores"])
        groups.append({"query": query, "relevant": relevant, "candidates": [c.sha for c in top], "rows": rows, **extra})
    args.out.mkdir(parents=True, exist_ok=True)
    model_id = engine.dense.embedder().model_id
    dump = {
        "name": args.name, "model": model_id, "messages": not engine._no_messages(), "features": list(FEATURES),
        "dense_pool": args.dense_pool, "rerank_top": args.rerank_top, "groups": groups,
    }  # fmt: skip
    (args.out / f"{args.name}.rows.json").write_text(json.dumps(dump))
    found = sum(bool(set(g["relevant"]) & set(g["candidates"])) for g in groups)
    print(args.name, len(groups), "queries,", found, "with the right commit among the candidates")


if __name__ == "__main__":
    main()
