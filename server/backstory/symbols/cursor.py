"""What the identifier under a cursor is: a definition's name, a reference to a name, or nothing a hover is for.

tree-sitter decides: keywords and punctuation are anonymous nodes, comments, strings and literals have their
own node types, so only identifier-like nodes qualify. A plain name bound inside the enclosing function (a
parameter, a local variable, a loop or ``with`` target, a closure's parameter) is local and never stands for a
definition elsewhere; a member (``x.name``) keeps what is before the dot so the caller can decide whether it
knows the object (``self``, ``this``, a class or module name).

Language-generic on purpose: binding positions are recognised by node type and field name tables that cover
the grammars ``symbols`` parses (Python, JavaScript, TypeScript/TSX, Go, Rust, Java, C, C++, Ruby).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from .extract import parse
from .model import Definition

#: node types that name something (declared or referenced)
IDENTIFIERS = frozenset(
    {
        "identifier",
        "property_identifier",
        "type_identifier",
        "field_identifier",
        "private_property_identifier",
        "shorthand_property_identifier",
        "constant",
        "namespace_identifier",
        "package_identifier",
    }
)

#: node types that open a scope for parameters and locals
SCOPES = frozenset(
    {
        # Python
        "function_definition",
        "lambda",
        "list_comprehension",
        "set_comprehension",
        "dictionary_comprehension",
        "generator_expression",
        # JavaScript / TypeScript
        "function_declaration",
        "function_expression",
        "arrow_function",
        "method_definition",
        "function",
        "generator_function",
        "generator_function_declaration",
        # Go
        "method_declaration",
        "func_literal",
        # Rust
        "function_item",
        "closure_expression",
        # Java
        "constructor_declaration",
        "lambda_expression",
        # Ruby
        "method",
        "singleton_method",
        "block",
        "do_block",
    }
)

#: (parent type, field) pairs whose subtree binds a name
BINDING_FIELDS = frozenset(
    {
        ("assignment", "left"),
        ("augmented_assignment", "left"),
        ("for_statement", "left"),
        ("for_in_clause", "left"),
        ("as_pattern", "alias"),
        ("named_expression", "name"),
        ("variable_declarator", "name"),
        ("for_in_statement", "left"),
        ("catch_clause", "parameter"),
        ("arrow_function", "parameter"),
        ("assignment_expression", "left"),
        ("short_var_declaration", "left"),
        ("var_spec", "name"),
        ("const_spec", "name"),
        ("range_clause", "left"),
        ("let_declaration", "pattern"),
        ("for_expression", "pattern"),
        ("match_arm", "pattern"),
        ("if_let_expression", "pattern"),
        ("let_condition", "pattern"),
        ("enhanced_for_statement", "name"),
        ("lambda_expression", "parameters"),
        ("init_declarator", "declarator"),
        ("declaration", "declarator"),
        ("for", "pattern"),
        ("exception_variable", None),
        ("rescue", "variable"),
    }
)

#: parameter lists whose direct identifier children are parameters
PARAMETER_LISTS = frozenset(
    {
        "parameters",
        "lambda_parameters",
        "formal_parameters",
        "closure_parameters",
        "method_parameters",
        "block_parameters",
        "inferred_parameters",
    }
)

#: fields that hold an expression read (not bound) even inside a binding construct
READ_FIELDS = frozenset(
    {"value", "right", "default_value", "default", "type", "body", "arguments", "function", "operand", "object"}
)

#: (member node type, field of the member name, field of the object before it)
MEMBERS: dict[str, tuple[str, str]] = {
    "attribute": ("attribute", "object"),  # Python
    "member_expression": ("property", "object"),  # JS / TS
    "selector_expression": ("field", "operand"),  # Go
    "field_expression": ("field", "value"),  # Rust (C / C++ use "argument", handled below)
    "scoped_identifier": ("name", "path"),  # Rust Type::f
    "method_invocation": ("name", "object"),  # Java
    "field_access": ("field", "object"),  # Java
    "qualified_identifier": ("name", "scope"),  # C++
    "call": ("method", "receiver"),  # Ruby
}

SELF_WORDS = frozenset({"self", "this", "cls", "super", "super()", "Self", "@"})

_WORD = re.compile(rb"[A-Za-z_$][A-Za-z0-9_$]*")


@dataclass(frozen=True)
class Target:
    """The identifier under the cursor.

    ``role``: ``definition`` (the name at a definition site; ``definition`` set), ``reference`` (a plain name
    not bound in the enclosing function), ``member`` (``qualifier.name``) or ``local`` (a parameter or local
    variable: nothing to show). ``enclosing``: the innermost definition around the identifier, if any.
    """

    name: str
    role: str
    line: int
    qualifier: str | None = None
    definition: Definition | None = None
    receiver: str | None = None  # Go: the enclosing method's receiver variable, which acts as ``self``


def _field_of(parent: Node, child: Node) -> str | None:
    for i, c in enumerate(parent.children):
        if c.start_byte == child.start_byte and c.end_byte == child.end_byte and c.type == child.type:
            return parent.field_name_for_child(i)
    return None


_CONTAINERS = frozenset(
    {
        "pattern_list",
        "expression_list",
        "tuple",
        "list",
        "parenthesized_expression",
        "as_pattern_target",
        "splat",
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
        "parenthesized_declarator",
    }
)


def _is_container(node: Node) -> bool:
    """Nodes a bound name may sit in below its binding construct (``a, (b, c) = …``, ``int *p``)."""
    return "pattern" in node.type or node.type in _CONTAINERS


def is_binding(ident: Node) -> bool:
    """Whether ``ident`` is where a name is bound (a parameter, a variable or loop target), not read."""
    child, parent = ident, ident.parent
    while parent is not None:
        field = _field_of(parent, child)
        if field in READ_FIELDS:
            return False
        if (parent.type, field) in BINDING_FIELDS:
            return True
        if parent.type in PARAMETER_LISTS:
            return True
        if parent.type == "parameter_list":
            return False
        if "parameter" in parent.type and field in (None, "name", "pattern", "declarator"):
            return True
        if not _is_container(parent):
            return False
        child, parent = parent, parent.parent
    return False


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _identifiers(node: Node, name: bytes) -> list[Node]:
    """Identifier nodes spelled ``name`` in ``node``'s subtree."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in IDENTIFIERS or n.type == "identifier":
            if n.text == name:
                out.append(n)
            continue
        stack.extend(n.children)
    return out


