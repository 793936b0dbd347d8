"""Tests for backstory.symbols: real tree-sitter grammars, no mocks.

Fixtures live in tests/data/symbols/ so that the expected line numbers can be checked by opening
the file next to the test.
"""

from __future__ import annotations

import io
import random
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from importlib.resources import files
from pathlib import Path

import pytest
from tree_sitter import Point

from backstory.evaluation.symbols_bench import generate
from backstory.evaluation.symbols_bench import main as bench_main
from backstory.history.diff import diff_hunks
from backstory.symbols import (
    KINDS,
    Definition,
    definitions_touching,
    enclosing_definitions,
    extract_definitions,
    innermost_definition,
    language_for_path,
    supported_languages,
    versions,
)
from backstory.symbols.extract import parse
from backstory.symbols.versions import VersionCache, edits_to_older, tree_of

DATA = Path(__file__).parent / "data" / "symbols"
ALL_LANGUAGES = ("python", "javascript", "typescript", "tsx", "rust", "go", "java", "c", "cpp", "ruby")

Row = tuple[str, str, int, int]

EXPECTED: dict[str, tuple[str, list[Row]]] = {
    "python": (
        "sample.py",
        [
            ("TIMEOUT", "constant", 3, 3),
            ("Client", "class", 7, 21),
            ("Client.__init__", "method", 10, 11),
            ("Client.send", "method", 13, 17),
            ("Client.send.encode", "function", 14, 15),
            ("Client.Retry", "class", 19, 21),
            ("Client.Retry.wait", "method", 20, 21),
            ("connect", "function", 24, 25),
        ],
    ),
    "javascript": (
        "sample.js",
        [
            ("Client", "class", 2, 17),
            ("Client.constructor", "method", 4, 6),
            ("Client.send", "method", 8, 11),
            ("Client.send.encode", "function", 9, 9),
            ("Client.#sign", "method", 12, 12),
            ("Client.handler", "method", 13, 15),
            ("Client.create", "method", 16, 16),
            ("connect", "function", 19, 22),
            ("connect.retry", "function", 20, 20),
            ("format", "method", 25, 25),
            ("parse", "function", 26, 26),
            ("util", "function", 29, 29),
            ("gen", "function", 30, 30),
        ],
    ),
    "typescript": (
        "sample.ts",
        [
            ("Shape", "interface", 3, 6),
            ("Shape.area", "method", 4, 4),
            ("Id", "type", 8, 8),
            ("Color", "enum", 10, 13),
            ("Geo.Util", "module", 15, 19),
            ("Geo.Util.dist", "function", 16, 18),
            ("Base", "class", 21, 31),
            ("Base.area", "method", 23, 23),
            ("Base.constructor", "method", 24, 24),
            ("Base.log", "method", 25, 27),
            ("Base.size", "method", 28, 30),
            ("ext", "function", 33, 33),
            ("handler", "function", 34, 34),
            ("foo", "module", 35, 37),
            ("foo.bar", "function", 36, 36),
        ],
    ),
    "tsx": (
        "sample.tsx",
        [
            ("Props", "interface", 3, 5),
            ("App", "function", 7, 12),
            ("App.onClick", "function", 8, 10),
            ("Widget", "class", 14, 18),
            ("Widget.render", "method", 15, 17),
        ],
    ),
    "rust": (
        "sample.rs",
        [
            ("MAX", "constant", 3, 3),
            ("COUNTER", "constant", 4, 4),
            ("Point", "struct", 8, 11),
            ("Shape", "enum", 13, 16),
            ("Area", "trait", 18, 23),
            ("Area::area", "method", 19, 19),
            ("Area::describe", "method", 20, 22),
            ("Point", "impl", 25, 29),
            ("Point::new", "method", 26, 28),
            ("Point", "impl", 31, 35),
            ("Point::fmt", "method", 32, 34),
            ("geo", "module", 37, 48),
            ("geo::helper", "function", 38, 38),
            ("geo::Line", "struct", 40, 40),
            ("geo::Line", "impl", 42, 47),
            ("geo::Line::area", "method", 43, 46),
            ("geo::Line::area::inner", "function", 44, 44),
            ("square", "function", 50, 52),
            ("Pair", "type", 54, 54),
            ("main", "function", 56, 56),
        ],
    ),
    "go": (
        "sample.go",
        [
            ("DefaultPort", "constant", 6, 6),
            ("maxConns", "constant", 7, 7),
            ("Server", "struct", 11, 13),
            ("Handler", "interface", 15, 17),
            ("Handler.Serve", "method", 16, 16),
            ("ID", "type", 19, 19),
            ("Alias", "type", 21, 21),
            ("New", "function", 23, 25),
            ("Server.Run", "method", 27, 30),
            ("Box.Get", "method", 32, 35),
        ],
    ),
    "java": (
        "Sample.java",
        [
            ("Outer", "class", 5, 32),
            ("Outer.Outer", "method", 8, 10),
            ("Outer.run", "method", 12, 16),
            ("Outer.run.run", "method", 14, 14),  # method of an anonymous class
            ("Outer.Inner", "class", 18, 20),
            ("Outer.Inner.helper", "method", 19, 19),
            ("Outer.Listener", "interface", 22, 24),
            ("Outer.Listener.onEvent", "method", 23, 23),
            ("Outer.Mode", "enum", 26, 29),
            ("Outer.Mode.isOn", "method", 28, 28),
            ("Outer.Pair", "class", 31, 31),
            ("Marker", "interface", 34, 34),
        ],
    ),
    "c": (
        "sample.c",
        [
            ("MAX", "function", 3, 3),
            ("point", "struct", 5, 8),
            ("node", "struct", 10, 12),
            ("node_t", "type", 10, 12),
            ("anon_t", "type", 14, 16),
            ("color", "enum", 18, 18),
            ("value", "struct", 20, 20),
            ("helper", "function", 22, 22),  # prototype
            ("dup", "function", 23, 23),  # prototype returning a pointer
            ("helper", "function", 26, 30),
            ("names", "function", 32, 36),
        ],
    ),
    "cpp": (
        "sample.cpp",
        [
            ("net", "module", 3, 31),
            ("net::detail", "module", 4, 6),
            ("net::detail::checksum", "function", 5, 5),
            ("net::Client", "class", 9, 23),
            ("net::Client::Client", "method", 11, 11),
            ("net::Client::~Client", "method", 12, 12),
            ("net::Client::send", "method", 13, 13),
            ("net::Client::operator==", "method", 14, 14),
            ("net::Client::instance", "method", 15, 15),
            ("net::Client::Options", "struct", 17, 19),
            ("net::Client::Client", "method", 26, 26),
            ("net::detail::checksum", "function", 28, 30),
            ("Mode", "enum", 33, 33),
            ("Bytes", "type", 34, 34),
            ("main", "function", 36, 39),
        ],
    ),
    "ruby": (
        "sample.rb",
        [
            ("Billing", "module", 3, 28),
            ("Billing.VERSION", "constant", 4, 4),
            ("Billing.Invoice", "class", 6, 23),
            ("Billing.Invoice.initialize", "method", 9, 11),
            ("Billing.Invoice.build", "method", 13, 15),
            ("Billing.Invoice.parse", "method", 18, 18),
            ("Billing.Api.Client", "class", 25, 27),
            ("Billing.Api.Client.call", "method", 26, 26),
            ("helper", "function", 30, 31),
        ],
    ),
}


