"""Compressed token states, so the MaxSim rerank can read a passage's states instead of running the model.

The dense phase already runs the encoder over every (commit, file) unit's 128-token window; keeping that
pass's token states turns the rerank of 20 candidates from 20 forward passes (~300 ms on 2 cores) into the
query's own pass plus a few small matrix products. Raw states are 384 float32 per token (~190 KB per unit),
so they are stored compressed:

* only *distinct content* tokens: [CLS]/[SEP] never were in MaxSim; tokens made of punctuation alone (``(``,
  ``.``, ``=``, ``##_``…) and repeats of a token already kept are dropped (Flask: 86 tokens per unit window ->
  58 content -> 34 distinct) — a query token's best match is almost never a bracket, a repeated identifier
  only adds a near-duplicate row, and measured rankings did not change (docs/benchmarks.md);
* projected on the top ``COMPONENTS`` (192) principal axes of the index's own token states (a
  :class:`StateCodec` fitted once per index on the first units embedded and stored with it), each token's
  coordinates quantized to int4 with one float16 scale: 98 bytes per token instead of 1,536 (~3 KB per
  Flask unit). The projection is what costs ranking quality, not the int4 codes (measured with codes over
  ``-7..7``): with states recomputed by the model, Flask fused + rerank MRR@10 was 0.326 with float32
  states, 0.312 projected on 96 axes (float32), 0.313 on 96 axes int4 (the first shipped codec, 50 bytes per
  token), 0.315 on 128, 0.326 on 192 and 0.324 on 256 axes int4 (docs/benchmarks.md, "Where the stored-state
  rerank lost quality");
* with a coarse step: a token's codes use ``-LEVELS..LEVELS`` (3) of int4's ``-7..7``. Rows are stored
  compressed (:mod:`backstory.index.unit_states`), and fewer levels are fewer bits once compressed: git/git's
  rows a third smaller than at 7 levels in a fresh build (319 -> 213 MB), for the same ranking on the
  development histories and on a held-out one (seventeenth pass of docs/large-histories.md). The bytes'
  layout is the same, so rows encoded at 7 levels read as before and :meth:`StateCodec.requantize` brings
  them to the current step without the model.

Decoding reconstructs ``mean + codes x scale @ basis.T`` and re-normalises it, so MaxSim scores stay cosines
on the same scale as before (the rerank is blended with the fused score, whose weight was tuned on them).
The codec is a pure function of its fitting sample and encoding of a matrix is deterministic, so a passage
scores the same whether its states come from the store or from a fresh forward pass encoded on the spot.
(Rows an older version stored at 7 levels and re-encoded since are quantized twice: close to a fresh
encoding, not always the same bytes.)
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Principal axes kept per token, and how many of the leading ones are stored as int8 (the rest as int4).
#: 192 axes at int4 ranked like float32 states; 96 and 128 axes lost ~0.012 MRR@10 on Flask, and the int4
#: codes themselves (over -7..7) cost nothing measurable (96 axes: float32 0.312, int4 0.313; docs/benchmarks.md).
#: ``WIDE`` stays a knob for other models.
COMPONENTS = 192
WIDE = 0
#: The int4 codes a token's coordinates use: ``-LEVELS..LEVELS``, its largest coordinate at +-LEVELS. Measured
#: with the learned second stage on the six development histories (seventeenth pass, MRR@10 against 7 levels):
#: natural questions over indexes with messages 0.6370 -> 0.6371 / 0.6368 / 0.6342 / 0.6352 at 5 / 4 / 3 / 2
#: levels, message-blind commit subjects 0.5089 -> 0.5100 / 0.5090 / 0.5096 / 0.5103; 20,000 of git/git's
#: compressed rows re-encoded from their codes 0.83 / 0.80 / 0.62 / 0.55 of their size at 7 (a fresh build at 3:
#: 0.67). Three keeps a margin above the smallest measured.
LEVELS = 3
#: What rows encoded at these recipes become with :meth:`StateCodec.requantize`: the same codec, the same
#: layout, only a finer step (the index migrates them once instead of embedding every unit again).
#: (Rows of that recipe were laid out for 192 axes, all int4: another layout could not read them.)
REQUANTIZABLE = ("maxsim-states-v1:distinct-content-tokens,pca192,int4",) if (COMPONENTS, WIDE) == (192, 0) else ()
#: Token vectors needed before a codec is fitted: below this the axes would follow a few passages' words.
MIN_FIT_TOKENS = 4096
#: Token vectors a codec is fitted on at most (the first ones offered, in order: deterministic).
MAX_FIT_TOKENS = 20_000
#: Stamped next to the vectors: what the stored states are. Bump when encoding or token choice changes.
STATES_RECIPE = (
    f"maxsim-states-v1:distinct-content-tokens,pca{COMPONENTS},"
    + (f"int8x{WIDE}+int4" if WIDE else "int4")
    + (f"-levels{LEVELS}" if LEVELS != 7 else "")
)


@dataclass(frozen=True)
class StateCodec:
    """A PCA basis (``mean`` ``[dim]``, orthonormal ``basis`` ``[dim, components]``) and its int8/int4 encoding."""

    mean: np.ndarray
    basis: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.basis.shape[0])

    @property
    def components(self) -> int:
        return int(self.basis.shape[1])

    @property
    def digest(self) -> str:
        """Short content hash: identifies the codec in diagnostics and tests."""
        h = hashlib.sha256(self.mean.astype("<f4").tobytes() + self.basis.astype("<f4").tobytes())
        return h.hexdigest()[:12]

    @classmethod
    def fit(cls, samples: np.ndarray, components: int = COMPONENTS) -> StateCodec:
        """Principal axes of ``samples`` (``[n, dim]`` unit token vectors), at most ``min(n, dim)`` of them.

        From the eigenvectors of the ``[dim, dim]`` covariance (LAPACK's SVD of the samples themselves took
        seconds on the shared 2-core machine; this takes milliseconds). Each axis' sign is fixed (largest
        coordinate positive) so the same samples give the same bytes.
        """
        x = np.asarray(samples, dtype=np.float64)[:MAX_FIT_TOKENS]
        if x.ndim != 2 or len(x) < 2:
            raise ValueError("fitting a state codec needs at least two token vectors")
        mean = x.mean(axis=0)
        centred = x - mean
        values, vectors = np.linalg.eigh(centred.T @ centred)
        keep = min(components, len(x), x.shape[1])
        basis = vectors[:, np.argsort(-values, kind="stable")[:keep]]
        signs = np.sign(basis[np.abs(basis).argmax(axis=0), np.arange(basis.shape[1])])
        basis = basis * np.where(signs == 0, 1.0, signs)
        return cls(mean.astype(np.float32), np.ascontiguousarray(basis, dtype=np.float32))

    # -- bytes ------------------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        head = np.array([self.dim, self.components], dtype="<u4").tobytes()
        return head + self.mean.astype("<f4").tobytes() + self.basis.astype("<f4").tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes) -> StateCodec:
        if len(blob) < 8:
            raise ValueError(f"state codec blob has {len(blob)} bytes, expected a header of 8")
        dim, components = (int(v) for v in np.frombuffer(blob[:8], dtype="<u4"))
        want = 8 + 4 * dim + 4 * dim * components
        if len(blob) != want or dim == 0 or components == 0:
            raise ValueError(f"state codec blob has {len(blob)} bytes, expected {want}")
        mean = np.frombuffer(blob, dtype="<f4", count=dim, offset=8).astype(np.float32)
        basis = np.frombuffer(blob, dtype="<f4", count=dim * components, offset=8 + 4 * dim)
        return cls(mean, basis.reshape(dim, components).astype(np.float32))

    # -- states -----------------------------------------------------------------------------------------------

    @property
    def _split(self) -> tuple[int, int]:
        """(int8 coordinates, int4 coordinates) per token; int4 codes are packed in pairs."""
        wide = min(WIDE, self.components)
        narrow = self.components - wide
        return wide, narrow + (narrow % 2)

    @property
    def token_bytes(self) -> int:
        """Bytes per stored token: a float16 scale and the codes of each non-empty group."""
        wide, narrow = self._split
        return (2 + wide if wide else 0) + (2 + narrow // 2 if narrow else 0)

    def encode(self, states: np.ndarray) -> bytes:
        """``[n, dim]`` token vectors -> ``n x`` :attr:`token_bytes` bytes: each group's ``n`` float16 scales,
        then the int8 codes, then the packed int4 codes."""
        states = np.asarray(states, dtype=np.float32).reshape(-1, self.dim)
        return self._encode_coords(_product(states - self.mean, self.basis))

    def requantize(self, blob: bytes) -> bytes:
        """``blob`` (this codec's bytes, at any step) encoded again at :data:`LEVELS`: what the index's rows
        written at a finer step become. A row already at this step comes back unchanged (its largest code is
        +-LEVELS times a float16 scale, which divides back exactly; only subnormal scales, ~1e-6, could not)."""
        return self._encode_coords(self.coords(blob))

    def _encode_coords(self, coords: np.ndarray, levels: int = LEVELS) -> bytes:
        wide, narrow = self._split
        if narrow > self.components - wide:
            coords = np.concatenate([coords, np.zeros((len(coords), 1), np.float32)], axis=1)
        scales: list[bytes] = []
        codes: list[bytes] = []
        if wide:
            wide_scales, wide_codes = _quantize(coords[:, :wide], 127)
            scales.append(wide_scales.tobytes())
            codes.append(wide_codes.astype(np.int8).tobytes())
        if narrow:
            narrow_scales, narrow_codes = _quantize(coords[:, wide:], levels)
            nibbles = (narrow_codes + 8).astype(np.uint8)
            scales.append(narrow_scales.tobytes())
            codes.append(((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).astype(np.uint8).tobytes())
        return b"".join(scales + codes)

    def coords(self, blob: bytes) -> np.ndarray:
        """The stored coordinates ``[n, components]`` (codes x their group's scale) of one blob."""
        return self._coords_of([blob])[0]

    def _coords_of(self, blobs: Sequence[bytes]) -> tuple[np.ndarray, list[int]]:
        """The stored coordinates of all ``blobs`` stacked (``[sum n, components]``), and each one's token
        count. One decode for a search's ~25 candidates' units: each blob's groups are sliced out and joined,
        so the arithmetic runs once, not once a unit (numpy's per-call cost was most of the decode)."""
        width = self.token_bytes
        wide, narrow = self._split
        groups = int(wide > 0) + int(narrow > 0)
        counts: list[int] = []
        scale_parts: list[list[bytes]] = [[] for _ in range(groups)]
        wide_parts: list[bytes] = []
        narrow_parts: list[bytes] = []
        for blob in blobs:
            if len(blob) % width:
                raise ValueError(f"token states blob of {len(blob)} bytes is not a multiple of {width}")
            n = len(blob) // width
            counts.append(n)
            for g in range(groups):
                scale_parts[g].append(blob[2 * g * n : 2 * (g + 1) * n])
            offset = 2 * groups * n
            wide_parts.append(blob[offset : offset + n * wide])
            narrow_parts.append(blob[offset + n * wide :])
        total = sum(counts)
        scales = [np.frombuffer(b"".join(parts), dtype="<f2").astype(np.float32) for parts in scale_parts]
        out: list[np.ndarray] = []
        if wide:
            codes = np.frombuffer(b"".join(wide_parts), dtype=np.int8).reshape(total, wide)
            out.append(codes.astype(np.float32) * scales[0][:, None])
        if narrow:
            packed = np.frombuffer(b"".join(narrow_parts), dtype=np.uint8).reshape(total, narrow // 2)
            nibbles = np.empty((total, narrow), dtype=np.float32)
            nibbles[:, 0::2] = packed >> 4
            nibbles[:, 1::2] = packed & 15
            out.append((nibbles - 8.0) * scales[-1][:, None])
        return np.concatenate(out, axis=1)[:, : self.components], counts

    def decode(self, blob: bytes) -> np.ndarray:
        """The unit-length reconstruction ``[n, dim]`` (float32) of what :meth:`encode` stored."""
        return _unit_rows(self.coords(blob) @ self.basis.T + self.mean)

    def maxsim(self, query: np.ndarray, blobs: Sequence[bytes]) -> list[float]:
        """:func:`maxsim` of ``query`` (``[n, dim]`` unit token vectors) against each blob's :meth:`decode`,
        computed in the reduced space without reconstructing the passages.

        With ``p = c @ B.T + m`` (``B`` orthonormal): ``q . p = (q @ B) . c + q . m`` and
        ``|p|^2 = |c|^2 + 2 c . (B.T @ m) + |m|^2``: ~6x fewer operations than decoding. The products go
        through :func:`_product`, not BLAS (see there).
        """
        if len(query) == 0 or not blobs:
            return [0.0] * len(blobs)
        c, counts = self._coords_of(blobs)
        if not len(c):
            return [0.0] * len(blobs)
        mean = self.mean.astype(np.float32)
        projected_mean = _product(mean[None, :], self.basis)[0]
        norms = (c * c).sum(axis=1) + 2.0 * _product(c, projected_mean[:, None])[:, 0] + float((mean * mean).sum())
        sims = _product(_product(query, self.basis), c.T) + _product(query, mean[:, None])
        sims /= np.sqrt(np.maximum(norms, 1e-24))[None, :]
        bounds = np.cumsum([0] + [n for n in counts if n])
        best = iter(sims[:, a:b].max(axis=1).mean() for a, b in itertools.pairwise(bounds))
        return [float(next(best)) if n else 0.0 for n in counts]

    def roundtrip(self, states: np.ndarray) -> np.ndarray:
        """What the store would give back for ``states`` (tests and diagnostics)."""
        return self.decode(self.encode(states))


def maxsim(query: np.ndarray, passage: np.ndarray) -> float:
    """Mean over query tokens of the best cosine with any passage token; 0.0 when either side is empty."""
    if len(query) == 0 or len(passage) == 0:
        return 0.0
    return float(_product(query, passage.T).max(axis=1).mean())


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float32 without BLAS. These products are small (a query's 10 tokens against 20 passages'
    ~700), but big enough for OpenBLAS to wake its thread pool, whose threads then keep spinning and took the
    CPU from onnxruntime and the rest of the search: measured on Flask, fused search without rerank went from
    14 to 30 ms p50 when interleaved with reranked ones (decode-then-compare: 25-35 ms per query under load).
    numpy's einsum loops are single-threaded and take well under a millisecond here."""
    return np.einsum("ij,jk->ik", a.astype(np.float32, copy=False), b.astype(np.float32, copy=False))


def _quantize(x: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row quantization to ``[-levels, levels]``: (float16 scales, integer codes)."""
    scales = (np.abs(x).max(axis=1) / float(levels)).astype("<f2")
    safe = np.maximum(scales.astype(np.float32), np.float32(1e-8))[:, None]
    return scales, np.clip(np.rint(x / safe), -levels, levels).astype(np.int16)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
