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

Two fusions onnxruntime does not find by itself cut the elementwise passes, which (with AMX/VNNI int8
GEMMs) cost more than the matrix products: :func:`fuse_gelu` turns the exporter's
``x * (0.5 * (1 + erf(x / sqrt 2)))`` into one ``Gelu`` (onnxruntime's own fusion expects another operand
order), and :func:`integer_matmuls_to_float` folds ``MatMulInteger -> Cast -> Mul(weight scale)`` into one
``MatMulIntegerToFloat`` with a unit activation scale (the per-token scale is still applied after it).
Together with the session keeping ``Add + LayerNormalization`` unfused (see :mod:`._runtime`) the dense
phase ran ~1.3× faster per CPU-second on Flask's units.

All rewrites are pure functions of the graph, so the converted file is byte-for-byte reproducible.
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


def fuse_gelu(model: Any) -> int:
    """Replace ``Mul(x, Mul(0.5, Add(Erf(Div(x, sqrt 2)), 1)))`` (operands in any order) by
    ``com.microsoft.Gelu(x)``; returns how many were fused. The exact erf GELU, so the math is unchanged."""
    from onnx import helper

    graph = model.graph
    producer, consumers = _links(graph)
    constant = _constants(graph)
    fused: list[Any] = []
    dropped: set[int] = set()
    for erf in [node for node in graph.node if node.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        if div is None or div.op_type != "Div" or not _is(constant, div.input[1], 2**0.5):
            continue
        if len(consumers.get(div.output[0], [])) != 1:
            continue
        x = div.input[0]
        chain = _single_users(consumers, erf, ("Add", "Mul", "Mul"))
        if chain is None:
            continue
        add, first, second = chain
        if not _is(constant, _other(add, erf.output[0]), 1.0):
            continue
        operands = {_other(first, add.output[0]), _other(second, first.output[0])}
        halves = [name for name in operands if name != x]
        if x not in operands or len(halves) != 1 or not _is(constant, halves[0], 0.5):
            continue
        dropped.update(id(node) for node in (div, erf, add, first, second))
        fused.append(
            helper.make_node("Gelu", [x], [second.output[0]], name=f"{second.output[0]}_gelu", domain="com.microsoft")
        )
    if fused:
        _replace_nodes(model, [node for node in graph.node if id(node) not in dropped] + fused)
    return len(fused)


def integer_matmuls_to_float(model: Any) -> int:
    """Fold ``MatMulInteger(a, w, za, zw) -> Cast(float) -> Mul(., weight scale)`` into
    ``com.microsoft.MatMulIntegerToFloat(a, w, 1, weight scale, za, zw)``; returns how many were folded.

    The activation scale stays 1: the per-token scale is a tensor, which the fused kernel would not apply
    per row (see the module docstring), so the following ``Mul`` by it is kept."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    _producer, consumers = _links(graph)
    constant = _constants(graph)
    folded: list[Any] = []
    dropped: set[int] = set()
    for matmul in [node for node in graph.node if node.op_type == "MatMulInteger" and len(node.input) == 4]:
        chain = _single_users(consumers, matmul, ("Cast", "Mul"))
        if chain is None:
            continue
        cast, mul = chain
        if next((a.i for a in cast.attribute if a.name == "to"), None) != TensorProto.FLOAT:
            continue
        scale = _other(mul, cast.output[0])
        if constant.get(scale) is None:
            continue
        a, w, a_zero, w_zero = matmul.input
        dropped.update(id(node) for node in (matmul, cast, mul))
        inputs = [a, w, _ONE, scale, a_zero, w_zero]
        name = f"{mul.output[0]}_to_float"
        node = helper.make_node("MatMulIntegerToFloat", inputs, [mul.output[0]], name=name, domain="com.microsoft")
        folded.append(node)
    if not folded:
        return 0
    if _ONE not in constant:
        graph.initializer.append(numpy_helper.from_array(np.array(1.0, dtype=np.float32), _ONE))
    _replace_nodes(model, [node for node in graph.node if id(node) not in dropped] + folded)
    return len(folded)


def _links(graph: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producer, consumers


def _constants(graph: Any) -> dict[str, np.ndarray]:
    """Initializers and ``Constant`` node outputs by name."""
    from onnx import numpy_helper

    values = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _is(constant: dict[str, np.ndarray], name: str, value: float) -> bool:
    found = constant.get(name)
    return found is not None and found.size == 1 and abs(float(found.reshape(-1)[0]) - value) < 1e-5


def _other(node: Any, known: str) -> str:
    """The input of a two-input node that is not ``known`` (``known`` if both are)."""
    rest = [name for name in node.input if name != known]
    return rest[0] if rest else known


def _single_users(consumers: dict[str, list[Any]], start: Any, kinds: tuple[str, ...]) -> list[Any] | None:
    """The chain of nodes of ``kinds`` that each are the only user of the previous output, or ``None``."""
    chain: list[Any] = []
    node = start
    for kind in kinds:
        users = consumers.get(node.output[0], [])
        if len(users) != 1 or users[0].op_type != kind:
            return None
        node = users[0]
        chain.append(node)
    return chain


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
