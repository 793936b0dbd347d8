"""The documentation site: it builds offline in strict mode (a warning or a broken internal link fails), and its
generated reference covers every command, flag and setting the code has."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("backstory_docs_hooks", ROOT / "tools/docs/hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([*MKDOCS, "-d", str(site)], cwd=root, capture_output=True, text=True, env=env, timeout=600)


def test_site_builds_strictly_without_warnings(tmp_path) -> None:
    proc = _build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    for page in ("index", "getting-started", "how-it-works", "troubleshooting", "benchmarks", "protocol",
                 "architecture", "reference/cli", "reference/settings", "history/benchmarks-log"):  # fmt: skip
        assert (tmp_path / "site" / f"{page}.html").is_file(), page
    cli = (tmp_path / "site" / "reference/cli.html").read_text("utf-8")
    assert "--second-stage" in cli and "Exit codes" in cli


def test_a_broken_internal_link_fails_the_build(tmp_path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copytree(ROOT / "tools/docs", copy / "tools/docs")
    shutil.copytree(ROOT / "clients", copy / "clients", ignore=shutil.ignore_patterns("node_modules", "dist", "out"))
    page = copy / "docs/troubleshooting.md"
    page.write_text(page.read_text("utf-8") + "\nSee [the missing page](no-such-page.md#nowhere).\n", "utf-8")
    proc = _build(copy, tmp_path / "site")
    assert proc.returncode != 0
    assert "no-such-page.md" in proc.stderr


def test_cli_reference_lists_every_command_and_flag() -> None:
    from backstory import cli_parser

    text = _hooks().cli_reference()
    parser = cli_parser.build_parser(tuning_help=True)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in sub.choices.items():
        assert f"## `{name}`" in text
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}" in text, f"{name} {option}"
    exits = ("EXIT_OK", "EXIT_NO_RESULTS", "EXIT_USAGE", "EXIT_NO_INDEX", "EXIT_ERROR", "EXIT_INTERRUPTED")
    for code in (getattr(cli_parser, name) for name in exits):
        assert f"| `{code}` |" in text
    assert "**Tuning switches**" in text


def test_settings_reference_lists_every_setting() -> None:
    import attrs

    from backstory.lsp.options import Options

    hooks = _hooks()
    text = hooks.settings_reference()
    for field in attrs.fields(Options):
        assert f"| `{field.name}` |" in text, field.name
    package = json.loads((ROOT / "clients/vscode/package.json").read_text("utf-8"))
    for key in package["contributes"]["configuration"]["properties"]:
        assert f"| `{key}` |" in text, key
    neovim = hooks._neovim_defaults()
    assert {"cmd", "k", "rerank", "hover", "exclude"} <= {k for k, _d, _c in neovim}
    for key, _default, _comment in neovim:
        assert f"| `{key}` |" in text, key


def test_every_environment_variable_is_documented() -> None:
    names: set[str] = set()
    for path in (ROOT / "server/backstory").rglob("*.py"):
        if "evaluation" in path.parts:
            continue
        names.update(re.findall(r"\bBACKSTORY_[A-Z0-9_]+\b", path.read_text("utf-8")))
    documented = set(_hooks().ENVIRONMENT)
    assert names, "no environment variables found: the scan is broken"
    assert names <= documented, sorted(names - documented)


def test_readme_quick_start_and_docs_command_exist() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for script in ("quickstart", "test", "docs"):
        assert f"./scripts/{script}" in readme
        assert os.access(ROOT / "scripts" / script, os.X_OK), script


@pytest.mark.parametrize("png", ["indexing.png", "latency.png", "quality.png", "quality-messages.png"])
def test_benchmark_plots_are_there(png: str) -> None:
    assert (ROOT / "docs/images/bench" / png).stat().st_size > 10_000


def test_plots_from_bench_json(tmp_path) -> None:
    """The plot command reads what the bench command writes (a small real-shaped report)."""
    from backstory.evaluation import plots

    samples = [float(x) for x in range(1, 40)]
    bench = {
        "repo": "/x/demo", "commits": 120, "git_log_p_s": 0.2, "reader_s": 0.9, "index_bm25_s": 1.5,
        "index_bm25_symbols_s": 2.0, "dense_units": 300, "dense_units_per_s": 150.0,
        "query_bm25": {"p50_ms": 20.0, "p95_ms": 37.0, "n": 39, "samples_ms": samples},
        "history": {"p50_ms": 20.0, "p95_ms": 37.0, "n": 39, "samples_ms": samples},
    }  # fmt: skip
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    assert plots.main(["--bench", str(tmp_path / "bench.json"), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out/indexing.png").stat().st_size > 5000
    assert (tmp_path / "out/latency.png").stat().st_size > 5000


def test_protocol_page_covers_every_lsp_command_and_notification() -> None:
    from backstory.lsp import constants

    text = (ROOT / "docs/protocol.md").read_text("utf-8")
    names = [*constants.SERVER_COMMANDS, constants.UI_FIND_PRIOR_ART, constants.UI_SYMBOL_HISTORY]
    names += [constants.STATUS_NOTIFICATION, constants.PROGRESS_TITLE]
    for name in names:
        assert f"`{name}`" in text or f'"{name}"' in text, name
