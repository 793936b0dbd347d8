"""Distil a student with fewer transformer layers from the shipped MiniLM: the quality half of the dense phase's
plan for machines without VNNI (docs/large-histories.md; the speed half is ``backstory.evaluation.student_speed``).

usage: python distill.py OUT_DIR --history REPO INDEX_DIR [--history REPO INDEX_DIR ...] [--layers 0,5]
       [--passages 8000] [--epochs 2] [--lr 1e-4] [--rank-weight 0] [--temperature 0.05]

- Teacher: the graph the dense phase runs (fine-tuned, int8, optimized), through onnxruntime: its last hidden
  state for every token of a text's 128-token window.
- Texts: the dense phase's own unit passages (``dense_build.unit_passages``) of indexed histories (a keyword
  index is enough), a seeded sample of ``--passages // len(histories)`` from each (a history with fewer units
  gives all it has; the others do not make up for it). Use histories that are neither held out nor a
  development or second-stage history (git/git, and the shipped model's own training histories).
- Student: the fine-tuned six-layer model in torch (``minilm.build``) keeping only ``--layers`` of its layers
  (their weights as initialisation), trained so that each token's last hidden state points where the teacher's
  does (1 - cosine over real tokens) and the pooled vectors agree (1 - cosine). Both the dense lane (the mean)
  and the MaxSim rerank (the token states) read those states.
- With ``--rank-weight W`` (> 0), also trained to *rank* like the teacher: each passage's commit subject is a
  query, and per query the student's scores over the batch's passages (MaxSim, and the pooled vectors' cosine)
  should give the teacher's softmax distribution (KL at ``--temperature``), weighted W: the scores the rerank
  and the learned second stage read, whose weights get less out of a student's scores than out of the teacher's
  (docs/large-histories.md, fifteenth pass). Passages are message-blind then (a subject must not find itself
  in its passage), and batches are runs of the sample sorted by path, so a batch holds other versions of the
  same files: the distinctions a search has to make. MaxSim is computed as the product does: the query's real
  tokens against the passage's distinct content tokens (``models/embedder.py``).
- Out: ``OUT_DIR/model.onnx`` (the fine-tuned graph cut after as many layers, the student's weights written in,
  quantized like the source) and ``tokenizer.json``: a model directory ``backstory ... --model`` accepts.

Deterministic on one machine (seeded sample and shuffles, two torch threads). Not run by the product.
"""

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from minilm import WINDOW, base_paths, build, export, kept_tokens, maxsim, pooled
from tokenizers import Tokenizer

BATCH = 32
QUERY_WINDOW = 32  # tokens of a commit subject used as a query, specials included


def kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(teacher || student) of the per-row softmax distributions: rank the row's passages like the teacher."""
    return F.kl_div(
        F.log_softmax(student / temperature, dim=-1), F.softmax(teacher / temperature, dim=-1), reduction="batchmean"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--history", nargs=2, action="append", required=True, metavar=("REPO", "INDEX_DIR"))
    ap.add_argument("--layers", default="0,5", help="the teacher's layers the student starts from, in order")
    ap.add_argument("--passages", type=int, default=8000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--rank-weight", type=float, default=0.0, help="weight of the ranking (KL) losses; 0: off")
    ap.add_argument("--temperature", type=float, default=0.05, help="softmax temperature of the ranking losses")
    args = ap.parse_args()
    if args.temperature <= 0:
        ap.error("--temperature must be positive")
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

    rng = random.Random(0)
    ranking = args.rank_weight > 0
    texts: list[str] = []
    subjects: list[str] = []
    share = args.passages // len(args.history)
    for repo, index_dir in args.history:
        store = store_for(open_repo(Path(repo)), Path(index_dir))
        fids = [r[0] for r in store.db.execute("SELECT fid FROM files WHERE embedded>=0 ORDER BY fid")]
        fids = sorted(rng.sample(fids, min(share, len(fids))))
        if ranking:  # batches of neighbours by path; each unit's commit subject is its query
            rows = store.db.execute(
                "SELECT f.fid, f.path, c.subject FROM files f JOIN commits c ON c.sha = f.sha "
                "WHERE f.fid IN (SELECT value FROM json_each(?))", (json.dumps(fids),),
            ).fetchall()  # fmt: skip
            by_fid = {fid: (path, subject) for fid, path, subject in rows}
            fids = sorted(fids, key=lambda f: (by_fid[f][0], f))
            subjects += [by_fid[f][1] for f in fids]
        texts += unit_passages(store, fids, ranking)
        print(f"{repo}: {len(fids)} passages", file=sys.stderr)
    tok = Tokenizer.from_file(tokenizer_path)
    tok.enable_truncation(WINDOW)
    tok.enable_padding(length=WINDOW)
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    print(f"{len(texts)} passages, {int(mask.sum())} tokens", file=sys.stderr)
    if ranking:
        content = kept_tokens(tok, enc, content_only=True)
        tok.enable_truncation(QUERY_WINDOW)
        tok.enable_padding(length=QUERY_WINDOW)
        qenc = tok.encode_batch(subjects)
        qids = np.array([e.ids for e in qenc], dtype=np.int64)
        qmask = np.array([e.attention_mask for e in qenc], dtype=np.int64)
        qreal = kept_tokens(tok, qenc, content_only=False)

    t0 = time.time()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(teacher), opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    out_name = next(o.name for o in sess.get_outputs() if o.name in ("last_hidden_state", "token_embeddings"))

    def teach(x: np.ndarray, m: np.ndarray) -> np.ndarray:
        out = np.zeros((*x.shape, 384), dtype=np.float16)
        for s in range(0, len(x), 64):
            feed = {"input_ids": x[s : s + 64], "attention_mask": m[s : s + 64]}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(x[s : s + 64])
            out[s : s + 64] = sess.run([out_name], feed)[0]
        return out

    target = teach(ids, mask)
    qtarget = teach(qids, qmask) if ranking else None
    print(f"teacher states in {time.time() - t0:.0f} s", file=sys.stderr)

    model, mm = build(str(source))
    model.encoder.layer = torch.nn.ModuleList([model.encoder.layer[i] for i in keep])
    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    batches = [list(range(s, min(s + BATCH, len(texts)))) for s in range(0, len(texts), BATCH)]
    steps = args.epochs * len(batches)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda i: min(1.0, (i + 1) / 50) * max(0.0, 1 - i / steps))
    step = 0
    for epoch in range(args.epochs):
        if ranking:  # keep the path neighbours together, shuffle the batches
            rng.shuffle(batches)
        else:
            order = [i for b in batches for i in b]
            rng.shuffle(order)
            batches = [order[s : s + BATCH] for s in range(0, len(order), BATCH)]
        total = 0.0
        for n, rows in enumerate(batches):
            x = torch.from_numpy(ids[rows])
            m = torch.from_numpy(mask[rows])
            t = torch.from_numpy(target[rows].astype(np.float32))
            h = model(x, m)
            real = m.bool()
            token_loss = (1 - F.cosine_similarity(h[real], t[real], dim=-1)).mean()
            pool_loss = (1 - (pooled(h, m) * pooled(t, m)).sum(-1)).mean()
            loss = token_loss + pool_loss
            if ranking:
                qx, qm = torch.from_numpy(qids[rows]), torch.from_numpy(qmask[rows])
                qr = torch.from_numpy(qreal[rows])
                qt = torch.from_numpy(qtarget[rows].astype(np.float32))
                qh = model(qx, qm)
                pc = torch.from_numpy(content[rows])
                teacher_ms = maxsim(F.normalize(qt, dim=-1), qr, F.normalize(t, dim=-1), pc)
                student_ms = maxsim(F.normalize(qh, dim=-1), qr, F.normalize(h, dim=-1), pc)
                teacher_cos = pooled(qt, qm) @ pooled(t, m).T
                student_cos = pooled(qh, qm) @ pooled(h, m).T
                loss = loss + args.rank_weight * (
                    kl(student_ms, teacher_ms, args.temperature) + kl(student_cos, teacher_cos, args.temperature)
                )
            optim.zero_grad()
            loss.backward()
            optim.step()
            sched.step()
            step += 1
            total += loss.item()
            if step % 50 == 0:
                print(
                    f"step {step}/{steps} loss {total / (n + 1):.4f} ({time.time() - t0:.0f} s)",
                    file=sys.stderr,
                )
        print(f"epoch {epoch + 1}: mean loss {total / len(batches):.4f}", file=sys.stderr)

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