def extract(language: str) -> list[Definition]:
    defs = extract_definitions((DATA / EXPECTED[language][0]).read_bytes(), language)
    assert defs is not None
    return defs


def rows(defs: list[Definition]) -> list[Row]:
    return [(d.name, d.kind, d.start_line, d.end_line) for d in defs]


def by_name(defs: list[Definition], name: str) -> Definition:
    (d,) = [d for d in defs if d.name == name][:1]
    return d


# -- extraction per language ---------------------------------------------------------------------


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_fixture_definitions(language: str) -> None:
    assert rows(extract(language)) == EXPECTED[language][1]


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_invariants(language: str) -> None:
    defs = extract(language)
    assert defs == sorted(defs, key=lambda d: (d.start_line, -d.end_line, d.name, d.kind))
    for d in defs:
        assert d.kind in KINDS
        assert 1 <= d.start_line <= d.end_line
        assert d.short_name and d.name.endswith(d.short_name)
        assert d.signature and d.signature == d.signature.strip() and len(d.signature) <= 200


def test_short_names_and_signatures() -> None:
    py = extract("python")
    send = by_name(py, "Client.send")
    assert (send.short_name, send.signature) == ("send", "def send(self, msg):")
    assert by_name(py, "Client").signature == "class Client:"  # the decorator line is not included

    js = extract("javascript")
    assert by_name(js, "Client").signature == "export class Client {"
    assert by_name(js, "Client.send.encode").signature == "const encode = (m) => JSON.stringify(m);"

    go = extract("go")
    run = by_name(go, "Server.Run")
    assert (run.short_name, run.signature) == ("Run", "func (s *Server) Run() error {")

    rs = extract("rust")
    fmt = by_name(rs, "Point::fmt")
    assert fmt.short_name == "fmt"
    assert fmt.signature == "fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {"

    cpp = extract("cpp")
    assert by_name(cpp, "net::Client::~Client").short_name == "~Client"
    assert by_name(cpp, "net::Client").signature == "class Client : public Base {"

    rb = extract("ruby")
    assert by_name(rb, "Billing.Api.Client").short_name == "Client"
    assert by_name(rb, "Billing.Invoice.build").signature == "def self.build(data)"

    ts = extract("typescript")
    assert by_name(ts, "Geo.Util").short_name == "Util"


