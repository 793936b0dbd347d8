"""Language identification from file names, and the per-language extraction settings.

`language_for_path` names many more languages than we can parse so that the rest of Backstory
(index fields, filters, display) has one vocabulary of language ids; only those in
`supported_languages` have a tree-sitter grammar wheel and therefore definitions.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType

# Kinds whose bodies hold methods rather than functions (`function` → `method` inside them).
CLASSLIKE: frozenset[str] = frozenset({"class", "struct", "interface", "trait", "impl", "enum"})
# Kinds that never act as a naming scope (a typedef wrapping a struct must not qualify it).
NON_SCOPE: frozenset[str] = frozenset({"type", "constant"})


@dataclass(frozen=True, slots=True)
class LanguageSpec:
    """How to extract definitions for one parsable language.

    ``bundled`` lists grammar packages whose shipped ``queries/tags.scm`` is used (only its
    ``@definition.*`` patterns are kept); ``extra`` names our own query file in
    ``backstory.symbols.queries`` that adds what tags.scm misses. ``node_kinds`` overrides the
    kind taken from the capture name by node type (tags.scm calls a Rust struct a "class").
    ``context_nodes`` are the definition node types whose match (or name) depends on more than the node's own
    subtree: a pattern that names their parent, or a resolver that looks at it. An unchanged node of these
    types is never carried over from another version of the file; it is matched again (see `versions`).
    """

    id: str
    module: str
    function: str = "language"
    bundled: tuple[str, ...] = ()
    extra: str | None = None
    separator: str = "."
    qualify: bool = True
    method_parents: frozenset[str] = CLASSLIKE
    node_kinds: MappingProxyType[str, str] = field(default_factory=lambda: MappingProxyType({}))
    skip_nodes: frozenset[str] = frozenset()
    context_nodes: frozenset[str] = frozenset()


def _kinds(**mapping: str) -> MappingProxyType[str, str]:
    return MappingProxyType(mapping)


_C_KINDS = _kinds(function_definition="function", declaration="function", preproc_function_def="function")
# a `declaration` inside a function body is local, not API (naming._c_family looks at the parent)
_C_CONTEXT = frozenset({"declaration"})
# `(lexical_declaration (variable_declarator ...) @definition.function)` (and `variable_declaration`). Rust's
# `(declaration_list (function_item) @definition.method)` needs no entry: `node_kinds` makes every
# `function_item` a function whichever pattern matched it.
_DECLARATORS = frozenset({"variable_declarator"})

SPECS: MappingProxyType[str, LanguageSpec] = MappingProxyType(
    {
        s.id: s
        for s in (
            # `(module (expression_statement (assignment ...) @definition.constant))`: module-level only
            LanguageSpec(
                "python",
                "tree_sitter_python",
                bundled=("tree_sitter_python",),
                context_nodes=frozenset({"assignment"}),
            ),
            LanguageSpec(
                "javascript",
                "tree_sitter_javascript",
                bundled=("tree_sitter_javascript",),
                extra="javascript.scm",
                context_nodes=_DECLARATORS,
            ),
            # TypeScript's tags.scm only adds TS-only constructs; the tags CLI inherits the
            # JavaScript file, so we do the same.
            LanguageSpec(
                "typescript",
                "tree_sitter_typescript",
                "language_typescript",
                bundled=("tree_sitter_javascript", "tree_sitter_typescript"),
                extra="typescript.scm",
                context_nodes=_DECLARATORS,
            ),
            LanguageSpec(
                "tsx",
                "tree_sitter_typescript",
                "language_tsx",
                bundled=("tree_sitter_javascript", "tree_sitter_typescript"),
                extra="typescript.scm",
                context_nodes=_DECLARATORS,
            ),
            LanguageSpec(
                "rust",
                "tree_sitter_rust",
                bundled=("tree_sitter_rust",),
                extra="rust.scm",
                separator="::",
                node_kinds=_kinds(
                    struct_item="struct",
                    union_item="struct",
                    enum_item="enum",
                    type_item="type",
                    trait_item="trait",
                    function_item="function",
                    function_signature_item="function",
                    macro_definition="function",
                ),
            ),
            LanguageSpec("go", "tree_sitter_go", bundled=("tree_sitter_go",), extra="go.scm"),
            LanguageSpec("java", "tree_sitter_java", bundled=("tree_sitter_java",), extra="java.scm"),
            # The C/C++ tags.scm capture the *declarator* (`foo(int x)`) instead of the function
            # definition, so prototypes look like definitions and ranges miss the body; we use
            # our own queries only.
            LanguageSpec(
                "c", "tree_sitter_c", extra="c.scm", qualify=False, node_kinds=_C_KINDS, context_nodes=_C_CONTEXT
            ),
            LanguageSpec(
                "cpp", "tree_sitter_cpp", extra="cpp.scm", separator="::", node_kinds=_C_KINDS, context_nodes=_C_CONTEXT
            ),
            LanguageSpec(
                "ruby",
                "tree_sitter_ruby",
                bundled=("tree_sitter_ruby",),
                extra="ruby.scm",
                method_parents=CLASSLIKE | {"module"},
                node_kinds=_kinds(method="function", singleton_method="function"),
                skip_nodes=frozenset({"alias"}),
            ),
        )
    }
)


@cache
def supported_languages() -> frozenset[str]:
    """Language ids that have an importable grammar, i.e. for which definitions are extracted."""
    return frozenset(lid for lid, s in SPECS.items() if importlib.util.find_spec(s.module) is not None)


_EXTENSIONS: dict[str, str] = {}


def _register(language: str, *exts: str) -> None:
    for ext in exts:
        _EXTENSIONS[ext] = language


_register("python", ".py", ".pyi", ".pyw")
_register("javascript", ".js", ".mjs", ".cjs", ".jsx")
_register("typescript", ".ts", ".mts", ".cts")
_register("tsx", ".tsx")
_register("rust", ".rs")
_register("go", ".go")
_register("java", ".java")
# `.h` is ambiguous; C is the conventional answer and the C grammar handles C-style C++ headers.
_register("c", ".c", ".h")
_register("cpp", ".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp", ".tpp", ".inl")
_register("ruby", ".rb", ".rake", ".gemspec", ".ru", ".rbi")
_register("markdown", ".md", ".markdown", ".mdx", ".mkd")
_register("restructuredtext", ".rst")
_register("text", ".txt")
_register("json", ".json", ".jsonc", ".json5", ".jsonl", ".ndjson")
_register("yaml", ".yaml", ".yml")
_register("toml", ".toml")
_register("ini", ".ini", ".cfg", ".conf")
_register("xml", ".xml", ".xsd", ".xsl", ".svg", ".plist")
_register("shell", ".sh", ".bash", ".zsh", ".ksh", ".fish")
_register("powershell", ".ps1", ".psm1")
_register("batch", ".bat", ".cmd")
_register("html", ".html", ".htm", ".xhtml")
_register("css", ".css")
_register("scss", ".scss", ".sass")
_register("less", ".less")
_register("vue", ".vue")
_register("svelte", ".svelte")
_register("csharp", ".cs", ".csx")
_register("fsharp", ".fs", ".fsi", ".fsx")
_register("kotlin", ".kt", ".kts")
_register("swift", ".swift")
_register("objc", ".m")
_register("objcpp", ".mm")
_register("php", ".php", ".phtml")
_register("scala", ".scala", ".sc")
_register("groovy", ".groovy", ".gradle")
_register("clojure", ".clj", ".cljs", ".cljc", ".edn")
_register("sql", ".sql")
_register("lua", ".lua")
_register("perl", ".pl", ".pm")
_register("r", ".r")
_register("dart", ".dart")
_register("elixir", ".ex", ".exs")
_register("erlang", ".erl", ".hrl")
_register("haskell", ".hs", ".lhs")
_register("ocaml", ".ml", ".mli")
_register("elm", ".elm")
_register("julia", ".jl")
_register("zig", ".zig")
_register("nim", ".nim")
_register("vim", ".vim")
_register("protobuf", ".proto")
_register("graphql", ".graphql", ".gql")
_register("terraform", ".tf", ".tfvars", ".hcl")
_register("nix", ".nix")
_register("cmake", ".cmake")
_register("makefile", ".mk", ".mak")
_register("dockerfile", ".dockerfile")
_register("starlark", ".bzl", ".star", ".bazel")
_register("tex", ".tex", ".sty", ".cls")
_register("csv", ".csv", ".tsv")
_register("diff", ".diff", ".patch")

_FILENAMES: dict[str, str] = {
    "makefile": "makefile",
    "gnumakefile": "makefile",
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "cmakelists.txt": "cmake",
    "gemfile": "ruby",
    "rakefile": "ruby",
    "guardfile": "ruby",
    "podfile": "ruby",
    "vagrantfile": "ruby",
    "brewfile": "ruby",
    "fastfile": "ruby",
    "build": "starlark",
    "workspace": "starlark",
    "justfile": "makefile",
    "jenkinsfile": "groovy",
    ".editorconfig": "ini",
    ".bashrc": "shell",
    ".bash_profile": "shell",
    ".zshrc": "shell",
    ".profile": "shell",
}


def known_languages() -> frozenset[str]:
    """Every language id :func:`language_for_path` can return (what a ``--language`` filter can match)."""
    return frozenset({*_EXTENSIONS.values(), *_FILENAMES.values(), "dockerfile", "makefile"})


def language_for_path(path: str) -> str | None:
    """Language id for a file path (either ``/`` or ``\\`` separated), or ``None`` if unknown.

    Decided by the file name only (no content sniffing), so it is cheap enough to run on every
    path of every commit. Well-known extension-less names (Makefile, Dockerfile, Gemfile...) and
    ``Dockerfile.dev``-style variants are recognised; matching is case-insensitive.
    """
    base = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if not base:
        return None
    known = _FILENAMES.get(base)
    if known is not None:
        return known
    dot = base.rfind(".")
    if dot > 0 or (dot == 0 and base.count(".") > 1):
        lang = _EXTENSIONS.get(base[dot:])
        if lang is not None:
            return lang
    stem = base.split(".", 1)[0]
    if stem in ("dockerfile", "containerfile"):
        return "dockerfile"
    if stem in ("makefile", "gnumakefile"):
        return "makefile"
    return None
