"""Second-stage rerankers: score (query, passage) pairs more carefully than the first-stage lanes.

No cross-encoder can be bundled (none ships on PyPI without a hub download), so the default second stage is
late interaction over the bundled bi-encoder's token states: MaxSim as in ColBERT — for each query token the
best-matching passage token, averaged over the query. It rewards passages that cover *every* query term
somewhere, which mean-pooled vectors blur. Users who exported a real cross-encoder (ms-marco-MiniLM-L-6,
bge-reranker, …) to ONNX can point :class:`CrossEncoderReranker` at its directory.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from . import _runtime
from .embedder import Embedder
from .errors import ModelUnavailable
from .files import ONNX_NAME, TOKENIZER_NAME, check_onnx, check_tokenizer
from .states import maxsim

RERANKER_KINDS = ("maxsim", "cross-encoder", "none")


@runtime_checkable
class Reranker(Protocol):
    """Scores passages for a query: higher is more relevant, one score per passage, deterministic."""

    name: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


class MaxSimReranker:
    """ColBERT-style MaxSim over the embedder's L2-normalised token states (cosine in [-1, 1]).

    :meth:`score` costs about one forward pass per passage; the passages are batched by length and run on
    the embedder's threads. Passages are truncated to ``max_tokens`` (their head: path, symbols, first changed
    lines); an empty query or passage scores 0.0. 128 tokens ranked better than 256 and cost about half: fused
    + rerank MRR@10 0.388 vs 0.351 before (pallets/itsdangerous, 150 message-blind queries; see
    docs/benchmarks.md) — matching the query against a passage's tail mostly adds spurious best matches.

    :meth:`score_states` takes the passages' token states instead of their text: the search engine passes the
    states the dense phase stored for each candidate's unit (:mod:`.states`), so a query costs one short
    forward pass (the query's) instead of one per candidate.
    """

    name = "maxsim"

    def __init__(self, embedder: Embedder, max_tokens: int = 128) -> None:
        self.embedder = embedder
        self.max_tokens = max_tokens

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        query_states = self.query_states(query)
        passage_states = self.embedder.token_states(passages, max_tokens=self.max_tokens)
        return self.score_states(query_states, passage_states)

    def query_states(self, query: str) -> np.ndarray:
        """The query's token states ``[n, dim]`` (every real token: queries are short and mostly words)."""
        return self.embedder.token_states([query], max_tokens=self.max_tokens)[0]

    def score_states(self, query_states: np.ndarray, passages: Sequence[np.ndarray]) -> list[float]:
        """MaxSim of the query's token states against each passage's (``[n_tokens, dim]``, unit rows)."""
        return [maxsim(query_states, states) for states in passages]


class CrossEncoderReranker:
    """A user-provided ONNX cross-encoder: ``model.onnx`` + ``tokenizer.json`` in ``directory``.

    Pairs are tokenized as (query, passage) with the tokenizer's own pair template, truncated longest-first
    to ``max_tokens`` (so a short query keeps all its tokens), sorted by length and batched. The graph gets
    whichever of input_ids / attention_mask / token_type_ids it declares; its first output is read as
    logits ``[b]``, ``[b, 1]`` or ``[b, 2]`` (last column = "relevant"). Files are checked now, the session
    is created on first use.
    """

    name = "cross-encoder"

    def __init__(self, directory: Path, max_tokens: int = 256, batch_size: int = 8, threads: int = 2) -> None:
        self.directory = Path(directory).expanduser()
        self.max_tokens = max_tokens
        self.batch_size = max(1, batch_size)
        self.threads = max(1, threads)
        hint = (
            f"the cross-encoder directory must hold {ONNX_NAME} and {TOKENIZER_NAME} (an ONNX export of e.g. "
            "cross-encoder/ms-marco-MiniLM-L-6-v2); fix the path or choose the `maxsim` reranker"
        )
        if not self.directory.is_dir():
            raise ModelUnavailable(f"cross-encoder directory {self.directory} does not exist; {hint}")
        self.onnx_path = self.directory / ONNX_NAME
        self.tokenizer_path = self.directory / TOKENIZER_NAME
        self._info = check_onnx(self.onnx_path, hint=hint)
        check_tokenizer(self.tokenizer_path, hint=hint)
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._inputs: _runtime.GraphInputs | None = None
        self._output = ""
        self._tokenizer: Tokenizer | None = None
        self._pad_id = 0

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        with self._lock:
            session, inputs, tokenizer = self._open()
            encodings = tokenizer.encode_batch([(query, passage) for passage in passages])
            scores = np.zeros(len(passages), dtype=np.float32)
            size = 1 if self._info.dynamic_quant else self.batch_size
            for rows in _runtime.batches([len(e.ids) for e in encodings], size, sort_by_length=True):
                feeds, _mask = inputs.feeds([encodings[i] for i in rows], self._pad_id)
                logits = _runtime.run(session, self._output, feeds, self.onnx_path)
                scores[rows] = self._logits_to_scores(logits, len(rows))
            return [float(s) for s in scores]

    def _logits_to_scores(self, logits: np.ndarray, rows: int) -> np.ndarray:
        if logits.ndim == 2 and logits.shape[0] == rows and logits.shape[1] >= 1:
            return logits[:, -1]
        if logits.ndim == 1 and logits.shape[0] == rows:
            return logits
        raise ModelUnavailable(
            f"{self.onnx_path} returned logits of shape {list(logits.shape)} for {rows} pairs; a "
            "cross-encoder must output [batch], [batch, 1] or [batch, 2]"
        )

    def _open(self) -> tuple[ort.InferenceSession, _runtime.GraphInputs, Tokenizer]:
        if self._session is None or self._inputs is None or self._tokenizer is None:
            session = _runtime.make_session(self.onnx_path, self.threads)
            self._inputs = _runtime.GraphInputs.of(session, self.onnx_path)
            self._output = session.get_outputs()[0].name
            self._tokenizer, self._pad_id = _runtime.load_tokenizer(self.tokenizer_path, self.max_tokens)
            self._session = session
        return self._session, self._inputs, self._tokenizer


def load_reranker(kind: str, embedder: Embedder | None, cross_encoder_dir: Path | None) -> Reranker | None:
    """The reranker a setting names: ``maxsim`` (needs ``embedder``), ``cross-encoder`` (needs
    ``cross_encoder_dir``) or ``none`` (returns ``None``).

    Raises :class:`ModelUnavailable` when the cross-encoder's files are missing or broken and ``ValueError``
    for an unknown kind or a missing embedder (programming errors, not user-fixable model problems).
    """
    normalised = kind.strip().lower().replace("_", "-")
    if normalised in ("none", "off", ""):
        return None
    if normalised == "maxsim":
        if embedder is None:
            raise ValueError("the maxsim reranker needs the embedder (pass the one the dense lane uses)")
        return MaxSimReranker(embedder)
    if normalised in ("cross-encoder", "crossencoder"):
        if cross_encoder_dir is None:
            raise ModelUnavailable(
                "the cross-encoder reranker needs a directory with model.onnx and tokenizer.json; set the "
                "cross-encoder directory setting, or use the `maxsim` reranker"
            )
        return CrossEncoderReranker(Path(cross_encoder_dir))
    raise ValueError(f"unknown reranker {kind!r}; expected one of {', '.join(RERANKER_KINDS)}")
