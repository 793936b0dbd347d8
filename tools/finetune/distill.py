"""Distil a student with fewer transformer layers from the shipped MiniLM: the quality half of the dense phase's
plan for machines without VNNI (docs/large-histories.md; the speed half is ``backstory.evaluation.student_speed``).

usage: python distill.py REPO INDEX_DIR OUT_DIR [--layers 0,5] [--passages 8000] [--epochs 2] [--lr 1e-4]

- Teacher: the graph the dense phase runs (fine-tuned, int8, optimized), through onnxruntime: its last hidden
  state for every token of a text's 128-token window.
- Texts: the dense phase's own unit passages (``dense_build.unit_passages``) of an indexed history, a seeded
  sample. Use a history that is neither held out nor a development history (git/git here).
- Student: the fine-tuned six-layer model in torch (``minilm.build``) keeping only ``--layers`` of its layers
  (their weights as initialisation), trained so that each token's last hidden state points where the teacher's
  does (1 - cosine over real tokens) and the pooled vectors agree (1 - cosine). Both the dense lane (the mean)
  and the MaxSim rerank (the token states) read those states.
- Out: ``OUT_DIR/model.onnx`` (the fine-tuned graph cut after as many layers, the student's weights written in,
  quantized like the source) and ``tokenizer.json``: a model directory ``backstory ... --model`` accepts.

Deterministic on one machine (seeded sample and shuffles, two torch threads). Not run by the product.
"""

import argparse
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from minilm import WINDOW, base_paths, build, export, pooled
from tokenizers import Tokenizer

BATCH = 32


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", type=Path)
    ap.add_argument("index_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", default="0,5", help="the teacher's layers the student starts from, in order")
    ap.add_argument("--passages", type=int, default=8000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    keep = [int(x) for x in args.layers.split(",")]

    from backstory.evaluation.student_speed import cut
    from backstory.history.repo import open_repo
    from backstory.index.build import store_for
    from backstory.index.dense_build import unit_passages
    from backstory.models.files import default_cache_dir, default_model
    from backstory.models.finetuned import ensure_patched
    from backstory.models.optimize import ensure_optimized

    _base_onnx, tokenizer_path = base_paths()
    cache = default_cache_dir()
    tuned = ensure_patched(default_model(), cache)
    source = tuned.onnx_path  # the fine-tuned graph, in the structure minilm.build reads
    teacher = ensure_optimized(tuned, cache).onnx_path  # what the dense phase runs

    store = store_for(open_repo(args.repo), args.index_dir)
    fids = [r[0] for r in store.db.execute("SELECT fid FROM files WHERE embedded>=0 ORDER BY fid")]
    rng = random.Random(0)
    fids = sorted(rng.sample(fids, min(args.passages, len(fids))))
    texts = unit_passages(store, fids, False)
    tok = Tokenizer.from_file(tokenizer_path)
    tok.enable_truncation(WINDOW)
    tok.enable_padding(length=WINDOW)
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    print(f"{len(texts)} passages, {int(mask.sum())} tokens", file=sys.stderr)

    t0 = time.time()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(teacher), opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    out_name = next(o.name for o in sess.get_outputs() if o.name in ("last_hidden_state", "token_embeddings"))
    target = np.zeros((len(texts), WINDOW, 384), dtype=np.float16)
    for s in range(0, len(texts), 64):
        feed = {"input_ids": ids[s : s + 64], "attention_mask": mask[s : s + 64]}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids[s : s + 64])
        target[s : s + 64] = sess.run([out_name], feed)[0]
    print(f"teacher states in {time.time() - t0:.0f} s", file=sys.stderr)

    model, mm = build(str(source))
    model.encoder.layer = torch.nn.ModuleList([model.encoder.layer[i] for i in keep])
    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    order = list(range(len(texts)))
    steps = args.epochs * ((len(order) + BATCH - 1) // BATCH)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda i: min(1.0, (i + 1) / 50) * max(0.0, 1 - i / steps))
    step = 0
    for epoch in range(args.epochs):
        rng.shuffle(order)
        total = 0.0
        for s in range(0, len(order), BATCH):
            rows = order[s : s + BATCH]
            x = torch.from_numpy(ids[rows])
            m = torch.from_numpy(mask[rows])
            t = torch.from_numpy(target[rows].astype(np.float32))
            h = model(x, m)
            real = m.bool()
            token_loss = (1 - F.cosine_similarity(h[real], t[real], dim=-1)).mean()
            pool_loss = (1 - (pooled(h, m) * pooled(t, m)).sum(-1)).mean()
            loss = token_loss + pool_loss
            optim.zero_grad()
            loss.backward()
            optim.step()
            sched.step()
            step += 1
            total += loss.item()
            if step % 50 == 0:
                print(
                    f"step {step}/{steps} loss {total / ((s // BATCH) + 1):.4f} ({time.time() - t0:.0f} s)",
                    file=sys.stderr,
                )
        print(f"epoch {epoch + 1}: mean loss {total / ((len(order) + BATCH - 1) // BATCH):.4f}", file=sys.stderr)

    args.out.mkdir(parents=True, exist_ok=True)
    graph = cut(Path(source), len(keep), args.out / "cut.onnx")
    sd = model.state_dict()
    mm = {base: mod for base, mod in mm.items() if mod + ".weight" in sd}
    export(model, mm, str(graph), str(args.out / "model.onnx"))
    (args.out / "cut.onnx").unlink()
    shutil.copy(tokenizer_path, args.out / "tokenizer.json")
    print(f"wrote {args.out / 'model.onnx'} ({time.time() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
