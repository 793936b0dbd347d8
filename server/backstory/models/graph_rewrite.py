"""Graph rewrites applied once to the dynamically-quantized embedding model (see :mod:`.optimize`).

``quantize_dynamic`` quantizes each MatMul input with ``DynamicQuantizeLinear``: one scale and zero point
for the *whole* activation tensor ``[batch, tokens, hidden]``. That couples the rows of a batch (and the
padding): a text's vector would depend on its batch mates, so such graphs had to run one text per call.

:func:`per_token_activations` replaces every ``DynamicQuantizeLinear`` by symmetric per-token quantization:
each token row gets its own scale ``max|x| / 127`` and the constant zero point 128 (``MatMulInteger`` on
onnxruntime's CPU accepts only a scalar zero point for A). Everything it computes is a function of one row,
so a text's vectors are bit-identical alone, batched, or padded — and closer to fp32 than per-tensor scales
(cosine to the shipped model ~0.998 instead of ~0.993), because one outlier token no longer widens every
token's step. The per-row scale is applied *after* the per-channel weight scale: onnxruntime's
``MatMulIntegerToFloat`` fusion assumes a scalar activation scale and would silently use only the first
row's if the two scales were multiplied first.

:func:`drop_nan_guards` removes the exporter's ``Where(IsNaN(softmax), 0, softmax)`` after every attention
softmax. A NaN there needs a fully masked attention row, which cannot happen (the mask is additive with a
finite minimum and ``[CLS]`` is always attended), and the guard cost ~15 % of the run time.

Both rewrites are pure functions of the graph, so the converted file is byte-for-byte reproducible.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_PREFIX = "backstory_pt_"
_C127 = _PREFIX + "127"
_EPS = _PREFIX + "eps"
_ONE = _PREFIX + "one"
_ZERO_POINT = _PREFIX + "zero_point"


def per_token_activations(model: Any) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto``) in place; returns how many quantizers were replaced."""
    from onnx import helper, numpy_helper

    graph = model.graph
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(127.0, dtype=np.float32), _C127),
            numpy_helper.from_array(np.array(1e-12, dtype=np.float32), _EPS),
            numpy_helper.from_array(np.array(1.0, dtype=np.float32), _ONE),
            numpy_helper.from_array(np.array(128, dtype=np.uint8), _ZERO_POINT),
        ]
    )
    row_scales: set[str] = set()
    zero_points: set[str] = set()
    nodes: list[Any] = []
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        x = node.input[0]
        quantized, scale, zero_point = node.output
        p = quantized + "_" + _PREFIX
        nodes += [
            helper.make_node("Abs", [x], [p + "abs"]),
            helper.make_node("ReduceMax", [p + "abs"], [p + "absmax"], axes=[-1], keepdims=1),
            helper.make_node("Max", [p + "absmax", _EPS], [p + "range"]),
            helper.make_node("Div", [_C127, p + "range"], [p + "inverse"]),
            helper.make_node("Mul", [x, p + "inverse"], [p + "scaled"]),
            # round half to even, saturate, + 128: values land in [1, 255]
            helper.make_node("QuantizeLinear", [p + "scaled", _ONE, _ZERO_POINT], [quantized]),
            helper.make_node("Div", [p + "range", _C127], [scale]),
        ]
        row_scales.add(scale)
        zero_points.add(zero_point)
    if not row_scales:
        return 0

    consumers: dict[str, list[Any]] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    rewritten: set[int] = set()
    for node in nodes:
        for i, name in enumerate(node.input):
            if name in zero_points:
                node.input[i] = _ZERO_POINT
        if node.op_type != "Mul" or id(node) in rewritten or not any(n in row_scales for n in node.input):
            continue
        # Mul(row_scale, weight_scale) -> s; Mul(cast, s) -> y   becomes   Mul(cast, weight_scale) -> t;
        # Mul(t, row_scale) -> y
        row_scale = next(n for n in node.input if n in row_scales)
        weight_scale = next(n for n in node.input if n not in row_scales)
        users = consumers.get(node.output[0], [])
        if len(users) != 1 or users[0].op_type != "Mul":
            raise ValueError(f"unexpected use of the activation scale {row_scale!r} in the quantized graph")
        user = users[0]
        cast = next(n for n in user.input if n != node.output[0])
        column_scaled = user.output[0] + "_" + _PREFIX + "colscaled"
        del user.input[:]
        user.input.extend([column_scaled, row_scale])
        rewritten.add(id(user))
        node.CopyFrom(helper.make_node("Mul", [cast, weight_scale], [column_scaled], name=node.name))
    _replace_nodes(model, nodes)
    return len(row_scales)


def drop_nan_guards(model: Any) -> int:
    """Remove ``Where(IsNaN(s), 0, s)`` after a ``Softmax`` ``s``; returns how many were removed."""
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    rename: dict[str, str] = {}
    dropped: set[int] = set()
    for node in graph.node:
        if node.op_type != "Where" or len(node.input) != 3:
            continue
        test, value = producer.get(node.input[0]), node.input[2]
        source = producer.get(value)
        if test is None or test.op_type != "IsNaN" or test.input[0] != value:
            continue
        if source is None or source.op_type != "Softmax":
            continue
        rename[node.output[0]] = value
        dropped.update((id(node), id(test)))
    if not rename:
        return 0
    kept = [node for node in graph.node if id(node) not in dropped]
    for node in kept:
        for i, name in enumerate(node.input):
            while name in rename:
                name = rename[name]
            node.input[i] = name
    outputs = {o.name for o in graph.output}
    if outputs & rename.keys():
        raise ValueError("a NaN guard feeds a graph output; not rewriting")
    _replace_nodes(model, kept)
    return len(rename)


def _replace_nodes(model: Any, nodes: list[Any]) -> None:
    """Install ``nodes`` in topological order (stable: original order wherever it is already valid)."""
    graph = model.graph
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    ordered: list[Any] = []
    pending = list(nodes)
    while pending:
        rest = []
        for node in pending:
            if all(name in available for name in node.input):
                ordered.append(node)
                available.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ValueError("graph rewrite left a node whose inputs are never produced")
        pending = rest
    del graph.node[:]
    graph.node.extend(ordered)
