"""Tiny, hand-built models for tests: a cross-encoder-shaped ONNX graph and a WordPiece tokenizer.json.

The graph embeds tokens with a 2-d table where "retry" and "backoff" point along the first axis and every
other token along the second, averages over the *passage* segment (attention_mask × token_type_ids, or the
whole pair when the graph has no token_type_ids input) and projects onto the first axis. So a passage's
score is the fraction of its tokens (its closing [SEP] included) that are "retry" or "backoff": tests can
predict scores exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "retry",
    "backoff",
    "date",
    "format",
    "the",
    "request",
    "with",
    "http",
    "parse",
    "string",
]
RELEVANT = ("retry", "backoff")


def write_tokenizer(path: Path) -> Tokenizer:
    """A BERT-like uncased WordPiece tokenizer over :data:`VOCAB`, saved with baked-in fixed padding and
    truncation (as real exports have) that the code under test must override."""
    vocab = {token: i for i, token in enumerate(VOCAB)}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.enable_padding(length=48, pad_id=0, pad_token="[PAD]")
    tokenizer.enable_truncation(6)
    tokenizer.save(str(path))
    return tokenizer


def cross_encoder_graph(*, token_types: bool = True, columns: int = 1) -> onnx.ModelProto:
    """Inputs input_ids / attention_mask (/ token_type_ids) int64 [b, s]; output ``logits`` [b, columns].

    With ``columns == 2`` the relevance score is the *last* column and the first one is its negation, so a
    reader that takes the wrong column ranks backwards.
    """
    table = np.zeros((len(VOCAB), 2), dtype=np.float32)
    for i, token in enumerate(VOCAB):
        table[i] = (1.0, 0.0) if token in RELEVANT else (0.0, 1.0)
    weights = (
        np.array([[1.0], [0.0]], dtype=np.float32)
        if columns == 1
        else np.array([[-1.0, 1.0], [0.0, 0.0]], dtype=np.float32)
    )
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
    ]
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["embedded"])]
    if token_types:
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "sequence"]))
        nodes.append(helper.make_node("Mul", ["attention_mask", "token_type_ids"], ["segment"]))
        mask_name = "segment"
    else:
        mask_name = "attention_mask"
    nodes += [
        helper.make_node("Cast", [mask_name], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["embedded", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "axis1"], ["count"], keepdims=0),
        helper.make_node("Max", ["count", "one"], ["safe_count"]),
        helper.make_node("Div", ["summed", "safe_count"], ["mean"]),
        helper.make_node("MatMul", ["mean", "weights"], ["logits"]),
    ]
    initializers = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(weights, "weights"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one"),
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", columns])
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, [output], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="backstory-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write_cross_encoder(directory: Path, *, token_types: bool = True, columns: int = 1) -> Path:
    """A directory holding model.onnx + tokenizer.json, as a user would configure it."""
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(cross_encoder_graph(token_types=token_types, columns=columns), str(directory / "model.onnx"))
    write_tokenizer(directory / "tokenizer.json")
    return directory


def expected_score(passage_tokens: list[str]) -> float:
    """Score the graph gives a passage (with token types): relevant share of its tokens plus its [SEP]."""
    relevant = sum(token in RELEVANT for token in passage_tokens)
    return relevant / (len(passage_tokens) + 1)
