"""Micro-benchmark: ``python -m backstory.evaluation.symbols_bench [--lines N] [--seconds S]``.

Generates a synthetic ~N-line source per language (classes with methods, free functions) and
reports extraction throughput, so a regression in query cost (e.g. a reference pattern that
was not disabled) is easy to spot. The first call per language (grammar load + query compile)
is timed separately because an indexer pays it once per process.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ..symbols.extract import extract_definitions

_Gen = Callable[[int], str]

_TEMPLATES: dict[str, tuple[str, str, str, str]] = {
    # language: (class header, method, class footer, free function)
    "python": (
        "class C{i}:\n",
        "    def m{j}(self, x):\n        y = x + {j}\n        return y\n",
        "",
        "def f{i}(a, b):\n    if a:\n        return b\n    return a\n",
    ),
    "javascript": (
        "class C{i} {{\n",
        "  m{j}(x) {{\n    const y = x + {j};\n    return y;\n  }}\n",
        "}}\n",
        "function f{i}(a, b) {{\n  if (a) {{\n    return b;\n  }}\n  return a;\n}}\n",
    ),
    "typescript": (
        "class C{i} {{\n",
        "  m{j}(x: number): number {{\n    return x + {j};\n  }}\n",
        "}}\n",
        "export function f{i}(a: number, b: number): number {{\n  return a + b;\n}}\n",
    ),
    "rust": (
        "struct S{i};\nimpl S{i} {{\n",
        "    fn m{j}(&self, x: u32) -> u32 {{\n        x + {j}\n    }}\n",
        "}}\n",
        "fn f{i}(a: u32, b: u32) -> u32 {{\n    a + b\n}}\n",
    ),
    "go": (
        "type S{i} struct{{ n int }}\n",
        "func (s *S{i}) M{j}(x int) int {{\n\treturn x + {j}\n}}\n",
        "",
        "func F{i}(a, b int) int {{\n\treturn a + b\n}}\n",
    ),
    "java": (
        "class C{i} {{\n",
        "    int m{j}(int x) {{\n        return x + {j};\n    }}\n",
        "}}\n",
        "interface I{i} {{\n    void f(int a);\n}}\n",
    ),
    "c": (
        "struct s{i} {{\n    int a;\n}};\n",
        "int m{i}_{j}(int x)\n{{\n    return x + {j};\n}}\n",
        "",
        "static int f{i}(int a, int b)\n{{\n    return a + b;\n}}\n",
    ),
    "cpp": (
        "class C{i} {{\n public:\n",
        "  int m{j}(int x) {{\n    return x + {j};\n  }}\n",
        "}};\n",
        "int f{i}(int a, int b) {{\n  return a + b;\n}}\n",
    ),
    "ruby": (
        "class C{i}\n",
        "  def m{j}(x)\n    x + {j}\n  end\n",
        "end\n",
        "def f{i}(a, b)\n  a + b\nend\n",
    ),
}


def generate(language: str, lines: int) -> bytes:
    """A plausible source of about ``lines`` lines for ``language`` (TSX reuses TypeScript)."""
    head, method, foot, func = _TEMPLATES["typescript" if language == "tsx" else language]
    out: list[str] = []
    count = 0
    i = 0
    while count < lines:
        chunk = head.format(i=i) + "".join(method.format(i=i, j=j) for j in range(5)) + foot.format(i=i)
        chunk += func.format(i=i)
        out.append(chunk)
        count += chunk.count("\n")
        i += 1
    return "".join(out).encode()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1000, help="lines per generated file")
    ap.add_argument("--seconds", type=float, default=0.5, help="time budget per language")
    args = ap.parse_args(argv)
    print(f"{'language':<12}{'first call':>12}{'per file':>12}{'files/s':>10}{'defs':>7}")
    for language in [*_TEMPLATES, "tsx"]:
        source = generate(language, args.lines)
        t0 = time.perf_counter()
        defs = extract_definitions(source, language)
        first = time.perf_counter() - t0
        runs = 0
        t0 = time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < args.seconds:
            extract_definitions(source, language)
            runs += 1
        per = elapsed / max(runs, 1)
        n = len(defs) if defs is not None else -1
        print(f"{language:<12}{first * 1e3:>10.1f}ms{per * 1e3:>10.2f}ms{1 / per:>10.0f}{n:>7}")


if __name__ == "__main__":
    main()
