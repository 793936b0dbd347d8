"""Fit the learned second stage (``backstory.search.learned``) on rows from ``second_stage_rows.py``.

usage: python train_second_stage.py OUT.json ROWS.json... [--held-out ROWS.json...] [--l2 1e-3] [--steps 400]
       [--leave-one-out]

A linear model over the standardised features, fitted by full-batch gradient descent on the listwise softmax
loss: per query, the cross-entropy of the right commit among its candidates (queries whose right commit is
not a candidate teach nothing and are skipped). Deterministic: zero start, full batches, no sampling.

Reports MRR@10 over the candidates for the fitted model and for the previous order (MaxSim + 0.5 x fused) on
every ``--held-out`` file (histories not trained on), and with ``--leave-one-out`` the same for each training
history with a model fitted on the others. Writes the model in the JSON form ``learned.load`` reads.
"""

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from backstory.search.features import FEATURES
from backstory.search.learned import LinearRanker

Data = tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]  # rows, labels, (start, end) per query


def load(paths: list[Path]) -> Data:
    rows, labels, spans = [], [], []
    for path in paths:
        for g in json.loads(path.read_text())["groups"]:
            start = len(rows)
            rows += g["rows"]
            labels += [float(sha == g["sha"]) for sha in g["candidates"]]
            spans.append((start, len(rows)))
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)), np.asarray(labels), spans


def fit(data: Data, l2: float, steps: int, lr: float = 0.5) -> LinearRanker:
    x, y, spans = data
    mean, scale = x.mean(0).round(6), x.std(0).round(6)
    scale[scale < 1e-6] = 1.0  # a constant feature (and after rounding, as the file stores it, never 0)
    z = (x - mean) / scale
    spans = [(s, e) for s, e in spans if y[s:e].any()]
    w = np.zeros(len(FEATURES))
    for _ in range(steps):
        grad = np.zeros_like(w)
        for s, e in spans:
            logits = z[s:e] @ w
            p = np.exp(logits - logits.max())
            grad += z[s:e].T @ (p / p.sum() - y[s:e])
        w -= lr * (grad / len(spans) + l2 * w)
    return LinearRanker("second-stage-linear", FEATURES, tuple(mean), tuple(scale), tuple(w.round(6)))


def mrr(scores: np.ndarray, data: Data) -> float:
    _x, y, spans = data
    total = 0.0
    for s, e in spans:
        order = sorted(range(e - s), key=lambda i: (-scores[s + i], i))[:10]  # ties: the first stage's order
        total += next((1.0 / (r + 1) for r, i in enumerate(order) if y[s + i]), 0.0)
    return total / max(1, len(spans))


def report(name: str, model: LinearRanker, data: Data) -> tuple[float, float]:
    x = data[0]
    before = mrr(x[:, FEATURES.index("maxsim")] + 0.5 * x[:, FEATURES.index("fused")], data)
    after = mrr(np.asarray(model.score(x.tolist())), data)
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
    args = ap.parse_args()
    if args.leave_one_out:
        print("leave one history out:")
        gains = []
        for path in args.rows:
            model = fit(load([p for p in args.rows if p != path]), args.l2, args.steps)
            before, after = report(path.stem, model, load([path]))
            gains.append(after / before if before else 1.0)
        print(f"  mean gain {np.mean(gains):.3f}x, better on {sum(g > 1 for g in gains)}/{len(gains)}")
    models = {json.loads(p.read_text()).get("model") for p in args.rows}
    if len(models) != 1 or None in models:
        raise SystemExit(f"the rows come from different or unnamed embedding models: {sorted(map(str, models))}")
    model = dataclasses.replace(fit(load(args.rows), args.l2, args.steps), embedding_model=models.pop())
    print("weights (on standardised features):")
    for name, w in zip(FEATURES, model.weights, strict=True):
        print(f"  {name:14s} {w:+.3f}")
    if args.held_out:
        print("held out:")
        for path in args.held_out:
            report(path.stem, model, load([path]))
    trained_on = sorted(p.name.removesuffix(".rows.json") for p in args.rows)
    extra = {"trained_on": trained_on, "l2": args.l2, "steps": args.steps}
    args.out.write_text(json.dumps(model.to_json(**extra), indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
