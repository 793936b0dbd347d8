"""Train a cross-encoder reranker from the bundled MiniLM on rerank_pairs.py groups (an experiment: measured
and not shipped, docs/benchmarks.md "Ranking quality — seventh session").

usage: python train_reranker.py DATA_DIR OUT_DIR NAME [NAME ...] [--init FILE.onnx] [--head cos|linear]
       [--negatives 5] [--lr 3e-5] [--max-queries N] [--window 192] [--top 20] [--freeze-layers N] [--steps N]

Each training query is a group: the right commit's passage and ``--negatives`` wrong candidates drawn from the
first stage's top ``--top`` (what the second stage reranks at search time), scored jointly as
``[CLS] query [SEP] passage [SEP]`` -> one logit (see :class:`CrossEncoder` for the two heads); listwise
softmax cross-entropy over the group. Queries whose right commit the first stage missed are skipped (nothing
to learn from). Word and position embeddings stay frozen. Deterministic on one machine (seeded; two torch
threads).

Writes OUT_DIR/model.onnx (the base graph with the trained int8 weights and the head appended: inputs as the
base graph, output ``logits`` [batch, 1]) and OUT_DIR/tokenizer.json, i.e. a directory backstory's
``cross-encoder`` reranker loads (``python -m backstory.evaluation.evaluate REPO --cross-encoder OUT_DIR``).
"""

import argparse
import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from minilm import base_paths, build, export
from onnx import helper, numpy_helper
from tokenizers import Tokenizer


