"""onnxruntime + tokenizers plumbing shared by the embedder and the cross-encoder.

Kept in one place so both runners get the same guarantees: bounded memory (no CPU arena, sequential
execution), errors turned into :class:`ModelUnavailable`, graphs fed only the inputs they declare, and
batches formed from length-sorted texts so that padding is small.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from .errors import ModelUnavailable

TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_INT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


def session_options(threads: int, prepack: bool = True) -> ort.SessionOptions:
    """Options for a small CPU model: ``threads`` intra-op threads, sequential, no arena.

    The default CPU arena keeps the high-water mark of every batch shape it ever saw (1+ GB for batch 32 ×
    256 tokens); without it the process stays a few hundred MB. Without ``prepack`` the integer matmuls read
    their weights as stored instead of keeping a second, re-laid-out copy (see :data:`SERVING_PREPACK`).
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3
    if not prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    return options


#: Graph optimizers left out: onnxruntime 1.31's fused CPU kernels ran slower than the nodes they replace.
#: MiniLM over Flask's 128-token units, one thread, median of 8-10 interleaved runs, texts per CPU-second:
#: without ``SkipLayerNormalization`` (``Add`` + ``LayerNormalization``) 52.2 vs 44.2 (+18 %; also on the
#: shipped graph), then without ``BiasGelu`` (``Add`` + ``Gelu``) 69.7 vs 67.0 (+4 %, twice). Results differ
#: from the fused kernels only by float rounding.
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion", "BiasGeluFusion"]


#: Whether a process that embeds queries only (a search engine, a language server) lets onnxruntime prepack the
#: weights. Not: the bundled model's session then holds ~8 MB less (git/git's language server), its outputs are
#: the same to the bit, and a query costs ~1 ms more (16 tokens: 1.2 → 2.1 ms; 256: 16 → 20 ms). A run's
#: embedding process, whose batches of 32 × 128 tokens took 349 → 418-449 ms without, keeps it; the few commits of
#: a small update the language server indexes itself are embedded with its query session (same bits, slower).
SERVING_PREPACK = False


def make_session(path: Path, threads: int, hint: str = "", prepack: bool = True) -> ort.InferenceSession:
    """Build a CPU session, reporting a corrupt or unsupported graph as :class:`ModelUnavailable`."""
    try:
        return ort.InferenceSession(
            str(path),
            session_options(threads, prepack),
            providers=["CPUExecutionProvider"],
            disabled_optimizers=DISABLED_OPTIMIZERS,
        )
    except Exception as exc:  # onnxruntime raises its own pybind exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        suffix = f"; {hint}" if hint else ""
        raise ModelUnavailable(
            f"onnxruntime cannot load {path} (a corrupt file, or a graph this onnxruntime cannot run): "
            f"{first[:300]}{suffix}"
        ) from None


def load_tokenizer(path: Path, max_tokens: int, hint: str = "") -> tuple[Tokenizer, int]:
    """Load a tokenizer.json, override its baked-in padding/truncation, and return it with its pad id.

    Exported tokenizers often pad and truncate to a fixed 128; we truncate to ``max_tokens`` and pad
    ourselves per batch (to the batch's longest text), so the baked settings must go.
    """
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        suffix = f"; {hint}" if hint else ""
        raise ModelUnavailable(f"cannot load the tokenizer {path}: {str(exc)[:300]}{suffix}") from None
    padding = tokenizer.padding
    pad_id = padding.get("pad_id") if padding else None
    if not isinstance(pad_id, int):
        candidates = (tokenizer.token_to_id(token) for token in ("[PAD]", "<pad>"))
        pad_id = next((c for c in candidates if c is not None), 0)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_tokens, strategy="longest_first")
    return tokenizer, pad_id


@dataclass(frozen=True)
class GraphInputs:
    """Which of the standard text inputs a graph declares, with the integer type it wants."""

    names: tuple[str, ...]
    dtypes: tuple[Any, ...]

    @classmethod
    def of(cls, session: ort.InferenceSession, path: Path) -> GraphInputs:
        names: list[str] = []
        dtypes: list[Any] = []
        for node in session.get_inputs():
            if node.name not in TEXT_INPUTS:
                raise ModelUnavailable(
                    f"{path} needs an input named {node.name!r}; only {', '.join(TEXT_INPUTS)} can be "
                    "provided. Export the model with the standard Hugging Face input names."
                )
            dtype = _INT_TYPES.get(node.type)
            if dtype is None:
                raise ModelUnavailable(f"{path}: input {node.name!r} is {node.type}, expected int64/int32")
            names.append(node.name)
            dtypes.append(dtype)
        if "input_ids" not in names:
            raise ModelUnavailable(f"{path} has no `input_ids` input, so it is not a text model")
        return cls(tuple(names), tuple(dtypes))

    def feeds(self, encodings: Sequence[Encoding], pad_id: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Right-padded arrays for one batch, plus the attention mask (always returned, for pooling)."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = encoding.attention_mask
            types[row, :n] = encoding.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        pairs = zip(self.names, self.dtypes, strict=True)
        feeds = {name: arrays[name].astype(dtype, copy=False) for name, dtype in pairs}
        return feeds, mask


#: Padded tokens per forward pass. Activation memory grows with batch × length (attention with length²):
#: on all-MiniLM-L6-v2 (shipped graph, 2 threads, no arena) budgets of 4096/2048/1024/256 tokens peaked at
#: 960/640/500/290 MB RSS on ~200-token texts at the same throughput (a 200-token text keeps two cores busy
#: on its own). Short texts (queries, messages) still batch up to ``batch_size``, where batching does pay.
MAX_BATCH_TOKENS = 1024


def batches(
    lengths: Sequence[int], batch_size: int, sort_by_length: bool, max_tokens: int = MAX_BATCH_TOKENS
) -> Iterator[list[int]]:
    """Index batches of at most ``batch_size`` texts and ``max_tokens`` padded tokens (one text always fits).

    Sorted by length (stable, ties by position) so each batch pads to similar lengths. Deterministic: the
    same lengths always give the same batches, so the same inputs give the same outputs.
    """
    order = list(range(len(lengths)))
    if sort_by_length:
        order.sort(key=lambda i: (lengths[i], i))
    size = max(1, batch_size)
    batch: list[int] = []
    width = 0
    for index in order:
        wider = max(width, lengths[index])
        if batch and (len(batch) >= size or wider * (len(batch) + 1) > max_tokens):
            yield batch
            batch, wider = [], lengths[index]
        batch.append(index)
        width = wider
    if batch:
        yield batch


def run(session: ort.InferenceSession, output: str, feeds: dict[str, np.ndarray], path: Path) -> np.ndarray:
    """One forward pass; a failure mid-run (bad graph, shape mismatch) becomes :class:`ModelUnavailable`."""
    try:
        return np.asarray(session.run([output], feeds)[0])
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelUnavailable(f"running {path} failed: {first[:300]}") from None