def test_signature_is_capped() -> None:
    src = b"def f(" + b", ".join(b"a%d" % i for i in range(200)) + b"):\n    pass\n"
    (d,) = extract_definitions(src, "python") or []
    assert len(d.signature) == 200 and d.signature.startswith("def f(a0, a1")


def test_python_module_level_constants_only() -> None:
    src = b"A = 1\n\ndef f():\n    b = 2\n\nclass C:\n    c = 3\n"
    assert [(d.name, d.kind) for d in extract_definitions(src, "python") or []] == [
        ("A", "constant"),
        ("f", "function"),
        ("C", "class"),
    ]


def test_go_receiver_forms() -> None:
    src = b"package p\nfunc (s S) A() {}\nfunc (s *S) B() {}\nfunc (List[T]) C() {}\nfunc (*Map[K, V]) D() {}\n"
    assert [d.name for d in extract_definitions(src, "go") or []] == ["S.A", "S.B", "List.C", "Map.D"]


def test_rust_impl_naming() -> None:
    src = b"""impl<'a, T: Clone> Wrapper<'a, T> {
    fn get(&self) {}
}
impl<T> From<T> for &mut Holder<T> {
    fn from(t: T) -> Self { todo!() }
}
mod outer {
    mod inner {
        impl crate::x::Thing {
            fn go() {}
        }
    }
}
"""
    names = [d.name for d in extract_definitions(src, "rust") or []]
    assert names == [
        "Wrapper",
        "Wrapper::get",
        "Holder",
        "Holder::from",
        "outer",
        "outer::inner",
        "outer::inner::Thing",
        "outer::inner::Thing::go",
    ]


def test_cpp_local_declarations_and_function_pointers_are_not_definitions() -> None:
    src = b"int (*cb)(int);\nint f() {\n  int g(int);\n  int *p = 0;\n  return 0;\n}\n"
    assert rows(extract_definitions(src, "cpp") or []) == [("f", "function", 2, 6)]


def test_cpp_header_labelled_c_is_parsed_as_cpp() -> None:
    source = (DATA / "sample.cpp").read_bytes()
    assert extract_definitions(source, "c") == extract("cpp")
    # plain C with a syntax error stays C (no "::" qualification, C grammar)
    c_src = b"struct s { int a; };\nint f(void) { return }\n"
    assert [d.name for d in extract_definitions(c_src, "c") or []][:1] == ["s"]