def _declared_global(scope: Node, name: bytes) -> bool:
    for n in _identifiers(scope, name):
        p = n.parent
        if p is not None and p.type in ("global_statement", "nonlocal_statement"):
            return True
    return False


def bound_locally(ident: Node) -> bool:
    """Whether the plain name ``ident`` is a parameter or local of one of the functions around it."""
    name = ident.text or b""
    scope = ident.parent
    while scope is not None:
        if scope.type in SCOPES:
            if _declared_global(scope, name):
                return False
            if any(is_binding(n) for n in _identifiers(scope, name)):
                return True
        scope = scope.parent
    return False


def _receiver(ident: Node) -> str | None:
    """Go: the receiver variable of the method around ``ident`` (``s`` in ``func (s *Server) Run()``)."""
    n = ident.parent
    while n is not None and n.type != "method_declaration":
        n = n.parent
    if n is None:
        return None
    recv = n.child_by_field_name("receiver")
    if recv is None:
        return None
    for p in recv.named_children:
        name = p.child_by_field_name("name")
        if name is not None:
            return _text(name)
    return None


def _at(root: Node, row: int, column: int) -> Node | None:
    for col in (column, column - 1):
        if col < 0:
            continue
        node = root.named_descendant_for_point_range((row, col), (row, col))
        if node is not None and node.type in IDENTIFIERS:
            return node
    return None


def _definition_named(node: Node, source: bytes, defs: list[Definition], line: int) -> Definition | None:
    """The definition whose name ``node`` is: one starting on its line or up to three lines before, spelled like
    it, with no earlier identifier of that spelling between the definition's first line and the node."""
    best: Definition | None = None
    for d in defs:
        if d.short_name != _text(node) or not 0 <= line - d.start_line <= 3 or line > d.end_line:
            continue
        start = source.rfind(b"\n", 0, node.start_byte) + 1  # the start of the node's line
        for _ in range(line - d.start_line):  # back to the start of the definition's first line
            start = source.rfind(b"\n", 0, max(start - 1, 0)) + 1
        before = source[start : node.start_byte]
        if any(m.group(0) == node.text for m in _WORD.finditer(before)):
            continue
        if best is None or d.start_line >= best.start_line:
            best = d
    return best


def target_at(source: bytes, language: str, defs: list[Definition], line: int, column: int) -> Target | None:
    """The identifier at 1-based ``line``, 0-based byte ``column``, and what it is; None on anything that is not a
    name (keywords, punctuation, comments, strings, numbers) or when the file cannot be parsed."""
    parsed = parse(source, language)
    if parsed is None or parsed.tree is None:
        return None
    node = _at(parsed.tree.root_node, line - 1, column)
    if node is None:
        return None
    name = _text(node)
    row = node.start_point.row + 1
    d = _definition_named(node, source, defs, row)
    if d is not None:
        return Target(name, "definition", row, definition=d)
    parent = node.parent
    if parent is not None and parent.type in MEMBERS:
        name_field, object_field = MEMBERS[parent.type]
        if _field_of(parent, node) == name_field:
            obj = parent.child_by_field_name(object_field)
            if obj is not None:
                return Target(name, "member", row, qualifier=_text(obj)[:80], receiver=_receiver(node))
            if parent.type == "call":  # Ruby: `foo` or `foo(x)` without a receiver is a plain call
                return Target(name, "reference", row)
    if parent is not None and parent.type == "field_expression" and _field_of(parent, node) == "field":
        obj = parent.child_by_field_name("argument")  # C / C++: p->f, s.f
        if obj is not None:
            return Target(name, "member", row, qualifier=_text(obj)[:80])
    if is_binding(node) or bound_locally(node):
        return Target(name, "local", row)
    return Target(name, "reference", row)


def utf16_to_byte_column(line_text: str, character: int) -> int:
    """An LSP character offset (UTF-16 code units, the protocol's default) as a byte offset in the UTF-8 line."""
    units = 0
    for i, ch in enumerate(line_text):
        if units >= character:
            return len(line_text[:i].encode("utf-8"))
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line_text.encode("utf-8"))
