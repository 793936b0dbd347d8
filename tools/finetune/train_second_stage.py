"""Fit the learned second stage (``backstory.search.learned``) on rows from ``second_stage_rows.py``.

usage: python train_second_stage.py OUT.json ROWS.json... [--held-out ROWS.json...] [--l2 1e-3] [--steps 400]
       [--leave-one-out [--scored ROWS.json...]] [--features a,b,...] [--weight TAG=W ...]

A linear model over the standardised features, fitted by full-batch gradient descent on the listwise softmax
loss: per query, minus the log of the softmax probability of its right commits among the candidates (one for a
commit subject, any of a pull request's; queries with none among the candidates teach nothing and are skipped).
Deterministic: zero start, full batches, no sampling.

Reports MRR@10 over the candidates for the fitted model and for the previous order (MaxSim + 0.5 x fused) on
every ``--held-out`` file (histories not trained on), and with ``--leave-one-out`` the same for each training
history with a model fitted on the others (a history's files are ``NAME.rows.json`` and ``NAME+TAG.rows.json``,
e.g. its subject queries over a message-blind index and its pull-request titles over one with messages; all of
them are left out together), and the MRR@10 over all of a kind's queries pooled, with the pull-request titles that
are none of their commits' subjects (``paraphrased`` in the rows) apart, and natural questions
(``second_stage_rows.py --questions``) by their ``kind`` too (question, phrase). ``--weight +q=3`` counts every
query of the ``NAME+q`` files three times in the loss (default 1). ``--scored`` files are scored in leave-one-out
like the training files (by the model fitted without their history) but never fitted on: a model fitted on one
kind of query, measured on another. Writes the model in the JSON form ``learned.load`` reads. Rows from indexes with
and without messages are different pipelines and are never mixed; the model reads ``--features`` (default: all,
less the message features for message-blind rows, where they are always 0).
"""

import argparse
import dataclasses
import functools
import json
from pathlib import Path

import numpy as np

from backstory.search.features import FEATURES, MESSAGE_FEATURES
from backstory.search.learned import LinearRanker

Data = tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]  # rows, labels, (start, end) per query


@functools.cache
def read(path: Path) -> dict:
    """A rows file, parsed once per run (leave-one-out reloads every history many times)."""
    return json.loads(path.read_text())


def load(paths: list[Path]) -> Data:
    rows, labels, spans = [], [], []
    for path in paths:
        dump = read(path)
        if dump.get("features") != list(FEATURES):  # a row is a bare list: columns must mean what FEATURES says
            held = dump.get("features") or "not recorded: an older dump"
            raise SystemExit(f"{path} holds rows of other features ({held}): redump it with this FEATURES")
        for g in dump["groups"]:
            start = len(rows)
            rows += g["rows"]
            labels += [float(sha in g["relevant"]) for sha in g["candidates"]]
            spans.append((start, len(rows)))
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)), np.asarray(labels), spans


def query_weights(paths: list[Path], weight: dict[str, float]) -> np.ndarray:
    """Per query of ``load(paths)``, its weight in the loss: its file's kind's ``--weight``, 1 by default."""
    return np.concatenate([np.full(len(read(p)["groups"]), weight.get(kind_of(p), 1.0)) for p in paths])


def fit(
    data: Data, l2: float, steps: int, names: tuple[str, ...], lr: float = 0.5, weights: np.ndarray | None = None
) -> LinearRanker:
    x, y, spans = data
    weights = np.ones(len(spans)) if weights is None else weights
    x = x[:, [FEATURES.index(n) for n in names]]
    mean, scale = x.mean(0).round(6), x.std(0).round(6)
    scale[scale < 1e-6] = 1.0  # a constant feature (and after rounding, as the file stores it, never 0)
    z = (x - mean) / scale
    weights = np.asarray([w for w, (s, e) in zip(weights, spans, strict=True) if y[s:e].any()])
    spans = [(s, e) for s, e in spans if y[s:e].any()]
    # every query's candidates padded to the longest list (masked out), so that a step is a few array operations
    width = max((e - s for s, e in spans), default=0)
    zz = np.zeros((len(spans), width, len(names)))
    member = np.zeros((len(spans), width), dtype=bool)
    right = np.zeros((len(spans), width), dtype=bool)
    for i, (s, e) in enumerate(spans):
        zz[i, : e - s], member[i, : e - s], right[i, : e - s] = z[s:e], True, y[s:e] > 0
    w = np.zeros(len(names))
    for _ in range(steps):
        logits = np.where(member, zz @ w, -np.inf)
        p = np.exp(logits - logits.max(1, keepdims=True))
        # loss -log(sum of the right commits' probabilities): a pull request has several, any one first is a hit
        good = np.where(right, logits, -np.inf)
        q = np.exp(good - good.max(1, keepdims=True))
        diff = p / p.sum(1, keepdims=True) - q / q.sum(1, keepdims=True)
        grad = np.einsum("qc,qcf->f", diff * weights[:, None], zz)
        w -= lr * (grad / max(1.0, weights.sum()) + l2 * w)
    return LinearRanker("second-stage-linear", names, tuple(mean), tuple(scale), tuple(w.round(6)))


def history_of(path: Path) -> str:
    return path.name.removesuffix(".rows.json").split("+")[0]


def kind_of(path: Path) -> str:
    name = path.name.removesuffix(".rows.json")
    return name[len(history_of(path)) :]


def reciprocal_ranks(scores: np.ndarray, data: Data) -> list[float]:
    """Per query, 1 / the right commit's rank in the top 10 by ``scores`` (0 when it is not there)."""
    _x, y, spans = data
    out = []
    for s, e in spans:
        order = sorted(range(e - s), key=lambda i: (-scores[s + i], i))[:10]  # ties: the first stage's order
        out.append(next((1.0 / (r + 1) for r, i in enumerate(order) if y[s + i]), 0.0))
    return out