class CrossEncoder(nn.Module):
    """One logit per (query, passage) from their joint encoding.

    ``cos`` head (default): scale x cosine between the mean of the query segment's hidden states and the mean
    of the passage segment's. At the start this is nearly the bi-encoder's own score (what it was trained
    for), so training begins from a working ranker and learns what attending across the pair adds; a
    ``linear`` head over the mean of all states starts from nothing and, measured, barely moved in 200 steps.
    """

    def __init__(self, bert, head: str):
        super().__init__()
        self.bert = bert
        self.kind = head
        self.head = nn.Linear(384, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.scale = nn.Parameter(torch.tensor(20.0))

    def forward(self, ids, mask, types):
        h = self.bert(ids, mask, types)
        m = mask.unsqueeze(-1).float()
        if self.kind == "linear":
            return self.head((h * m).sum(1) / m.sum(1).clamp(min=1e-9)).squeeze(-1)
        t = types.unsqueeze(-1).float()
        q = (h * m * (1 - t)).sum(1) / (m * (1 - t)).sum(1).clamp(min=1e-9)
        p = (h * m * t).sum(1) / (m * t).sum(1).clamp(min=1e-9)
        return self.scale * F.cosine_similarity(q, p, dim=-1)


def add_head(onnx_path: Path, model: CrossEncoder) -> None:
    """Append the head (see :class:`CrossEncoder`) to the exported encoder graph: output ``logits`` [batch, 1]."""
    m = onnx.load(str(onnx_path))
    g = m.graph
    hidden = g.output[0].name

    def const(name: str, value: np.ndarray) -> str:
        g.initializer.append(numpy_helper.from_array(value, f"rerank_head.{name}"))
        return f"rerank_head.{name}"

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        g.node.append(helper.make_node(op, inputs, [f"rh_{out}"], **attrs))
        return f"rh_{out}"

    axis1 = const("axis1", np.array([1], dtype=np.int64))
    last = const("axis_last", np.array([-1], dtype=np.int64))
    mask = node("Unsqueeze", [node("Cast", ["attention_mask"], "mask_f", to=onnx.TensorProto.FLOAT), last], "mask")

    def mean(weights: str, name: str) -> str:
        total = node("ReduceSum", [node("Mul", [hidden, weights], f"{name}_x"), axis1], f"{name}_sum", keepdims=0)
        count = node("ReduceSum", [weights, axis1], f"{name}_n", keepdims=0)
        floor = const(f"{name}_floor", np.array(1e-9, dtype=np.float32))
        return node("Div", [total, node("Max", [count, floor], f"{name}_nc")], f"{name}_mean")

    if model.kind == "linear":
        pooled = mean(mask, "all")
        weight = const("weight", model.head.weight.detach().numpy().reshape(384, 1).astype(np.float32))
        bias = const("bias", model.head.bias.detach().numpy().astype(np.float32))
        node("Add", [node("MatMul", [pooled, weight], "mm"), bias], "logits_raw")
    else:
        types = node("Unsqueeze", [node("Cast", ["token_type_ids"], "type_f", to=onnx.TensorProto.FLOAT), last], "t")
        one = const("one", np.array(1.0, dtype=np.float32))
        q = mean(node("Mul", [mask, node("Sub", [one, types], "not_t")], "qw"), "q")
        p = mean(node("Mul", [mask, types], "pw"), "p")
        qn = node("LpNormalization", [q], "qn", axis=-1, p=2)
        pn = node("LpNormalization", [p], "pn", axis=-1, p=2)
        cos = node("ReduceSum", [node("Mul", [qn, pn], "qp"), last], "cos", keepdims=1)
        scale = const("scale", np.array(float(model.scale.detach()), dtype=np.float32))
        node("Mul", [cos, scale], "logits_raw")
    g.node.append(helper.make_node("Identity", ["rh_logits_raw"], ["logits"]))
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", 1])])
    onnx.checker.check_model(m)
    onnx.save(m, str(onnx_path))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--init", help="encoder graph to start from (default: the bundled base model)")
    ap.add_argument("--negatives", type=int, default=5)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--max-queries", type=int, default=0)
    ap.add_argument("--window", type=int, default=192)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after N queries (0: all; for quick checks)")
    ap.add_argument("--head", choices=("cos", "linear"), default="cos")
    ap.add_argument("--freeze-layers", type=int, default=0, help="keep the lowest N transformer layers frozen")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = random.Random(0)
    base, tokenizer_path = base_paths()
    src = args.init or base
    tok = Tokenizer.from_file(tokenizer_path)
    tok.enable_truncation(args.window, strategy="longest_first")
    tok.enable_padding()
    groups = []
    for name in args.names:
        d = json.loads((args.data / f"{name}.rerank.json").read_text())
        mine = []
        for g in d["groups"]:
            cands = g["candidates"]
            right = [p for sha, p in cands if sha == g["sha"]]
            wrong = [p for sha, p in cands[: args.top] if sha != g["sha"]]
            if right and wrong:
                mine.append((g["query"], right[0], wrong))
        if args.max_queries and len(mine) > args.max_queries:
            mine = random.Random(name).sample(mine, args.max_queries)
        groups += mine
        print(name, len(mine), "training queries", flush=True)

    bert, matmuls = build(src)
    model = CrossEncoder(bert, args.head)
    for p in (bert.embeddings.word_embeddings.weight, bert.embeddings.position_embeddings.weight):
        p.requires_grad = False
    for layer in bert.encoder.layer[: args.freeze_layers]:
        for p in layer.parameters():
            p.requires_grad = False
    body = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head.") and n != "scale"]
    opt = torch.optim.AdamW(
        [{"params": body, "lr": args.lr}, {"params": [*model.head.parameters(), model.scale], "lr": args.head_lr}],
        weight_decay=0.01,
    )
    base_lrs = [args.lr, args.head_lr]
    total = args.epochs * len(groups)
    warm = max(1, total // 10)
    step = 0
    t0 = time.time()
    running = []
    model.train()
    for _ in range(args.epochs):
        order = list(range(len(groups)))
        rng.shuffle(order)
        for i in order[: args.steps or None]:
            query, right, wrong = groups[i]
            passages = [right, *rng.sample(wrong, min(args.negatives, len(wrong)))]
            enc = tok.encode_batch([(query, p) for p in passages])
            ids = torch.tensor([e.ids for e in enc])
            mask = torch.tensor([e.attention_mask for e in enc])
            types = torch.tensor([e.type_ids for e in enc])
            logits = model(ids, mask, types)
            loss = F.cross_entropy(logits.unsqueeze(0), torch.zeros(1, dtype=torch.long))
            step += 1
            factor = step / warm if step < warm else max(0.0, (total - step) / (total - warm))
            for group, lr in zip(opt.param_groups, base_lrs, strict=True):
                group["lr"] = lr * factor
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            running.append(float(loss.item()))
            if step % 50 == 0:
                print(f"step {step}/{total} loss {np.mean(running[-100:]):.3f} {time.time() - t0:.0f}s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    onnx_out = args.out / "model.onnx"
    export(bert, matmuls, src, str(onnx_out))
    add_head(onnx_out, model)
    shutil.copy(tokenizer_path, args.out / "tokenizer.json")
    print("wrote", args.out, f"{time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