@pytest.mark.parametrize(
    ("source", "cpp"),
    [
        (b"class A {};", True),
        (b"int x;\n  \tnamespace n {", True),
        (b"int x;\ntemplate<class T> T f();", True),
        (b"using std = int;", True),
        (b"x = std::move(y);", True),
        (b"(std::string)", True),
        (b"mystd::x; /* a class of bugs */", False),
        (b"int classify(void);\n// class: not at the start\n", False),
        (b"usingx = 1;\nnamespaces;\n", False),
        (b"", False),
    ],
)
def test_cpp_only_lines_are_recognised(source: bytes, cpp: bool) -> None:
    from backstory.symbols.extract import _looks_like_cpp

    assert _looks_like_cpp(source) is cpp


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "source", "must_have"),
    [
        ("python", b"def ok():\n    pass\n\nx = = 1\n\nclass After:\n    def m(self):\n        pass\n", "After.m"),
        ("javascript", b"function a() {}\nfunction b( {\n}\nclass C {\n  m() {}\n}\n", "C.m"),
        ("rust", b"fn a() {}\nfn b( {\n}\nimpl S {\n    fn m(&self) {}\n}\n", "S::m"),
        ("go", b"package x\nfunc A() {}\nfunc B( {\n}\nfunc (s *S) M() {}\n", "S.M"),
        ("java", b"class A {\n  void ok() {}\n  void bad( {\n  }\n  void after() {}\n}\n", "A.after"),
        ("ruby", b"class A\n  def ok\n  end\n  def bad(\n  end\nend\ndef top\nend\n", "top"),
        ("c", b"int ok(void) { return 0; }\nint bad( { \n}\n", "ok"),
    ],
)
def test_syntax_errors_still_yield_definitions(language: str, source: bytes, must_have: str) -> None:
    defs = extract_definitions(source, language)
    assert defs is not None
    assert must_have in {d.name for d in defs}


def test_non_utf8_bytes() -> None:
    src = b"# caf\xe9 \xff\xfe\ndef f():\n    return '\xc3\x28'\n\nclass B:\n    pass\n"
    assert rows(extract_definitions(src, "python") or []) == [("f", "function", 2, 3), ("B", "class", 5, 6)]
    defs = extract_definitions(b"def caf\xe9():\n    pass\n", "python")
    assert defs is not None
    for d in defs:  # whatever is recovered must be valid text
        d.name.encode("utf-8")
        d.signature.encode("utf-8")


def test_minified_single_long_line_is_not_parsed() -> None:
    src = b"function a(){return 1}" * 400  # one 8,800-char line
    assert extract_definitions(src, "javascript") is None
    assert extract_definitions(src, "javascript", max_line_length=10_000) is not None
    long_tail = b"function ok() {}\n" + b"x" * 6000 + b"\n"
    assert extract_definitions(long_tail, "javascript") is None


def test_oversize_is_not_parsed() -> None:
    src = b"x = 1\n" * 100_000  # 600 KB
    assert extract_definitions(src, "python") is None
    assert extract_definitions(b"def f():\n    pass\n", "python", max_bytes=10) is None
    assert extract_definitions(b"def f():\n    pass\n", "python", max_bytes=18) is not None


def test_unsupported_language() -> None:
    assert extract_definitions(b"fun main() {}", "kotlin") is None
    assert extract_definitions(b"# title", "markdown") is None
    assert extract_definitions(b"", "no-such-language") is None


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_empty_and_blank(language: str) -> None:
    assert extract_definitions(b"", language) == []
    assert extract_definitions(b"\n\n   \n", language) == []


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_never_raises_on_garbage(language: str) -> None:
    rng = random.Random(f"garbage-{language}")
    sample = (DATA / EXPECTED[language][0]).read_bytes()
    for _ in range(40):
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        assert isinstance(extract_definitions(noise, language), list)
        # a real file with random bytes spliced in
        cut = rng.randrange(len(sample))
        assert isinstance(extract_definitions(sample[:cut] + noise + sample[cut:], language), list)


def test_concurrent_extraction_is_consistent() -> None:
    expected = {lang: extract(lang) for lang in ALL_LANGUAGES}
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda lang: (lang, extract(lang)), ALL_LANGUAGES * 8))
    for lang, defs in results:
        assert defs == expected[lang]


def test_speed_of_a_thousand_line_file() -> None:
    src = generate("javascript", 1000)
    extract_definitions(src, "javascript")  # warm-up: grammar load and query compile
    t0 = time.perf_counter()
    for _ in range(5):
        defs = extract_definitions(src, "javascript")
    per_file = (time.perf_counter() - t0) / 5
    assert defs and len(defs) > 200
    assert per_file < 0.25  # generous: CI machines vary; typical is well under 20 ms


# -- incremental parsing of older versions ------------------------------------------------------


