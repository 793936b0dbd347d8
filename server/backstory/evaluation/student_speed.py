"""The speed half of the plan for the dense phase's rate: ``python -m backstory.evaluation.student_speed``.

The dense phase runs the fine-tuned MiniLM (six transformer layers) over every file unit; on a 2-core machine
without VNNI that is 83-86 units/s, and the large-history target is 230 (docs/large-histories.md). The plan is a
student with fewer layers distilled from it. Before anyone distils one, this measures what fewer layers buy:
the shipped graph (the optimized, fine-tuned one the dense phase runs) cut after its first N layers, each cut
timed against the whole on the same texts, rounds alternated so that a busy machine slows every variant alike.
A cut graph is not a usable model (its vectors are untrained for retrieval); only its cost per text is the
student's, as a student of N layers has the same operations.

The figure is CPU seconds per text at the dense phase's window, one thread (the dense phase runs one batch per
core); the ratio against six layers carries over to the phase's units/s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.utils
from tokenizers import Tokenizer

from ..models import Embedder, resolve_model
from ..models._runtime import make_session
from ..models.embedder import DEFAULT_WINDOW
from .models_bench import synthetic_texts


def layer_outputs(graph: onnx.GraphProto) -> list[str]:
    """Each transformer layer's output, in order: a BERT layer ends in the second of its two layer norms, after
    the embeddings' own one."""
    norms = [n.output[0] for n in graph.node if n.op_type == "LayerNormalization"]
    if len(norms) < 3 or len(norms) % 2 == 0:
        raise ValueError(f"expected 1 + 2 x layers LayerNormalization nodes, found {len(norms)}")
    return norms[2::2]


def cut(source: Path, layers: int, out: Path) -> Path:
    """``source`` with only its first ``layers`` transformer layers (the graph's inputs, that layer's output)."""
    model = onnx.load(str(source))
    outputs = layer_outputs(model.graph)
    if not 1 <= layers <= len(outputs):
        raise ValueError(f"the graph has {len(outputs)} layers, asked for {layers}")
    inputs = [i.name for i in model.graph.input]
    onnx.utils.extract_model(str(source), str(out), inputs, [outputs[layers - 1]])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backstory.evaluation.student_speed", description=__doc__)
    parser.add_argument("--layers", type=int, nargs="+", default=[3, 2], help="cuts to time against the whole")
    parser.add_argument("--texts", type=int, default=128, help="synthetic diff texts (default 128)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds; medians reported")
    parser.add_argument("--batch", type=int, default=2, help="texts per forward pass (the dense phase: 256 tokens)")
    parser.add_argument("--cache-dir", default=None, help="model cache root (default: the user cache)")
    args = parser.parse_args(argv)

    cache = Path(args.cache_dir) if args.cache_dir else None
    embedder = Embedder(resolve_model(None, cache_dir=cache), cache_dir=cache)
    embedder.embed_query("warm up")  # builds the optimized fine-tuned graph in the cache if needed
    loaded = embedder._load()
    source = loaded.files.onnx_path
    tokenizer = Tokenizer.from_file(str(loaded.files.tokenizer_path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    texts = synthetic_texts(args.texts, tokenizer)
    tokenizer.enable_truncation(DEFAULT_WINDOW)
    encodings = tokenizer.encode_batch(texts)
    tokens = statistics.mean(len(e.ids) for e in encodings)
    full = len(layer_outputs(onnx.load(str(source)).graph))
    print(f"{source} ({embedder.model_id}): {full} layers; {len(texts)} texts, {tokens:.0f} tokens on average")

    with tempfile.TemporaryDirectory() as tmp:
        graphs = {full: source} | {n: cut(source, n, Path(tmp) / f"l{n}.onnx") for n in args.layers if n < full}
        sessions = {n: make_session(path, 1) for n, path in graphs.items()}
        feeds = []
        for start in range(0, len(encodings), args.batch):
            batch = encodings[start : start + args.batch]
            width = max(len(e.ids) for e in batch)
            ids = np.zeros((len(batch), width), np.int64)
            mask = np.zeros_like(ids)
            for row, e in enumerate(batch):
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = 1
            feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        seconds: dict[int, list[float]] = {n: [] for n in sessions}
        for _ in range(args.rounds):
            for n, session in sessions.items():
                names = {i.name for i in session.get_inputs()}
                begin = time.process_time()
                for feed in feeds:
                    session.run(None, {k: v for k, v in feed.items() if k in names})
                seconds[n].append(time.process_time() - begin)
    whole = statistics.median(seconds[full])
    print(f"{'layers':>6} {'texts per CPU-second':>21} {'x six layers':>13}  CPU seconds per round")
    for n in sorted(seconds, reverse=True):
        median = statistics.median(seconds[n])
        rounds = " ".join(f"{s:.2f}" for s in seconds[n])
        print(f"{n:>6} {len(texts) / median:>21.1f} {whole / median:>13.2f}  {rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
