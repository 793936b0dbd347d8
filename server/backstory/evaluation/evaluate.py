"""Ranking-quality evaluation: ``python -m backstory.evaluation.evaluate REPO [--queries N] [--index-dir D]``.

Queries are commit subject lines; the relevant result is that commit. The index is built with ``--no-messages``,
so the subject is never searchable text and the lanes must find the commit from its diff alone. Reports
Recall@1/5/10 and MRR@10 per configuration (BM25 lanes, dense only, fused, fused + rerank, ...).

``--pr-titles`` measures the other kind of index, the default one, with messages: pull-request titles as
queries, any of the pull request's commits right (:mod:`backstory.evaluation.pr_titles`), and the paraphrased titles
(those equal to none of the commits' subjects) reported apart as well.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..history.libgit import walk
from ..history.repo import head_sha, open_repo
from ..index.build import BuildOptions, index_repository
from ..index.values import read_excerpts
from ..search import learned
from ..search.engine import Engine
from ..search.options import DEFAULT_WEIGHTS, TEXT_LANES, ModelConfig, SearchOptions
from . import pr_titles
from .bench import emit
from .ranks import metrics
from .rerank_variants import VARIANTS, VariantReranker
from .side_studies import history_vs_git, unit_experiment

DEFAULTS = SearchOptions()
NO_DENSE = {**DEFAULT_WEIGHTS, "dense": 0.0, "message_dense": 0.0}
# the first stage before commit-level aggregation: no size prior, the dense lane's best file per commit
PREVIOUS = {
    "size_prior": 0.0, "dense_commits": "best-file", "weights": {**DEFAULT_WEIGHTS, "dense": 0.43}, "rerank_blend": 1.0,
    "second_stage": "blend",
}  # fmt: skip
CONFIGS: dict[str, dict[str, Any]] = {
    "bm25": {"weights": NO_DENSE, "rerank": False},  # the default keyword lanes, as shipped
    "bm25-plain": {"reference": True, "weights": NO_DENSE, "rerank": False},  # textbook BM25 (plain_bm25)
    # textbook BM25 over hunks with the commit message prepended: the with-messages baseline
    "bm25-plain-msg": {"reference": "message", "weights": NO_DENSE, "rerank": False},
    "bm25-previous": {"weights": NO_DENSE, "rerank": False, "size_prior": 0.0},  # without the size prior
    "bm25-equal-lanes": {"lanes": TEXT_LANES, "rerank": False},  # every keyword lane at weight 1
    "dense": {"lanes": ("dense",), "rerank": False},
    "dense-best-file": {"lanes": ("dense",), "rerank": False, "dense_commits": "best-file"},
    "fused": {"rerank": False},
    "fused-previous": {**PREVIOUS, "rerank": False},
    "fused+rerank-previous": {**PREVIOUS, "rerank": True},
    "fused-rrf": {"rerank": False, "fusion": "rrf", "weights": {**DEFAULT_WEIGHTS, "dense": 0.5}},  # RRF instead
    "fused+rerank": {"rerank": True},  # the learned second stage over the rerank (shipped)
    "fused+rerank-blend": {"rerank": True, "second_stage": "blend"},  # rerank + 0.5 x fused (before the 8th session)
    # the reranked candidates without the dense lane's top 10 (before the tenth session)
    "fused+rerank-pool0": {"rerank": True, "dense_pool": 0},
    "fused+rerank-blend-pool0": {"rerank": True, "second_stage": "blend", "dense_pool": 0},
    "fused+rerank-blend1": {"rerank": True, "second_stage": "blend", "rerank_blend": 1.0},
    "fused+rerank-only": {"rerank": True, "second_stage": "blend", "rerank_blend": 0.0},  # rerank score alone
    "fused+rerank-blend3": {"rerank": True, "second_stage": "blend", "rerank_blend": 3.0},
    "fused-fixed": {"rerank": False, "margin_ref": 0.0},  # the dense weight fixed (before the keyword margin)
    "fused+rerank-fixed": {"rerank": True, "margin_ref": 0.0},
    "fused-dense0.43": {"rerank": False, "weights": {**DEFAULT_WEIGHTS, "dense": 0.43}},  # before the fifth session
    "fused+rerank-dense0.43": {"rerank": True, "weights": {**DEFAULT_WEIGHTS, "dense": 0.43}},
}
# evaluation-only rerank variants (states recomputed with the model, one factor swapped): rerank_variants.py
# the message lane's weight (docs/ranking-natural-questions.md); md0 is the pipeline without it
CONFIGS["message-dense"] = {"lanes": ("message_dense",), "rerank": False}
for _w in ("0", "0.5", "1", "1.5", "2", "3", "4", "6"):
    CONFIGS[f"fused-md{_w}"] = {"rerank": False, "weights": {**DEFAULT_WEIGHTS, "message_dense": float(_w)}}
    CONFIGS[f"fused+rerank-md{_w}"] = {"rerank": True, "weights": {**DEFAULT_WEIGHTS, "message_dense": float(_w)}}
    CONFIGS[f"fused+rerank-md{_w}-pool10"] = {**CONFIGS[f"fused+rerank-md{_w}"], "message_pool": 10}
CONFIGS.update({f"rr:{name}": {"rerank": True, "second_stage": "blend", "rerank_variant": name} for name in VARIANTS})
CONFIGS.update({f"rrl:{name}": {"rerank": True, "rerank_variant": name} for name in VARIANTS})


def plain_bm25(engine: Engine, with_message: bool = False) -> Callable[[str], list[str]]:
    """A textbook reference, not a backstory lane: BM25 over each hunk's stored text with Tantivy's default
    tokenizer (no identifier splitting, stemming, field boosts or size prior), a commit scoring its best hunk.

    It is the baseline the issue's independent experiment reported (".238, BM25 over hunk text"); backstory's
    own keyword lanes (config ``bm25``) are stronger, so ratios against them are the stricter comparison.
    ``with_message`` prepends the commit's subject and body to every hunk: the textbook baseline for an index
    with messages (issue #25: "BM25 over hunks with the message prepended").
    """
    import re

    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("text", stored=False, tokenizer_name="default")
    sb.add_text_field("sha", stored=True, tokenizer_name="raw")
    schema = sb.build()
    index = tantivy.Index(schema)  # in memory
    writer = index.writer(heap_size=100_000_000, num_threads=1)
    messages = {}
    if with_message:
        messages = {
            sha: f"{subj}\n{body}"
            for sha, subj, body in engine.store.db.execute("SELECT sha, subject, body FROM commits")
        }
    rows = engine.store.db.execute(
        "SELECT f.sha, h.fid, h.idx FROM hunks h JOIN files f ON f.fid = h.fid ORDER BY h.uid"
    ).fetchall()
    excerpts = read_excerpts(engine.store.db, (r[1] for r in rows))
    for sha, fid, idx in rows:
        excerpt = excerpts[fid][idx]
        text = f"{messages[sha]}\n{excerpt}" if with_message else excerpt
        writer.add_document(tantivy.Document(text=text, sha=sha))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(query: str) -> list[str]:
        terms = sorted({t.lower() for t in re.findall(r"[^\W_]+", query) if len(t) <= 40})
        if not terms:
            return []
        q = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", t)) for t in terms]
        )
        best: dict[str, float] = {}
        for score, address in searcher.search(q, 500).hits:
            sha = searcher.doc(address)["sha"][0]
            best[sha] = max(score, best.get(sha, score))
        return [sha for sha, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))]

    return search


def _hit_shas(hit: dict[str, Any]) -> list[str]:
    return [hit["commit"]["sha"], *(t["sha"] for t in hit.get("twins", ()))]


def indexed_commits(engine: Engine) -> set[str]:
    """Commits with at least one indexed hunk: the only ones a search can return."""
    return {r[0] for r in engine.store.db.execute("SELECT DISTINCT f.sha FROM files f JOIN hunks h ON h.fid = f.fid")}


def pr_title_sample(repo_path: Path, engine: Engine, n: int, seed: int, skip: int = 0) -> list[pr_titles.PullRequest]:
    """``n`` pull requests with indexed commits, shuffled by ``seed``, after the first ``skip`` (the evaluation's
    own, for a training history that is also evaluated)."""
    prs = pr_titles.pull_requests(repo_path, indexed_commits(engine))
    return pr_titles.sample(prs, skip + n, seed)[skip:]


def sample(repo_path: Path, engine: Engine, n: int, seed: int) -> list[tuple[str, str]]:
    repo = open_repo(repo_path)
    with_hunks = indexed_commits(engine)
    pairs = sorted(
        (c.subject, c.sha) for c in walk(repo, head_sha(repo))
        if not c.is_merge and len(c.subject.split()) >= 3 and c.sha in with_hunks
    )  # fmt: skip
    random.Random(seed).shuffle(pairs)
    return pairs[:n]


def load_questions(path: Path, indexed: set[str]) -> tuple[list[dict[str, Any]], int]:
    """A natural-question set (tools/questions/sets/*.jsonl): its questions whose commit has indexed hunks,
    and how many were left out because it has none."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    kept = [r for r in rows if r["sha"] in indexed]
    return kept, len(rows) - len(kept)


def options_for(cfg: dict[str, Any], rerank_top: int) -> SearchOptions:
    """A configuration's search options: the defaults, overridden by the configuration's keys."""
    return SearchOptions(
        k=10, lanes=cfg.get("lanes"), rerank=cfg["rerank"], rerank_top=rerank_top,
        weights=dict(cfg.get("weights", DEFAULT_WEIGHTS)), rerank_blend=cfg.get("rerank_blend", DEFAULTS.rerank_blend),
        fusion=cfg.get("fusion", DEFAULTS.fusion), size_prior=cfg.get("size_prior", DEFAULTS.size_prior),
        dense_commits=cfg.get("dense_commits", DEFAULTS.dense_commits),
        margin_ref=cfg.get("margin_ref", DEFAULTS.margin_ref),
        second_stage=cfg.get("second_stage", DEFAULTS.second_stage),
        dense_pool=cfg.get("dense_pool", DEFAULTS.dense_pool),
        message_pool=cfg.get("message_pool", DEFAULTS.message_pool),
    )  # fmt: skip


def miss(engine: Engine, subject: str, sha: str, rank: int | None, results: list[dict[str, Any]]) -> dict[str, Any]:
    """What a failed query looked like: the wanted commit's files and hunk count, and the top three hits'."""

    def brief(c: str) -> dict[str, Any]:
        db = engine.store.db
        paths = [r[0] for r in db.execute("SELECT path FROM files WHERE sha=? ORDER BY path LIMIT 4", (c,))]
        n = db.execute("SELECT n_hunks FROM commits WHERE sha=?", (c,)).fetchone()
        return {"sha": c[:10], "hunks": n[0] if n else None, "paths": paths}

    return {
        "query": subject, "rank": rank, "wanted": brief(sha),
        "top": [brief(r["commit"]["sha"]) for r in results[:3]],
    }  # fmt: skip


def _share_rerank_scores(engine: Engine) -> None:
    """Configurations that differ only in how rerank scores are blended see the same candidates (same query,
    commits and hunks), so the real reranker runs once per candidate set; ms/query of later ones is lower."""
    memo: dict[Any, Any] = {}
    rerank = engine.rerank.scores

    def shared(query: str, top: list[Any], commits: dict[str, Any], no_messages: bool) -> Any:
        key = (query, no_messages, tuple((c.sha, tuple(c.hunks)) for c in top))
        if key not in memo:
            memo[key] = rerank(query, top, commits, no_messages)
        return memo[key]

    engine.rerank.scores = shared  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m backstory.evaluation.evaluate")
    ap.add_argument("repo")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--index-dir", help="reuse/keep the evaluation index here (message-blind unless --pr-titles)")
    ap.add_argument(
        "--pr-titles",
        action="store_true",
        help="query with pull-request titles over an index WITH messages (any of the pull request's commits is "
        "right) instead of commit subjects over a message-blind one",
    )
    ap.add_argument(
        "--questions",
        help="query with a natural-question set (tools/questions/sets/*.jsonl, one commit right per question) over "
        "an index with messages (or --message-blind); reports per query kind as well",
    )
    ap.add_argument("--message-blind", action="store_true", help="with --questions: a message-blind index")
    slow = ("rr:", "rrl:")  # the rerank variants run the model per candidate
    ap.add_argument("--configs", default=",".join(c for c in CONFIGS if not c.startswith(slow)))
    ap.add_argument("--rerank-top", type=int, default=20)
    ap.add_argument("--unit-experiment", action="store_true", help="compare per-file and per-hunk dense units")
    ap.add_argument("--history", type=int, default=0, help="also compare N symbol histories with git log -L")
    ap.add_argument("--dump-misses", type=int, default=0, help="list the first N queries not ranked first")
    ap.add_argument("--out")
    ap.add_argument(
        "--model",
        help="embedding model directory (model.onnx + tokenizer.json) instead of the default model; the index's "
        "vectors are embedded again when it differs from the one they were made with",
    )
    ap.add_argument(
        "--second-stage-model",
        help="apply this learned second-stage model (JSON) to every search, whatever embedding model the index "
        "was built with (the bundled ones apply only to the bundled embedding model's scores)",
    )
    ap.add_argument(
        "--cross-encoder",
        help="rerank with the cross-encoder in this directory (model.onnx + tokenizer.json) instead of MaxSim",
    )
    args = ap.parse_args(argv)
    if args.pr_titles and args.unit_experiment:
        ap.error("--unit-experiment measures commit-subject queries; leave out --pr-titles")
    if args.cross_encoder:  # checked first: a broken one would otherwise quietly measure "no rerank"
        from ..models import ModelUnavailable, load_reranker

        try:
            load_reranker("cross-encoder", None, Path(args.cross_encoder))
        except ModelUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.second_stage_model:  # likewise: an unreadable one would quietly measure the blend
        try:
            learned.load(args.second_stage_model)
        except learned.SecondStageUnavailable as exc:
            print(f"error: {args.second_stage_model}: {exc}", file=sys.stderr)
            return 2
    repo_path = Path(args.repo).resolve()
    messages = args.pr_titles or (args.questions is not None and not args.message_blind)
    default_dir = "backstory-eval-messages" if messages else "backstory-eval"
    index_dir = Path(args.index_dir) if args.index_dir else Path(repo_path / ".git" / default_dir)
    t = time.perf_counter()
    index_repository(repo_path, options=BuildOptions(no_messages=not messages), index_dir=index_dir)
    reranker = "cross-encoder" if args.cross_encoder else "maxsim"
    config = ModelConfig(
        model_path=args.model, dense=True, reranker=reranker, cross_encoder_dir=args.cross_encoder,
        second_stage_path=args.second_stage_model,
    )  # fmt: skip
    engine = Engine(repo_path, index_dir, config)
    needs_dense = args.unit_experiment or any(
        "dense" in (CONFIGS[c].get("lanes") or ()) or CONFIGS[c].get("rerank")
        or (CONFIGS[c].get("lanes") is None and CONFIGS[c].get("weights", DEFAULT_WEIGHTS).get("dense", 0) > 0)
        for c in args.configs.split(",") if c
    )  # fmt: skip
    emb = engine.dense.embedder() if needs_dense else None
    if emb is not None:
        from ..index.dense_build import embed_pending

        with engine.store.write_lock():
            embed_pending(engine.store, emb)
    build_s = time.perf_counter() - t
    _share_rerank_scores(engine)
    shipped_rerank = engine.rerank.scores
    files = engine.store.db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0]
    kinds: dict[str, list[bool]] = {}
    if args.questions:
        questions, left_out = load_questions(Path(args.questions), indexed_commits(engine))
        cases = [(q["question"], frozenset((q["sha"],))) for q in questions]
        kinds = {
            "question": [q["kind"] == "question" for q in questions],
            "phrase": [q["kind"] == "phrase" for q in questions],
            "no_identifier": [q["identifiers"] == 0 for q in questions],
            "one_identifier": [q["identifiers"] == 1 for q in questions],
        }
    elif args.pr_titles:
        prs = pr_title_sample(repo_path, engine, args.queries, args.seed)
        cases = [(pr.title, pr.commits) for pr in prs]
        paraphrased = [not pr.same_as_subject for pr in prs]
    else:
        queries = sample(repo_path, engine, args.queries, args.seed)
        cases = [(subject, frozenset((sha,))) for subject, sha in queries]
    report: dict[str, Any] = {
        "repo": str(repo_path), "queries": len(cases), "build_s": round(build_s, 1), "file_units": files,
        "model": emb.model_id if emb is not None else None, "messages": messages,
    }  # fmt: skip
    if args.questions:
        report["questions_file"] = args.questions
        report["questions_without_indexed_hunks"] = left_out
    for name in [c for c in args.configs.split(",") if c]:
        opts = options_for(CONFIGS[name], args.rerank_top)
        variant = CONFIGS[name].get("rerank_variant")
        engine.rerank.scores = VariantReranker(engine, VARIANTS[variant]) if variant else shipped_rerank  # type: ignore[method-assign]
        ranks: list[int | None] = []
        misses: list[dict[str, Any]] = []
        t = time.perf_counter()
        ref = CONFIGS[name].get("reference")
        reference = plain_bm25(engine, with_message=ref == "message") if ref else None
        for query, right in cases:
            if reference is not None:
                shas, results = reference(query)[:10], []
            else:
                results = engine.search(query, opts)["results"]
                # a hit stands for its identical twins too (cherry-picks shown once): right if any of them is
                shas = [next((t for t in _hit_shas(r) if t in right), r["commit"]["sha"]) for r in results]
            ranks.append(next((i + 1 for i, sha in enumerate(shas) if sha in right), None))
            if results and ranks[-1] != 1 and len(misses) < args.dump_misses:
                wanted = next((sha for sha in shas if sha in right), min(right))  # the one found, else any
                misses.append(miss(engine, query, wanted, ranks[-1], results))
        report[name] = {**metrics(ranks), "ms_per_query": round((time.perf_counter() - t) * 1000 / len(cases), 1)}
        if args.pr_titles and not args.questions:
            kept = [r for r, p in zip(ranks, paraphrased, strict=True) if p]
            report[name]["paraphrased"] = {**metrics(kept), "n": len(kept)} if kept else None
        for kind, mask in kinds.items():
            kept = [r for r, m in zip(ranks, mask, strict=True) if m]
            report[name][kind] = {**metrics(kept), "n": len(kept)} if kept else None
        print(name, report[name], file=sys.stderr)
        if misses:
            report[name]["misses"] = misses
    if args.history:
        report["history_vs_git_log_L"] = history_vs_git(engine, repo_path, args.history, args.seed)
        print("history", report["history_vs_git_log_L"], file=sys.stderr)
    if args.unit_experiment:
        report["units"] = unit_experiment(engine, queries)
        print("units", report["units"], file=sys.stderr)
    for base in ("bm25", "bm25-plain", "bm25-plain-msg"):
        if base in report and "fused+rerank" in report and report[base]["MRR@10"]:
            gain = report["fused+rerank"]["MRR@10"] / report[base]["MRR@10"]
            report[f"gain_fused_rerank_vs_{base.replace('-', '_')}"] = round(gain, 3)
    emit(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