def mutate(lines: list[bytes], rng: random.Random) -> list[bytes]:
    """An older version of a file: lines deleted, duplicated from elsewhere, edited, re-indented, and now and
    then the final newline dropped or restored (what history does to code, syntax errors included)."""
    out = list(lines)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(out) + 1)
        j = min(len(out), i + rng.randrange(1, 4))
        if op == 0 and out:
            del out[i:j]
        elif op == 1 and out:
            k = rng.randrange(len(out))
            out[i:i] = out[k : k + rng.randrange(1, 6)]
        elif op == 2 and i < len(out):
            line = out[i]
            cut = rng.randrange(len(line) + 1)
            out[i] = line[:cut] + rng.choice([b"x", b"_old", b"(", b"", b"\xff"]) + line[cut:]
        elif op == 3:
            out[i:j] = [b"    " + line if line.strip() else line for line in out[i:j]]
        elif op == 4:
            out[i:i] = [b"\n"]
        elif op == 5 and out:
            last = out[-1]
            out[-1] = last[:-1] if last.endswith(b"\n") else last + b"\n"
    return out or [b"\n"]


def tame(lines: list[bytes], rng: random.Random, language: str) -> list[bytes]:
    """An older version that usually still parses: blank and comment lines come and go, definitions get
    renamed (a name gains a letter wherever it occurs on one line)."""
    out = list(lines)
    comment = b"# note\n" if language in ("python", "ruby") else b"// note\n"
    names = sorted({d.short_name.encode() for d in extract(language) if d.short_name.isidentifier()})
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(out) + 1)
        op = rng.randrange(4)
        if op == 0:
            out[i:i] = [rng.choice([b"\n", comment])]
        elif op == 1 and i < len(out) and out[i] in (b"\n", comment):
            del out[i]
        elif i < len(out):
            found = [n for n in names if n in out[i]]
            if found:
                name = rng.choice(found)
                out[i] = out[i].replace(name, name + b"v")
    return out


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_older_versions_parsed_incrementally_match_fresh_parses(language: str, monkeypatch) -> None:
    monkeypatch.setattr(versions, "GAP", 0)  # many small re-matched spans: the most carried-over definitions
    rng = random.Random(f"versions-{language}")
    lines = (DATA / EXPECTED[language][0]).read_bytes().splitlines(keepends=True) * 3
    cache = VersionCache()
    newer = b"".join(lines)
    assert cache.definitions(0, newer, language) == extract_definitions(newer, language)
    for step in range(1, 41):
        # a side version with any damage, then the next version of the chain with tamer edits
        for key, older_lines in ((f"side {step}", mutate(lines, rng)), (step, tame(lines, rng, language))):
            older = b"".join(older_lines)
            blocks = [(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in diff_hunks(older, newer)]
            cache.derive(step - 1, key, older, blocks)
            assert cache.definitions(key, older, language) == extract_definitions(older, language), key
            tree, fresh = tree_of(cache, key), parse(older, language)
            assert fresh is not None and fresh.tree is not None
            if tree is not None:  # None: the blocks did not fit (a final newline came or went), parsed afresh
                assert str(tree.root_node) == str(fresh.tree.root_node)
                assert (tree.root_node.end_byte, tree.root_node.end_point) == (
                    len(older),
                    fresh.tree.root_node.end_point,
                )
        lines, newer = older_lines, older
    stats = cache.stats
    assert stats["incremental"] >= 60  # the incremental path ran, not only fallbacks to fresh parses
    assert stats["full"] == 1 + stats["fallback"]  # every fresh parse was the first or a fallback
    # definitions were carried over between versions, and not only re-matched (a damaged version is a base too,
    # and its error regions are re-matched in the next: tsx, whose damage spreads far, keeps about as many as it
    # re-matches)
    assert stats["carried"] >= 25 and stats["kept"] > 0.8 * stats["matched"] > 0, stats


def test_edits_must_describe_the_texts_exactly() -> None:
    new = b"def a():\n    return 1\n\ndef b():\n    return 2\n"
    old = b"def a():\n    return 1\n"
    blocks = [(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in diff_hunks(old, new)]
    plan = edits_to_older(new, old, blocks)
    assert plan is not None
    edits, moves = plan
    assert moves == [(0, len(new), 0, len(old), -3)]
    assert edits == [(0, len(new), len(old), Point(0, 0), Point(5, 0), Point(2, 0))]  # hunks carry context
    # hunks that leave a byte difference undescribed (here: the final line lost its newline, which git's diff
    # reports as its own hunk) are refused, so the caller parses the version from scratch
    body = b"".join(b"x%d = %d\n" % (i, i) for i in range(10))
    new, old = b"a = 1\n" + body + b"last = 0\n", b"a = 2\n" + body + b"last = 0"
    blocks = [(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in diff_hunks(old, new)]
    assert blocks == [(1, 4, 1, 4), (9, 4, 9, 4)]
    assert edits_to_older(new, old, blocks[:1]) is None
    assert edits_to_older(new, old, []) is None
    assert edits_to_older(new, new, []) == ([], [])


def test_version_cache_keeps_not_parsed_and_bad_versions() -> None:
    cache = VersionCache()
    good = b"def f():\n    pass\n"
    minified = b"function a(){return 1}" * 400
    assert cache.definitions("min", minified, "javascript") is None
    cache.derive("min", "older", good, [(1, 2, 1, 1)])  # no tree for a version that was not parsed
    assert tree_of(cache, "older") is None
    assert cache.definitions("good", good, "python") == extract_definitions(good, "python")
    broken = b"def f(:\n    pass\n\xff\xfe\n"
    cache.derive("good", "broken", broken, [(1, 3, 1, 2)])
    full = cache.stats["full"]
    assert cache.definitions("broken", broken, "python") == extract_definitions(broken, "python")
    assert cache.stats["full"] == full  # what the derive found is not parsed again
    broken_tree, fresh = tree_of(cache, "broken"), parse(broken, "python")
    assert broken_tree is not None and fresh is not None and fresh.tree is not None
    # a tree with errors is a base for older versions too (see `symbols.reparse`): it is the fresh parse's
    assert broken_tree.root_node.has_error and str(broken_tree.root_node) == str(fresh.tree.root_node)
    huge = b"x = 1\n" * 100_000
    cache.derive("broken", "huge", huge, [(1, 100_000, 1, 3)])
    assert cache.definitions("huge", huge, "python") is None
    hits = cache.stats["hit"]
    assert cache.definitions("good", good, "python") is not None
    assert cache.stats["hit"] == hits + 1


# -- range helpers -------------------------------------------------------------------------------


def _d(name: str, start: int, end: int, kind: str = "function") -> Definition:
    return Definition(name, name.rsplit(".", 1)[-1], kind, start, end, name)


NESTED = [
    _d("A", 1, 20, "class"),
    _d("A.m", 3, 10, "method"),
    _d("A.m.inner", 5, 6),
    _d("A.n", 12, 18, "method"),
    _d("f", 25, 30),
]


def test_enclosing_and_innermost() -> None:
    assert [d.name for d in enclosing_definitions(NESTED, 5)] == ["A", "A.m", "A.m.inner"]
    assert [d.name for d in enclosing_definitions(list(reversed(NESTED)), 5)] == ["A", "A.m", "A.m.inner"]
    assert [d.name for d in enclosing_definitions(NESTED, 11)] == ["A"]
    assert enclosing_definitions(NESTED, 22) == []
    assert (innermost_definition(NESTED, 6) or _d("?", 0, 0)).name == "A.m.inner"
    assert (innermost_definition(NESTED, 12) or _d("?", 0, 0)).name == "A.n"
    assert (innermost_definition(list(reversed(NESTED)), 4) or _d("?", 0, 0)).name == "A.m"
    assert innermost_definition(NESTED, 21) is None
    assert innermost_definition([], 1) is None


def test_definitions_touching() -> None:
    names = lambda lines: [d.name for d in definitions_touching(NESTED, lines)]  # noqa: E731
    assert names([5]) == ["A", "A.m", "A.m.inner"]  # ancestors included
    assert names([11]) == ["A"]
    assert names([22, 23, 40, 0, -1]) == []  # outside every definition
    assert names([]) == []
    assert names([30, 1]) == ["A", "f"]  # boundaries are inclusive
    assert names(iter([13, 13, 14])) == ["A", "A.n"]  # any iterable, duplicates fine
    assert names(range(1, 100)) == [d.name for d in NESTED]
    assert names([7, 26]) == ["A", "A.m", "f"]
    assert definitions_touching(list(reversed(NESTED)), [5]) == definitions_touching(NESTED, [5])


def test_definitions_touching_real_file() -> None:
    defs = extract("python")
    assert [d.name for d in definitions_touching(defs, [15, 23])] == [
        "Client",
        "Client.send",
        "Client.send.encode",
    ]


def test_definitions_touching_scales() -> None:
    defs = [_d(f"f{i}", i * 10 + 1, i * 10 + 8) for i in range(20_000)]
    lines = list(range(1, 200_001, 3))
    t0 = time.perf_counter()
    hit = definitions_touching(defs, lines)
    assert time.perf_counter() - t0 < 2.0  # O(n*m) would be ~1.3e9 comparisons
    assert len(hit) == 20_000


# -- languages -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("a.py", "python"),
        ("pkg/stubs/a.pyi", "python"),
        ("a.js", "javascript"),
        ("a.mjs", "javascript"),
        ("a.cjs", "javascript"),
        ("src/App.jsx", "javascript"),
        ("a.ts", "typescript"),
        ("types/index.d.ts", "typescript"),
        ("a.mts", "typescript"),
        ("src/App.tsx", "tsx"),
        ("src/lib.rs", "rust"),
        ("main.go", "go"),
        ("src/main/java/Foo.java", "java"),
        ("a.c", "c"),
        ("include/a.h", "c"),
        ("a.cc", "cpp"),
        ("a.cpp", "cpp"),
        ("a.cxx", "cpp"),
        ("a.hpp", "cpp"),
        ("a.hh", "cpp"),
        ("lib/a.rb", "ruby"),
        ("Gemfile", "ruby"),
        ("Rakefile", "ruby"),
        ("foo.gemspec", "ruby"),
        ("Makefile", "makefile"),
        ("GNUmakefile", "makefile"),
        ("rules.mk", "makefile"),
        ("Dockerfile", "dockerfile"),
        ("docker/Dockerfile.dev", "dockerfile"),
        ("README.md", "markdown"),
        ("package.json", "json"),
        ("ci.yml", "yaml"),
        ("config.yaml", "yaml"),
        ("pyproject.toml", "toml"),
        ("run.sh", "shell"),
        ("index.html", "html"),
        ("style.css", "css"),
        ("Program.cs", "csharp"),
        ("Main.kt", "kotlin"),
        ("App.swift", "swift"),
        ("index.php", "php"),
        ("Main.scala", "scala"),
        ("schema.sql", "sql"),
        ("CMakeLists.txt", "cmake"),
        ("C:\\src\\Win.CPP", "cpp"),
        ("UPPER.PY", "python"),
        ("noext", None),
        ("weird.xyz123", None),
        ("dir/", None),
        (".gitignore", None),
        ("", None),
    ],
)
def test_language_for_path(path: str, language: str | None) -> None:
    assert language_for_path(path) == language


def test_supported_languages() -> None:
    assert supported_languages() == frozenset(ALL_LANGUAGES)
    for path in ("a.py", "a.js", "a.ts", "a.tsx", "a.rs", "a.go", "A.java", "a.c", "a.cpp", "a.rb"):
        assert language_for_path(path) in supported_languages()
    assert "markdown" not in supported_languages()


def test_own_queries_are_package_resources() -> None:
    queries = files("backstory.symbols.queries")
    for name in ("c.scm", "cpp.scm", "go.scm", "java.scm", "javascript.scm", "ruby.scm", "rust.scm"):
        assert "@definition." in (queries / name).read_text(encoding="utf-8")
    assert (queries / "typescript.scm").is_file()


def test_bench_runs() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        bench_main(["--lines", "40", "--seconds", "0"])
    text = out.getvalue()
    for language in ALL_LANGUAGES:
        assert f"\n{language} " in text
    assert " -1\n" not in text  # every generated source was parsed


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_named_function_values_are_their_bindings_definition(language: str) -> None:
    # tags.scm reports both the binding and the named function expression; one definition, not `init.init`
    src = (
        b"app.init = function init() {\n  this.on('mount', function onmount(parent) {});\n};\n"
        b"const table = {\n  load: function readAll() {},\n};\n"
        b"exports.gen = function* gen() {};\n"
        b"function outer() {\n  return function inner() {};\n}\n"
    )
    defs = extract_definitions(src, language) or []
    names = [(d.name, d.kind, d.start_line, d.end_line) for d in defs]
    assert ("init", "function", 1, 3) in names
    assert ("init.onmount", "function", 2, 2) in names
    assert ("outer.inner", "function", 9, 9) in names  # a returned function is nested, not a binding
    assert not any(n.split(".")[-1] == n.split(".")[-2] for n, *_ in names if "." in n)
    assert all(n != "load.readAll" for n, *_ in names)
