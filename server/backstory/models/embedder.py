"""Sentence embeddings (and token states for late interaction) from a BERT-style ONNX encoder.

Vectors are the attention-masked mean of the last hidden state, L2-normalised, as sentence-transformers
computes them for all-MiniLM-L6-v2. Two properties matter to the index more than raw speed:

* a text's vector is a function of the text only: batches are formed from length-sorted texts (much less
  padding), pooled over each text's own tokens and put back in input order. The optimized model quantizes
  activations per token (see :mod:`.graph_rewrite`), so it batches without coupling rows: vectors are
  bit-identical alone or batched. Graphs that still quantize per tensor (``DynamicQuantizeLinear``) are fed
  one text per run, because a shared scale would make a vector depend on its batch mates;
* two cores are used by running batches concurrently on one session with one intra-op thread each, not
  by splitting one batch over two threads: at one ~200-token text per run, intra-op threading spent about
  twice the CPU time per text (synchronisation and spinning) for the same work;
* construction is free: files are resolved, the optimized variant is built and the session is created on
  first use, so the CLI and the language server can create an embedder they may never need.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from . import _runtime
from .errors import ModelUnavailable
from .files import ModelFiles, check_onnx, default_cache_dir, resolve_model
from .finetuned import ensure_patched
from .optimize import ensure_optimized

log = logging.getLogger("backstory.models")

_PREFERRED_OUTPUTS = ("last_hidden_state", "token_embeddings")
#: BERT-style encoders have 512 learned positions; longer inputs would index past the table.
MAX_POSITIONS = 512
#: Tokens per text for vectors. all-MiniLM-L6-v2 was trained at 256, but on message-blind commit-subject
#: queries (pallets/itsdangerous, 150 queries) 128 ranked no worse — dense-only MRR@10 0.250 vs 0.241, fused
#: 0.350 vs 0.338 — at about half the cost: a unit's head (path, symbols, first changed lines) carries most
#: of what a short query can match, and the tail mostly adds noise to the mean.
DEFAULT_WINDOW = 128


@dataclass
class _Loaded:
    files: ModelFiles
    session: ort.InferenceSession
    inputs: _runtime.GraphInputs
    output: str
    tokenizer: Tokenizer
    counter: Tokenizer
    pad_id: int
    truncation: int
    one_per_run: bool
    dim: int
    #: Per vocabulary id: the token has a letter or digit (see ``token_states(content_only=True)``).
    content: np.ndarray


class Embedder:
    """Embeds texts with the resolved model (bundled all-MiniLM-L6-v2 unless configured otherwise).

    ``optimize`` builds (once, into ``cache_dir``) and uses the per-channel quantized variant; if that fails
    the shipped model is used and a warning logged. ``batch_size`` and ``batch_tokens`` (padded tokens per
    run) apply to graphs that can be batched without coupling rows: long texts run alone (batching them
    measured no faster), short ones (queries, messages) share a run. ``threads`` batches run at once.
    ``sort_by_length=False`` exists for benchmarking only. Thread-safe: calls are serialised by a lock.
    """

    def __init__(
        self,
        files: ModelFiles | None = None,
        *,
        max_tokens: int = DEFAULT_WINDOW,
        batch_size: int = 16,
        batch_tokens: int = 256,
        threads: int = 2,
        optimize: bool = True,
        cache_dir: Path | None = None,
        sort_by_length: bool = True,
        prepack: bool = True,
    ) -> None:
        """``prepack``: let onnxruntime re-lay the optimized graph's weights out for speed (see
        ``_runtime.SERVING_PREPACK``); any other graph always does, see :meth:`_open`."""
        if not 4 <= max_tokens <= MAX_POSITIONS:
            raise ValueError(f"max_tokens must be within 4..{MAX_POSITIONS}, got {max_tokens}")
        if batch_size < 1 or threads < 1:
            raise ValueError("batch_size and threads must be positive")
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.batch_tokens = max(1, batch_tokens)
        self.threads = threads
        self.optimize = optimize
        self.sort_by_length = sort_by_length
        self.prepack = prepack
        self._files = files
        self._cache_dir = cache_dir
        self._lock = threading.RLock()
        self._count_lock = threading.Lock()
        self._loaded: _Loaded | None = None

    # -- properties that need the model ----------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        """Id of the vector space in use: the model file's id (the optimized and shipped variants differ) and
        the token window (``-t128``), since a different window gives different vectors; loads the model."""
        return f"{self._load().files.model_id}-t{self.max_tokens}"

    @property
    def dim(self) -> int:
        """Vector dimension (384 for all-MiniLM-L6-v2); loads the model."""
        return self._load().dim

    @property
    def files(self) -> ModelFiles:
        """The files actually in use; loads the model."""
        return self._load().files

    # -- public API ------------------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``[len(texts), dim]``, unit rows, in input order; long texts are cut at ``max_tokens``."""
        return self._embed(texts, states=None)[0]

    def embed_with_states(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`embed`'s vectors and, from the same forward pass, each text's *content* token states
        (``token_states(..., content_only=True)``): what the dense phase stores for the MaxSim rerank."""
        return self._embed(texts, states="content")

    def embed_query_with_states(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`embed_query`'s vector and ``token_states([text])[0]`` from one forward pass: the dense lane
        and the MaxSim rerank of one search share the query's pass."""
        vectors, states = self._embed([text], states="all")
        return vectors[0], states[0]

    def _embed(self, texts: Sequence[str], states: str | None) -> tuple[np.ndarray, list[np.ndarray]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one string")
        with self._lock:
            loaded = self._load()
            out = np.zeros((len(texts), loaded.dim), dtype=np.float32)
            with_states = states is not None
            kept: list[np.ndarray] = [np.zeros((0, loaded.dim), dtype=np.float32) for _ in texts] if with_states else []
            if not texts:
                return out, kept
            encodings = self._encode(loaded, texts, self.max_tokens)
            # a text's outputs depend on its token window only, so equal windows (a change cherry-picked to
            # another branch, the same edit in two files) run once: ~2 % of Flask's units in a dense batch
            groups: dict[tuple[int, ...], list[int]] = {}
            for i, encoding in enumerate(encodings):
                groups.setdefault(tuple(encoding.ids), []).append(i)
            same = list(groups.values())  # the input rows of each distinct window, in first-seen order
            for rows, hidden, mask in self._forward(loaded, [encodings[g[0]] for g in same]):
                for j, u in enumerate(rows):
                    copies = same[u]
                    i = copies[0]
                    if hidden.ndim == 2:  # graph already pools
                        if with_states:
                            path = loaded.files.onnx_path
                            raise ModelUnavailable(f"{path} outputs pooled vectors, not token states")
                        out[copies] = _normalise(hidden[j].astype(np.float32))
                        continue
                    real = hidden[j, mask[j].astype(bool)].astype(np.float32)  # padding cannot change the sum
                    pooled = real.mean(axis=0) if len(real) else np.zeros(loaded.dim, dtype=np.float32)
                    out[copies] = _normalise(pooled)
                    if with_states:
                        positions = _kept(loaded, encodings[i], states == "content")
                        token_states = _normalise(hidden[j, positions].astype(np.float32))
                        for k in copies:
                            kept[k] = token_states
            return out, kept

    def embed_query(self, text: str) -> np.ndarray:
        """float32 ``[dim]``: the same vector ``embed([text])[0]`` gives."""
        return self.embed([text])[0]

    def token_states(
        self, texts: Sequence[str], *, max_tokens: int | None = None, content_only: bool = False
    ) -> list[np.ndarray]:
        """Per text, unit-length token vectors ``[n_tokens, dim]`` without padding and special tokens.

        For late interaction (MaxSim). ``max_tokens`` (default: the embedder's window; at most
        :data:`MAX_POSITIONS`, the encoder's position table) counts the special tokens as :meth:`count_tokens`
        does. ``content_only`` keeps only the first occurrence of each token with a letter or digit (no ``(``,
        ``.``, ``##=``, no repeats): the token states the store keeps for passages (:mod:`.states`).
        """
        limit = self.max_tokens if max_tokens is None else max(4, min(max_tokens, MAX_POSITIONS))
        with self._lock:
            loaded = self._load()
            result = [np.zeros((0, loaded.dim), dtype=np.float32) for _ in texts]
            if not texts:
                return result
            encodings = self._encode(loaded, texts, limit)
            for rows, hidden, _mask in self._forward(loaded, encodings):
                if hidden.ndim != 3:
                    path = loaded.files.onnx_path
                    raise ModelUnavailable(f"{path} outputs pooled vectors, not token states")
                for j, i in enumerate(rows):
                    result[i] = _normalise(hidden[j, _kept(loaded, encodings[i], content_only)].astype(np.float32))
            return result

    def count_content_tokens(self, texts: Sequence[str]) -> list[int]:
        """Per text, how many rows ``token_states([text], content_only=True)`` would return, from the
        tokenizer alone (no forward pass): the dense phase counts the token states it could fit a codec on."""
        with self._lock:
            loaded = self._load()
            return [len(_kept(loaded, e, True)) for e in self._encode(loaded, texts, self.max_tokens)] if texts else []

    def count_tokens(self, text: str) -> int:
        """Tokens the model would see without truncation, [CLS] and [SEP] included: a text is embedded
        whole iff ``count_tokens(text) <= max_tokens``."""
        loaded = self._load()
        with self._count_lock:  # not the main lock: counting must not wait for a long embed() call
            return len(loaded.counter.encode(text).ids)

    # -- internals -------------------------------------------------------------------------------------------

    def _encode(self, loaded: _Loaded, texts: Sequence[str], limit: int) -> list[Encoding]:
        if limit != loaded.truncation:
            loaded.tokenizer.enable_truncation(limit, strategy="longest_first")
            loaded.truncation = limit
        return list(loaded.tokenizer.encode_batch(list(texts)))

    def _forward(
        self, loaded: _Loaded, encodings: Sequence[Encoding]
    ) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """Yield ``(row indices, model output, attention mask)`` per batch, in batch order; up to ``threads``
        batches run at once (onnxruntime's ``run`` is thread-safe and releases the GIL)."""
        size = 1 if loaded.one_per_run else self.batch_size
        lengths = [len(e.ids) for e in encodings]
        batches = list(_runtime.batches(lengths, size, self.sort_by_length, self.batch_tokens))

        def run(rows: list[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
            feeds, mask = loaded.inputs.feeds([encodings[i] for i in rows], loaded.pad_id)
            return rows, _runtime.run(loaded.session, loaded.output, feeds, loaded.files.onnx_path), mask

        if self.threads == 1 or len(batches) == 1:
            yield from map(run, batches)
            return
        with ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="backstory-embed") as pool:
            yield from pool.map(run, batches)

    def _load(self) -> _Loaded:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = self._open()
            return self._loaded

    def _open(self) -> _Loaded:
        source = self._files if self._files is not None else resolve_model(cache_dir=self._cache_dir)
        source = ensure_patched(source, self._cache_dir or default_cache_dir())  # fine-tuned default model
        source_info = check_onnx(source.onnx_path)
        files = source
        if self.optimize and not source_info.dynamic_quant:
            try:
                files = ensure_optimized(source, self._cache_dir or default_cache_dir())
            except Exception as exc:
                log.warning("optimized embedding model not built (%s); using %s", exc, source.onnx_path)
        if files is not source:
            try:
                return self._open_files(files, self.prepack)
            except ModelUnavailable as exc:
                log.warning("optimized embedding model does not load (%s); using %s", exc, source.onnx_path)
        # other graphs keep prepacking: their float matmuls round ~1e-7 apart without it, and one model's vectors
        # must be the same bits in the indexer and in a search (the optimized graph's integer matmuls are exact)
        return self._open_files(source, True)

    def _open_files(self, files: ModelFiles, prepack: bool) -> _Loaded:
        info = check_onnx(files.onnx_path)
        session = _runtime.make_session(files.onnx_path, 1, prepack=prepack)  # parallel across batches (_forward)
        inputs = _runtime.GraphInputs.of(session, files.onnx_path)
        outputs = session.get_outputs()
        by_name = {o.name: o for o in outputs}
        chosen = next((by_name[n] for n in _PREFERRED_OUTPUTS if n in by_name), outputs[0])
        tokenizer, pad_id = _runtime.load_tokenizer(files.tokenizer_path, self.max_tokens)
        counter = Tokenizer.from_file(str(files.tokenizer_path))
        counter.no_padding()
        counter.no_truncation()
        loaded = _Loaded(
            files=files,
            session=session,
            inputs=inputs,
            output=chosen.name,
            tokenizer=tokenizer,
            counter=counter,
            pad_id=pad_id,
            truncation=self.max_tokens,
            one_per_run=info.dynamic_quant,
            dim=0,
            content=_content_ids(tokenizer),
        )
        shape = chosen.shape
        if shape and isinstance(shape[-1], int) and shape[-1] > 0:
            loaded.dim = int(shape[-1])
        else:  # symbolic width: ask the graph once
            probe = self._encode(loaded, ["dimension probe"], self.max_tokens)
            feeds, _mask = inputs.feeds(probe, pad_id)
            loaded.dim = int(_runtime.run(session, chosen.name, feeds, files.onnx_path).shape[-1])
        return loaded


def _content_ids(tokenizer: Tokenizer) -> np.ndarray:
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    content = np.zeros(max(vocab.values(), default=-1) + 1, dtype=bool)
    for token, index in vocab.items():
        content[index] = any(ch.isalnum() for ch in token.removeprefix("##"))
    return content


def _kept(loaded: _Loaded, encoding: Encoding, content_only: bool) -> list[int]:
    """Positions of the real, non-special tokens; with ``content_only``, only the first occurrence of each
    token with a letter or digit (a repeated identifier adds near-duplicate rows, never a better match)."""
    flags = zip(encoding.ids, encoding.attention_mask, encoding.special_tokens_mask, strict=True)
    if not content_only:
        return [k for k, (_token, real, special) in enumerate(flags) if real and not special]
    content = loaded.content
    seen: set[int] = set()
    kept: list[int] = []
    for k, (token, real, special) in enumerate(flags):
        if real and not special and token not in seen and token < len(content) and content[token]:
            seen.add(token)
            kept.append(k)
    return kept


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
