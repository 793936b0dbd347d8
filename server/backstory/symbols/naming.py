"""Per-language naming rules that queries alone cannot express.

Each resolver gets the captured definition node, its ``@name`` node (if the pattern has one) and
the kind from the capture, and returns ``(segment, short_name, kind)`` or ``None`` to drop the
match. ``segment`` is this definition's own part of the qualified name; the extractor prefixes it
with the enclosing definitions' names. Segments may already contain the language's separator
(Go ``Recv.Method``, C++ ``Class::method``, Ruby ``class A::B`` → ``A.B``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

Resolved = tuple[str, str, str]
Resolver = Callable[[Node, Node | None, str, bytes], Resolved | None]

_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_TYPE_PREFIX = re.compile(r"^(?:[&*\s]|'\w+\s+|mut\s+|dyn\s+|const\s+)+")
_TYPE_END = re.compile(r"[<\[({\s]")


def text(node: Node, source: bytes) -> str:
    """Node text, whitespace-collapsed; undecodable bytes become U+FFFD rather than raising."""
    return " ".join(source[node.start_byte : node.end_byte].decode("utf-8", "replace").split())


def base_type_name(type_text: str) -> str:
    """``&'a mut Foo<T>`` / ``*Srv[T]`` / ``fmt::Wrapper<T>`` → ``Foo`` / ``Srv`` / ``Wrapper``.

    Used for Rust impl blocks and Go receivers: the type's own name is what people search for,
    generics and reference sigils are noise. Falls back to the whole text for types without a
    name (tuples, slices).
    """
    t = _TYPE_PREFIX.sub("", type_text)
    t = _TYPE_END.split(t, maxsplit=1)[0]
    t = t.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
    return t or type_text


def _strip_templates(name: str) -> str:
    if "operator" in name:  # `operator<` must keep its angle bracket
        return name
    prev = None
    while prev != name:
        prev, name = name, _TEMPLATE_ARGS.sub("", name)
    return name.replace(" ", "")


def default(node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    if name is None:
        return None
    t = text(name, source)
    return (t, t, kind) if t else None


def _go(node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    res = default(node, name, kind, source)
    if res is None:
        return None
    if node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        param = receiver.named_children[0] if receiver is not None and receiver.named_children else None
        rtype = param.child_by_field_name("type") if param is not None else None
        if rtype is not None:
            return (f"{base_type_name(text(rtype, source))}.{res[1]}", res[1], "method")
    elif node.type == "type_spec":
        body = node.child_by_field_name("type")
        btype = body.type if body is not None else ""
        kind = {"struct_type": "struct", "interface_type": "interface"}.get(btype, "type")
        return (res[0], res[1], kind)
    return res


def _rust(node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    if node.type == "impl_item" and name is not None:
        t = base_type_name(text(name, source))
        return (t, t, "impl")
    return default(node, name, kind, source)


def _ruby(node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    if node.type in ("class", "module"):
        full = node.child_by_field_name("name")
        if full is not None and full.type == "scope_resolution":
            seg = text(full, source).lstrip(":").replace("::", ".")
            return (seg, seg.rsplit(".", 1)[-1], kind)
    return default(node, name, kind, source)


def _typescript(node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    res = default(node, name, kind, source)
    if res is not None and node.type == "internal_module":
        return (res[0], res[0].rsplit(".", 1)[-1], kind)
    return res


_FUNCTION_NODES = frozenset({"function_definition", "declaration", "field_declaration"})
_BODY_NODES = frozenset({"compound_statement"})
_NAME_NODES = frozenset({"identifier", "field_identifier", "destructor_name", "operator_name", "qualified_identifier"})


def _function_declarator(node: Node) -> Node | None:
    """Follow ``declarator`` fields through pointer/reference wrappers to the function declarator."""
    d = node.child_by_field_name("declarator")
    for _ in range(8):  # bounded: declarator chains are short, and this must never loop forever
        if d is None or d.type == "function_declarator":
            return d
        if d.type not in ("pointer_declarator", "reference_declarator", "attributed_declarator"):
            return None
        nxt = d.child_by_field_name("declarator")
        d = nxt if nxt is not None else (d.named_children[-1] if d.named_children else None)
    return None


def _c_family(node: Node, name: Node | None, kind: str, source: bytes, sep: str) -> Resolved | None:
    if node.type in _FUNCTION_NODES:
        parent = node.parent
        if node.type == "declaration" and parent is not None and parent.type in _BODY_NODES:
            return None  # local declarations inside function bodies are not API
        fd = _function_declarator(node)
        inner = fd.child_by_field_name("declarator") if fd is not None else None
        if inner is None:
            return None
        if inner.type == "template_function":
            inner = inner.child_by_field_name("name") or inner
        if inner.type not in _NAME_NODES and inner.type != "type_identifier":
            return None  # function pointers: `int (*cb)(int);`
        seg = _strip_templates(text(inner, source))
        if not seg:
            return None
        if inner.type == "qualified_identifier":
            return (seg, seg.rsplit(sep, 1)[-1], "method")
        if node.type == "field_declaration":
            kind = "method"
        return (seg, seg, kind)
    if name is None:
        return None
    seg = _strip_templates(text(name, source))
    if not seg:
        return None
    return (seg, seg.rsplit(sep, 1)[-1], kind)


def _c(node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    return _c_family(node, name, kind, source, "::")


RESOLVERS: dict[str, Resolver] = {
    "go": _go,
    "rust": _rust,
    "ruby": _ruby,
    "typescript": _typescript,
    "tsx": _typescript,
    "c": _c,
    "cpp": _c,
}


def resolve(language: str, node: Node, name: Node | None, kind: str, source: bytes) -> Resolved | None:
    return RESOLVERS.get(language, default)(node, name, kind, source)