def mrr(scores: np.ndarray, data: Data) -> float:
    return float(np.mean(reciprocal_ranks(scores, data))) if data[2] else 0.0


def paraphrased(path: Path) -> list[bool] | None:
    """Per query of a rows file, whether it is a pull-request title that is none of its commits' subjects (None
    when the file does not say: commit subjects, or rows dumped before the flag existed)."""
    groups = read(path)["groups"]
    return [bool(g["paraphrased"]) for g in groups] if groups and "paraphrased" in groups[0] else None


def question_kinds(path: Path) -> list[str] | None:
    """Per query of a rows file of natural questions, its kind (question, phrase); None for other rows."""
    groups = read(path)["groups"]
    return [g["kind"] for g in groups] if groups and "kind" in groups[0] else None


def report(name: str, model: LinearRanker, data: Data) -> tuple[float, float]:
    x = data[0]
    before = mrr(x[:, FEATURES.index("maxsim")] + 0.5 * x[:, FEATURES.index("fused")], data)
    after = mrr(np.asarray(model.linear(x.tolist())), data)  # the order the engine uses (the logistic saturates)
    print(f"  {name:24s} MRR@10 {before:.3f} -> {after:.3f} ({after / before if before else 0:.3f}x)")
    return before, after


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("rows", type=Path, nargs="+")
    ap.add_argument("--held-out", type=Path, nargs="*", default=[])
    ap.add_argument("--l2", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--leave-one-out", action="store_true")
    ap.add_argument("--scored", type=Path, nargs="*", default=[], help="rows only scored in leave-one-out")
    ap.add_argument("--features", help="comma-separated subset of FEATURES the model reads")
    ap.add_argument("--weight", action="append", default=[], help="TAG=W: each query of NAME+TAG files counts W")
    ap.add_argument(
        "--embedding-model",
        help="stamp this embedding model id instead of the rows' own: for rows dumped through a --model directory"
        " holding the very graph the default model builds from its patch (a new patch's weights before it ships;"
        " check that both give the same vectors first)",
    )
    args = ap.parse_args()
    kinds = {read(p).get("messages") for p in args.rows + args.held_out + args.scored}
    if len(kinds) != 1 or None in kinds:
        raise SystemExit("the rows mix indexes with and without messages (or do not say): fit one model per kind")
    messages = kinds.pop()
    default = FEATURES if messages else tuple(f for f in FEATURES if f not in MESSAGE_FEATURES)
    names = tuple(args.features.split(",")) if args.features else default
    if unknown := [n for n in names if n not in FEATURES]:
        raise SystemExit(f"unknown features {unknown}; known: {list(FEATURES)}")
    weight = {tag: float(w) for tag, w in (item.split("=") for item in args.weight)}
    if args.leave_one_out:
        print("leave one history out:")
        gains: dict[str, list[float]] = {}
        pooled: dict[str, list[float]] = {}  # every query's reciprocal rank, per kind (and paraphrased titles)
        for history in sorted({history_of(p) for p in args.rows + args.scored}):
            train = [p for p in args.rows if history_of(p) != history]
            model = fit(load(train), args.l2, args.steps, names, weights=query_weights(train, weight))
            for path in (p for p in args.rows + args.scored if history_of(p) == history):
                data = load([path])
                before, after = report(path.stem, model, data)
                gains.setdefault(kind_of(path), []).append(after / before if before else 1.0)
                ranks = reciprocal_ranks(np.asarray(model.linear(data[0].tolist())), data)
                pooled.setdefault(kind_of(path) or "NAME", []).extend(ranks)
                if (flags := paraphrased(path)) is not None:
                    pooled.setdefault("paraphrased titles", []).extend(
                        r for r, p in zip(ranks, flags, strict=True) if p
                    )
                for r, kind in zip(ranks, question_kinds(path) or [""] * len(ranks), strict=True):
                    if kind:  # natural questions: questions and search-box phrases apart as well
                        pooled.setdefault(f"{kind_of(path)} {kind}s", []).append(r)
        for kind, g in sorted(gains.items()):
            print(f"  {kind or 'NAME'}: mean gain {np.mean(g):.3f}x, better on {sum(x > 1 for x in g)}/{len(g)}")
        for kind, ranks in sorted(pooled.items()):
            print(f"  {kind}: MRR@10 over all {len(ranks)} queries {np.mean(ranks) if ranks else 0.0:.4f}")
    models = {read(p).get("model") for p in args.rows}
    if len(models) != 1 or None in models:
        raise SystemExit(f"the rows come from different or unnamed embedding models: {sorted(map(str, models))}")
    stamped = args.embedding_model or models.pop()
    fitted = fit(load(args.rows), args.l2, args.steps, names, weights=query_weights(args.rows, weight))
    model = dataclasses.replace(fitted, embedding_model=stamped)
    print("weights (on standardised features):")
    for name, w in zip(names, model.weights, strict=True):
        print(f"  {name:14s} {w:+.3f}")
    if args.held_out:
        print("held out:")
        for path in args.held_out:
            report(path.stem, model, load([path]))
    trained_on = sorted({history_of(p) for p in args.rows})
    pools = {(read(p).get("rerank_top"), read(p).get("dense_pool")) for p in args.rows}
    top, pool = pools.pop() if len(pools) == 1 else (None, None)  # which candidates it was fitted on, if one kind
    extra = {"trained_on": trained_on, "messages": messages, "l2": args.l2, "steps": args.steps,
             "candidates": {"rerank_top": top, "dense_pool": pool}}  # fmt: skip
    if weight:
        extra["query_weights"] = weight
    args.out.write_text(json.dumps(model.to_json(**extra), indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
