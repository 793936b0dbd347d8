"""The command line, run as a real subprocess against real repositories: output shapes, filters, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitrepo import GitRepo


def run(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backstory", *args], capture_output=True, text=True, cwd=cwd, input=input, timeout=240
    )


def ok(*args: str, code: int | tuple[int, ...] = 0, **kw: Any) -> str:
    proc = run(*args, **kw)
    assert proc.returncode in ((code,) if isinstance(code, int) else code), proc.stderr
    return proc.stdout


def query(path: Path, text: str, *extra: str) -> dict[str, Any]:
    """A query's JSON; exit 0 with results, 1 without (cli.EXIT_NO_RESULTS)."""
    proc = run("query", "-C", str(path), text, "--json", "--no-dense", "--no-rerank", *extra)
    result = json.loads(proc.stdout)
    assert proc.returncode == (0 if result["results"] else 1), proc.stderr
    return result


@pytest.fixture
def indexed(sample):
    path, shas = sample
    ok("index", str(path), "--no-dense")
    return path, shas


def test_query_json_shape_and_top_hit(indexed) -> None:
    path, shas = indexed
    result = query(path, "retry an HTTP request with exponential backoff")
    top = result["results"][0]
    assert top["commit"]["sha"] in (shas["Add retry with exponential backoff"], shas["Log the retry attempts"])
    assert set(top["commit"]) >= {"sha", "short_sha", "subject", "body", "author", "date"}
    hunk = top["hunks"][0]
    assert set(hunk) >= {"path", "change", "old_start", "new_start", "excerpt", "truncated", "lanes", "symbols"}
    assert hunk["path"] == "src/app/net.py"
    assert set(top["why"]) == {"lanes", "fused", "rerank", "learned", "recency", "decided_by"}
    meta = result["_meta"]
    assert meta["index"]["commits_behind_head"] == 0
    assert meta["index"]["last_indexed_commit"] == shas["Log the retry attempts"]
    assert meta["hint"] is None


def test_filters(indexed) -> None:
    path, shas = indexed
    by_author = query(path, "add", "--author", "BOB@example")
    assert {r["commit"]["author"]["name"] for r in by_author["results"]} == {"Bob Builder"}
    by_path = query(path, "def", "--path", "src/app/dates.py")
    assert [r["commit"]["sha"] for r in by_path["results"]] == [shas["Add date formatting helpers"]]
    assert query(path, "def", "--path", "./src/app/dates.py")["results"] == by_path["results"]
    directory = query(path, "def", "--path", "src/app")  # a directory, as in a git pathspec
    assert shas["Add date formatting helpers"] in [r["commit"]["sha"] for r in directory["results"]]
    by_glob = query(path, "import", "--path", "*.py", "--until", "2023-11-16")
    assert [r["commit"]["sha"] for r in by_glob["results"]] == [shas["Add date formatting helpers"]]
    since = query(path, "retry", "--since", "2023-11-19T00:00:00Z")
    assert [r["commit"]["sha"] for r in since["results"]] == [shas["Log the retry attempts"]]
    lang = query(path, "demo", "--language", "markdown")
    assert [r["commit"]["sha"] for r in lang["results"]] == [shas["Initial project layout"]]
    assert query(path, "retry", "--language", "rust")["results"] == []


def test_batch_queries_in_order(indexed) -> None:
    path, _ = indexed
    out = ok("query", "-C", str(path), "--batch", "-", "--json", "--no-dense", "--no-rerank",
             input="lru cache\n\nformat timestamp\n")  # fmt: skip
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["query"] for x in lines] == ["lru cache", "", "format timestamp"]
    assert lines[0]["results"][0]["commit"]["subject"] == "Add an LRU cache"
    assert lines[2]["results"][0]["commit"]["subject"] == "Add date formatting helpers"


def test_no_results_has_hint(indexed) -> None:
    path, _ = indexed
    result = query(path, "kubernetes helm chart")
    assert result["results"] == []
    assert "no matching commits" in result["_meta"]["hint"]
    proc = run("query", "-C", str(path), "zzzzqqq", "--no-dense", "--no-rerank")
    assert proc.returncode == 1 and proc.stdout == ""  # like grep: nothing found is exit 1
    assert "no matching commits" in proc.stderr


def test_status_and_show(indexed) -> None:
    path, shas = indexed
    status = json.loads(ok("status", "-C", str(path), "--json"))
    assert status["index"]["indexed_commits"] == len(shas)
    assert status["index"]["commits_behind_head"] == 0
    assert status["options"]["no_messages"] is False
    assert status["size_bytes"] > 0
    assert "6 commits indexed, up to date with HEAD" in ok("status", "-C", str(path))
    text = ok("show", shas["Add retry with exponential backoff"][:10], "-C", str(path))
    assert "Add retry with exponential backoff" in text
    assert "+            delay *= 2" in text
    only = ok("show", shas["Add retry with exponential backoff"], "-C", str(path), "--path", "src/app/net.py")
    assert "diff --git a/src/app/net.py b/src/app/net.py" in only


def test_status_names_the_cached_models_this_version_no_longer_reads(indexed, tmp_path, monkeypatch) -> None:
    from backstory.models.files import default_model

    path, _ = indexed
    models = tmp_path / "cache" / "models"
    current = default_model().model_id
    folders = {
        f"finetuned/{current}": 300,  # in use
        f"optimized/{current}-pc3": 200,
        "finetuned/all-MiniLM-L6-v2-int8-bs3-00e6f351": 1000,  # an earlier patch and its optimized graph
        "optimized/all-MiniLM-L6-v2-int8-bs3-00e6f351-pc3": 500,
        "optimized/my-model-23ff7399-pc3": 70,  # a user's own model: never judged
    }
    for rel, size in folders.items():
        (models / rel).mkdir(parents=True)
        (models / rel / "model.onnx").write_bytes(b"x" * size)
    monkeypatch.setenv("BACKSTORY_CACHE_DIR", str(tmp_path / "cache"))
    cache = json.loads(ok("status", "-C", str(path), "--json"))["model_cache"]
    assert cache["bytes"] == 2070 and cache["superseded_bytes"] == 1500
    assert [Path(s["path"]).name for s in cache["superseded"]] == [
        "all-MiniLM-L6-v2-int8-bs3-00e6f351",
        "all-MiniLM-L6-v2-int8-bs3-00e6f351-pc3",
    ]
    text = ok("status", "-C", str(path))
    assert "earlier versions of backstory's model" in text and "bs3-00e6f351-pc3" in text and "my-model" not in text
    monkeypatch.setenv("BACKSTORY_CACHE_DIR", str(tmp_path / "empty"))
    assert json.loads(ok("status", "-C", str(path), "--json"))["model_cache"]["superseded"] == []
    assert "earlier versions" not in ok("status", "-C", str(path))


def test_show_takes_revisions_like_git(indexed) -> None:
    path, _ = indexed
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 30
    repo.git("tag", "-a", "v1.0", "-m", "release", "HEAD~2")  # annotated: peeled to its commit
    tag_object = repo.git("rev-parse", "v1.0").strip()  # the tag object itself, as `git show <sha>` takes it
    repo.git("branch", "cafe", "HEAD~1")  # a hex-looking branch name: the ref wins, as in git
    revs = ("HEAD", "main", "HEAD~1", "HEAD^", "HEAD~2", "v1.0", "v1.0^0", "main~1^1", tag_object, tag_object[:8])
    revs += ("cafe",)
    for rev in revs:
        expected = repo.git("rev-parse", f"{rev}^{{commit}}").strip()
        assert ok("show", rev, "-C", str(path)).startswith(f"commit {expected}\n"), rev
    proc = run("show", "HEAD~999", "-C", str(path))
    assert proc.returncode == 4
    assert "has no parent number 1" in proc.stderr


def test_stale_index_reports_behind(indexed) -> None:
    path, _ = indexed
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 30
    repo.commit("Newer work", {"x.py": "x = 1\n"})
    result = query(path, "retry")
    assert result["_meta"]["index"]["commits_behind_head"] == 1
    assert "behind HEAD" in result["_meta"]["hint"]


def test_deterministic_results(indexed) -> None:
    path, _ = indexed
    a = query(path, "add helper function")
    b = query(path, "add helper function")
    strip = lambda r: [(x["commit"]["sha"], x["score"]) for x in r["results"]]  # noqa: E731
    assert strip(a) == strip(b)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("query", "x", "--since", "yesterday-ish"), 2, "cannot understand the date"),
        (("query", "x", "-k", "0"), 2, "-k must be at least 1"),
        (("query", "x", "-k", "ten"), 2, "expected a whole number, got 'ten'"),
        (("query", "   "), 2, "give a query TEXT, --at PATH:LINE, --changes [REV] or --batch FILE"),
        (("show", "zzzz"), 4, "not a commit id, branch or tag"),
        (("show", "abcdef12"), 4, "no commit starting with"),
        (("history", "nope.py:1"), 4, "not in HEAD"),
        (("history", "src/app/net.py:999"), 4, "past the end"),
        (("history", "src/app/net.py"), 2, "expected PATH:LINE"),
        (("history", "src/app/net.py:0"), 2, "expected PATH:LINE with a 1-based line"),
        (("query", "--at", "src/app/net.py"), 2, "expected PATH:LINE"),
        (("query", "x", "--lanes", "diff,messages"), 2, "unknown lane(s) messages; lanes are diff, message"),
        (("query", "x", "--batch", "/nonexistent/queries.txt"), 2, "cannot read the query file"),
        (("query", "x", "--language", "klingon"), 2, "unknown language 'klingon'; known: batch, c, "),
        (("query", "x", "--since", "2024-02-01", "--until", "2024-01-01"), 2, "is after --until"),
        (("query", "x", "--dense-pool", "-1"), 2, "--dense-pool must be 0 or more, not -1"),
        (("query", "x", "--frobnicate"), 2, "unrecognized arguments: --frobnicate"),
    ],
)
def test_bad_input_is_a_clear_error(indexed, args, code, message) -> None:
    """Exit 2 for a command line that cannot be used as written, 4 for what the repository says no to."""
    path, _ = indexed
    proc = run(*args, "-C", str(path))
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_not_a_repository_and_missing_path(tmp_path) -> None:
    proc = run("index", str(tmp_path))
    assert proc.returncode == 4 and "not a git repository" in proc.stderr
    proc = run("index", str(tmp_path / "missing"))
    assert proc.returncode == 4 and "does not exist" in proc.stderr
    proc = run("query", "x", "-C", str(tmp_path))
    assert proc.returncode == 4 and "not a git repository" in proc.stderr


def test_index_dir_that_is_a_file_is_a_clear_error(sample, tmp_path) -> None:
    path, _ = sample
    (tmp_path / "a-file").write_text("not a directory\n")
    proc = run("index", str(path), "--no-dense", "--index-dir", str(tmp_path / "a-file"))
    assert proc.returncode == 4 and f"cannot use {tmp_path / 'a-file'}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_repository(tmp_path) -> None:
    GitRepo(tmp_path / "empty")
    proc = run("index", str(tmp_path / "empty"), "--no-dense")
    assert proc.returncode == 4 and "no commits yet" in proc.stderr
    result = json.loads(ok("query", "x", "-C", str(tmp_path / "empty"), "--json", code=3))
    assert result["results"] == [] and "empty" in result["_meta"]["hint"]
    proc = run("query", "x", "-C", str(tmp_path / "empty"))
    assert proc.returncode == 3 and proc.stdout == "" and "empty" in proc.stderr
    for rev in ("HEAD", "main~1"):
        proc = run("show", rev, "-C", str(tmp_path / "empty"))
        assert proc.returncode == 4 and "has no commits yet" in proc.stderr
    assert "none (no commits yet)" in ok("status", "-C", str(tmp_path / "empty"))


def test_query_before_index_hints(sample) -> None:
    """Exit 3 with the hint, never "no matching commits" and exit 0."""
    path, _ = sample
    proc = run("query", "-C", str(path), "retry", "--json", "--no-dense")
    assert proc.returncode == 3
    result = json.loads(proc.stdout)
    assert result["results"] == []
    assert "run `backstory index`" in result["_meta"]["hint"]
    proc = run("query", "-C", str(path), "retry", "--no-dense")
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr == "backstory: no index yet: run `backstory index`\n"
    proc = run("history", "src/app/net.py:5", "-C", str(path))
    assert proc.returncode == 3 and "run `backstory index`" in proc.stderr
    status = json.loads(ok("status", "-C", str(path), "--json"))
    assert status["next"] == "run `backstory index` to build the index"


def test_binary_only_commit_and_non_utf8(repo: GitRepo) -> None:
    repo.commit("Add logo", {"logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00data"})
    (repo.path / "legacy.txt").write_bytes(b"Gr\xfc\xdfe aus K\xf6ln: caf\xe9 retry\n")
    repo.commit("Add legacy latin-1 notes")
    out = ok("index", str(repo.path), "--no-dense")
    assert "1 binary" in out
    result = query(repo.path, "legacy notes cafe retry")
    assert result["results"][0]["commit"]["subject"] == "Add legacy latin-1 notes"
    assert "\ufffd" in result["results"][0]["hunks"][0]["excerpt"]
    # a message written in a legacy encoding (git records it in the commit's `encoding` header)
    (repo.path / "legacy.txt").write_bytes(b"more notes\n")
    (repo.path.parent / "msg.txt").write_bytes(b"Note the caf\xe9 in K\xf6ln\n")
    repo.git("add", "legacy.txt")
    repo.git("-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "-F", str(repo.path.parent / "msg.txt"))
    assert "Note the café in Köln" in ok("show", "HEAD", "-C", str(repo.path))
    repo.git("reset", "-q", "--hard", "HEAD~1")
    shown = ok("show", "HEAD~1", "--path", "logo.png", "-C", str(repo.path))  # binary: changed, not shown
    assert "logo.png: changed, not shown" in shown and "1 binary" in shown
    proc = run("show", "HEAD", "--path", "logo.png", "-C", str(repo.path))
    assert proc.returncode == 4 and "does not change logo.png" in proc.stderr


def test_detached_head_and_shallow_clone(sample, tmp_path) -> None:
    path, shas = sample
    repo = GitRepo.__new__(GitRepo)
    repo.path = path
    repo.git("checkout", "-q", "--detach", shas["Add an LRU cache"])
    ok("index", str(path), "--no-dense")
    assert query(path, "retry attempts log warning")["_meta"]["index"]["indexed_commits"] == 5
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", path.as_uri(), str(clone)], check=True)
    ok("index", str(clone), "--no-dense")
    status = json.loads(ok("status", "-C", str(clone), "--json"))
    assert status["index"]["indexed_commits"] == 2


def test_non_utf8_file_names_filter_and_show(repo: GitRepo) -> None:
    """A file name that is not UTF-8 reaches the command line surrogate-escaped: `--path` filters and shows it
    (it was a UnicodeEncodeError)."""
    cafe, koeln = b"caf\xe9.py", b"k\xf6ln.py"
    (repo.path / os.fsdecode(cafe)).write_text('def brew(beans):\n    """Brew coffee."""\n    return 2\n')
    repo.commit("Coffee")
    (repo.path / os.fsdecode(cafe)).write_text('def brew(beans):\n    """Brew coffee strongly."""\n    return 3\n')
    repo.commit("Stronger coffee")
    repo.git("mv", os.fsdecode(cafe), os.fsdecode(koeln))
    repo.commit("Rename")
    ok("index", str(repo.path), "--no-dense")
    for arg in (os.fsdecode(cafe), "caf?.py"):
        hits = query(repo.path, "brew coffee", "--path", arg)["results"]
        assert {r["commit"]["subject"] for r in hits} == {"Coffee", "Stronger coffee"}
        assert {h["path"] for r in hits for h in r["hunks"]} == {"caf\ufffd.py"}
    shown = ok("show", "HEAD~1", "--path", os.fsdecode(cafe), "-C", str(repo.path))
    assert "+++ b/caf\ufffd.py" in shown and '+    """Brew coffee strongly."""' in shown
    renamed = ok("show", "HEAD", "--path", os.fsdecode(koeln), "-C", str(repo.path))
    assert "rename from caf\ufffd.py\nrename to k\ufffdln.py" in renamed
    proc = run("show", "HEAD", "--path", os.fsdecode(b"k\xf6lnx.py"), "-C", str(repo.path))
    assert proc.returncode == 4 and "does not change k\ufffdlnx.py" in proc.stderr


def test_second_stage_choice(indexed) -> None:
    from backstory import cli, cli_parser
    from backstory.search import engine

    assert cli_parser.SECOND_STAGES == engine.SECOND_STAGES  # the CLI keeps its own copy so that it starts fast
    assert engine.SearchOptions().dense_pool == cli_parser.DENSE_POOL
    args = cli_parser.build_parser().parse_args(["query", "x", "--dense-pool", "3"])
    assert cli._search_options(args).dense_pool == 3
    path, _ = indexed
    assert query(path, "retry backoff", "--second-stage", "blend")["results"]
    bad = run("query", "-C", str(path), "retry", "--second-stage", "cross")
    assert bad.returncode == 2 and "--second-stage" in bad.stderr


# -- text output, help, exit codes, progress (issue #26) ---------------------------------------------------------


def _tty_run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the CLI with stdout on a pseudo-terminal (what a person sees); returns (exit code, stdout)."""
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "backstory", *args], stdout=follower, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})}, timeout=240,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_text_output_is_two_lines_per_commit_with_why_in_words(indexed) -> None:
    path, _ = indexed
    out = ok("query", "-C", str(path), "retry with exponential backoff", "--no-dense", "--no-rerank", "-k", "3")
    lines = out.splitlines()
    assert len(lines) == 4, out  # two commits: sha + subject, then author · age · where · why
    assert lines[0].split("  ", 1)[1] in ("Add retry with exponential backoff", "Log the retry attempts")
    assert lines[1].startswith("         ") and "src/app/net.py:" in lines[1] and "(fetch_with_retry)" in lines[1]
    assert "your words in" in lines[1] and " ago" in lines[1]
    assert "#" not in out and "rerank" not in out and "learned" not in out  # no "diff#19; rerank 0.553"
    assert "\x1b[" not in out  # no colours into a pipe
    verbose = ok("query", "-C", str(path), "retry with exponential backoff", "--no-dense", "--hunks", "-k", "1")
    assert "+            delay *= 2" in verbose or "+def fetch_with_retry" in verbose
    assert ok("query", "-C", str(path), "retry", "--no-dense", "-v", "-k", "1") != ""


def test_why_words() -> None:
    from backstory.views.text import why_words

    hunks = [{"path": "src/a.py", "lanes": {"diff": 2}}, {"path": "src/x.py", "lanes": {"dense": 1}}]
    r = {"why": {"lanes": {"diff": 3, "message": 1, "dense": 2, "symbol": 9}}, "hunks": hunks}
    assert why_words(r) == "your words in the message and the change; a similar change in src/x.py; a name it changed"
    assert why_words({"why": {"lanes": {"path": 1}}, "hunks": []}) == "your words in a file path"
    assert why_words({"provenance": "EXACT", "why": {}, "hunks": []}) == "changed this definition"
    assert why_words({"why": {"lanes": {"diff": 1}}, "hunks": []}, "shared words") == "shared words in the change"


def test_colours_on_a_terminal_and_no_color(indexed) -> None:
    path, _ = indexed
    args = ("query", "-C", str(path), "retry", "--no-dense", "-k", "2")
    code, out = _tty_run(*args)
    assert code == 0 and "\x1b[33m" in out  # the sha in yellow, as git shows it
    code, out = _tty_run(*args, env={"NO_COLOR": "1"})
    assert code == 0 and "\x1b[" not in out and "Log the retry attempts" in out
    assert "\x1b[" in ok(*args, "--color", "always")
    code, out = _tty_run(*args, "--color", "never")
    assert "\x1b[" not in out


def test_partly_embedded_index_says_so() -> None:
    from backstory.views.text import notes

    meta = {"lanes": ["diff", "message", "dense"], "index": {"dense_coverage": 0.78, "indexer_pid": None}}
    (line,) = notes(meta)
    assert line.startswith("note: only 78% of the changes are embedded so far") and "run `backstory index`" in line
    (line,) = notes({**meta, "index": {"dense_coverage": 0.78, "indexer_pid": 4242}})
    assert "an indexer is embedding the rest" in line and "run `backstory index`" not in line
    assert notes({**meta, "index": {"dense_coverage": 1.0}}) == []
    assert notes({**meta, "lanes": ["diff"]}) == []  # the dense lane did not run: nothing it could miss


def test_query_help_hides_tuning_switches_which_still_work(indexed) -> None:
    path, _ = indexed
    text = ok("query", "--help")
    for switch in ("--fusion", "--second-stage", "--dense-pool", "--reranker", "--lanes", "--cross-encoder", "--model"):
        assert switch not in text
    assert "--since WHEN" in text and "only commits authored on or after WHEN" in text
    assert "--until WHEN" in text and "exit codes:" in text
    tuning = subprocess.run(
        [sys.executable, "-m", "backstory", "query", "--help"], capture_output=True, text=True,
        env={**os.environ, "BACKSTORY_TUNING_HELP": "1"},
    ).stdout  # fmt: skip
    assert "--fusion" in tuning and "--second-stage" in tuning and "tuning (for evaluation" in tuning
    rrf = query(path, "retry backoff", "--fusion", "rrf", "--lanes", "diff,message")
    assert rrf["results"] and rrf["_meta"]["lanes"] == ["diff", "message"]


def test_serve_tcp_is_checked() -> None:
    from backstory import cli_parser

    proc = run("serve", "--tcp", "nonsense")
    assert proc.returncode == 2
    assert "--tcp: expected HOST:PORT with a port from 1 to 65535, got 'nonsense'" in proc.stderr
    assert "invalid literal" not in proc.stderr
    assert run("serve", "--tcp", "localhost:70000").returncode == 2
    parse = cli_parser.build_parser().parse_args
    assert parse(["serve", "--tcp", "localhost:2087"]).tcp == ("localhost", 2087)
    assert parse(["serve", "--tcp", "2087"]).tcp == ("127.0.0.1", 2087)
    assert parse(["serve", "--tcp", "[::1]:2087"]).tcp == ("::1", 2087)


def test_exit_codes_are_documented() -> None:
    from backstory import cli

    text = ok("--help")
    for code in (cli.EXIT_OK, cli.EXIT_NO_RESULTS, cli.EXIT_USAGE, cli.EXIT_NO_INDEX, cli.EXIT_ERROR, 130):
        assert f"\n  {code} " in text
    assert (cli.EXIT_OK, cli.EXIT_NO_RESULTS, cli.EXIT_USAGE, cli.EXIT_NO_INDEX, cli.EXIT_ERROR) == (0, 1, 2, 3, 4)


def test_another_indexer_running_is_named_in_hints(indexed) -> None:
    """While another process writes the index, hints say so instead of "run `backstory index`" (which would
    fail as busy)."""
    from backstory.history.repo import open_repo
    from backstory.index.build import store_for

    path, _ = indexed
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 30
    repo.commit("Newer work", {"x.py": "x = 1\n"})
    store = store_for(open_repo(path))
    with store.write_lock():
        result = query(path, "retry")
        assert result["_meta"]["index"]["indexer_pid"] == os.getpid()
        hint = result["_meta"]["hint"]
        assert hint == f"the index is 1 commit(s) behind HEAD: an indexer (process {os.getpid()}) is adding them"
        status = json.loads(ok("status", "-C", str(path), "--json"))
        assert status["next"].startswith("wait: an indexer") and "run `backstory index`" not in status["hint"]
        proc = run("index", str(path), "--no-dense")
        assert proc.returncode == 4 and "another `backstory index` is writing this index" in proc.stderr
    assert query(path, "retry")["_meta"]["index"]["indexer_pid"] is None


def test_first_index_being_built_by_another_process(sample) -> None:
    from backstory.history.repo import open_repo
    from backstory.index.build import store_for

    path, _ = sample
    store = store_for(open_repo(path))
    with store.write_lock():
        proc = run("query", "-C", str(path), "retry", "--no-dense")
        assert proc.returncode == 3
        assert f"an indexer (process {os.getpid()}) is building the index" in proc.stderr
        assert "run `backstory index`" not in proc.stderr


def test_status_is_human_readable_and_json_has_the_same_facts(indexed) -> None:
    path, _ = indexed
    text = ok("status", "-C", str(path))
    assert "{" not in text and "None" not in text, text
    for label in ("repository:", "HEAD:", "index:", "history:", "embeddings:", "disk:", "built with:", "next:"):
        assert label in text
    assert "embeddings:    0 of 6 file changes (0%); 6 pending" in text
    assert "next:          run `backstory index` to embed 6 file change(s)" in text
    status = json.loads(ok("status", "-C", str(path), "--json"))
    assert status["pending"] == {
        "history": 0,
        "interrupted": 0,
        "merges": 0,
        "unreadable_merges": 0,
        "symbols": 0,
        "texts": 0,
        "message_index": 0,
        "dense": 6,
    }
    assert set(status["disk"]) == {"catalogue", "keyword_index", "vectors", "other", "rerank_states"}
    assert status["size_bytes"] == sum(v for k, v in status["disk"].items() if k != "rerank_states")
    tables = status["catalogue_tables"]  # the budget per table (dbstat), largest first
    assert tables["hunks"]["table"] > 0 and tables["commits"]["indexes"] > 0, tables
    totals = [sum(v.values()) for v in tables.values()]
    assert totals == sorted(totals, reverse=True)
    assert 0 < sum(totals) <= status["disk"]["catalogue"]
    line = text.split("catalogue:     ")[1].split("\n")[0]  # the same budget, largest table first
    assert sum(tables[line.split(" ")[0]].values()) == totals[0] and f", {len(tables) - 4} more " in line, line
    assert status["next"] == "run `backstory index` to embed 6 file change(s)"
    repo = GitRepo.__new__(GitRepo)
    repo.path, repo.n = path, 30
    repo.commit("Newer work", {"x.py": "x = 1\n"})
    status = json.loads(ok("status", "-C", str(path), "--json"))
    assert status["pending"]["history"] == 1
    assert status["next"] == "run `backstory index` to add the 1 commit(s) behind HEAD and embed 6 file change(s)"


def test_status_after_an_interrupted_run_has_no_none() -> None:
    from backstory.views.status import status_lines

    status = {
        "repo": "/r",
        "index": {
            "path": "/r/.git/backstory", "head": "2c8cd3a" + "0" * 33, "indexed_commits": 800,
            "commits_behind_head": 2529, "last_indexed_commit": "2c8cd3a" + "1" * 33, "indexed_at": None,
            "dense_coverage": 0.0, "indexer_pid": None,
        },
        "hint": "the index is 2529 commit(s) behind HEAD: run `backstory index`",
        "options": {"no_messages": False, "symbols": True, "max_file_bytes": 1_000_000},
        "dense": None, "hunks": 10, "files": 10, "embedded_files": 0, "size_bytes": 1000,
        "disk": {"catalogue": 600, "keyword_index": 400, "vectors": 0, "other": 0, "rerank_states": 0},
        "catalogue_tables": {
            "hunks": {"table": 3_000_000, "indexes": 500_000}, "commits": {"table": 1_200_000, "indexes": 0},
            "files": {"table": 800_000, "indexes": 100_000}, "merge_paths": {"table": 4096, "indexes": 4096},
            "state": {"table": 4096, "indexes": 0}, "sqlite_schema": {"table": 4096, "indexes": 0},
        },
        "pending": {"history": 2529, "interrupted": 12, "merges": 3, "dense": 10},
        "next": "run `backstory index` to add the 2,529 commit(s) behind HEAD",
    }  # fmt: skip
    rows = dict(status_lines(status))
    assert rows["last indexed"] == "2c8cd3a11111"
    assert rows["history"] == "800 commits indexed, 2,529 behind HEAD"
    assert rows["interrupted"].startswith("12 commits half-written")
    assert rows["merge diffs"].startswith("3 merges not diffed")
    assert rows["catalogue"] == (
        "hunks 3.5 MB (indexes 500.0 kB), commits 1.2 MB, files 900.0 kB (indexes 100.0 kB), "
        "merge_paths 8.2 kB (indexes 4.1 kB), 2 more 8.2 kB"
    )
    assert "None" not in "".join(rows.values())


def test_index_reports_the_whole_run_and_logs_progress_off_a_terminal(sample) -> None:
    path, _ = sample
    proc = run("index", str(path), "--no-dense")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("indexed 6 new commits (6 hunks) in ")
    assert "Indexing history: 6 commits to do\n" in proc.stderr
    assert "Indexing history: 6 commits in " in proc.stderr
    report = json.loads(ok("index", str(path), "--no-dense", "--json", "--rebuild", "-q"))
    assert report["seconds_total"] >= report["seconds"] and set(report["phase_seconds"]) == {"history"}
    assert run("index", str(path), "--no-dense", "-q").stderr == ""


def test_progress_view_rates_and_etas() -> None:
    import io

    from backstory.views.progress import ProgressView

    now = [100.0]
    out = io.StringIO()
    view = ProgressView(out, tty=False, interval=10.0, clock=lambda: now[0])
    view("history", 0, 1000)
    assert out.getvalue() == "Indexing history: 1,000 commits to do\n"  # no "ETA 0:00" at the start
    now[0] += 5
    view("history", 100, 1000)
    assert out.getvalue().count("\n") == 1  # plain lines only every 10 s
    now[0] += 5
    view("history", 500, 1000)
    assert out.getvalue().splitlines()[-1] == "Indexing history: 500/1,000 commits (50%), 50/s, about 0:10 left"
    now[0] += 10
    view("history", 1000, 1000)
    view("merges", 233, 1000)  # a phase whose first report comes after a chunk of work: no 233000000/s
    now[0] += 0.001
    view("merges", 466, 1000)
    assert "/s" not in out.getvalue().splitlines()[-1]
    now[0] += 2
    view("merges", 1000, 1000)
    view.close()
    lines = out.getvalue().splitlines()
    assert lines[-3] == "Indexing history: 1,000 commits in 20.0 s (50/s)"
    assert lines[-2] == "Diffing merges: 1,000 merges to do"
    assert lines[-1] == "Diffing merges: 1,000 merges in 2.0 s (383/s)"
    assert view.phases["history"].elapsed(0) == 20.0 and view.seconds() == pytest.approx(22.001)


def test_progress_view_on_a_terminal_redraws_one_line() -> None:
    import io

    from backstory.views.progress import ProgressView

    now = [0.0]
    out = io.StringIO()
    view = ProgressView(out, tty=True, clock=lambda: now[0])
    view("dense", 0, 200)
    assert "ETA" not in out.getvalue() and "left" not in out.getvalue() and "/s" not in out.getvalue()
    now[0] = 4.0
    view("dense", 100, 200)
    drawn = out.getvalue().split("\r")[-1]
    assert drawn.startswith("Embedding changes: 100/200 file changes (50%), 25/s, about 0:04 left")
    now[0] = 8.0
    view("dense", 200, 200)
    view.close()
    assert out.getvalue().endswith("Embedding changes: 200 file changes in 8.0 s (25/s)\n")


def test_history_is_newest_first(repo: GitRepo) -> None:
    """Author dates out of the commit graph's order (a rebase keeps them): listed strictly newest first."""
    body = "def area(w, h):\n    return w * h\n"
    repo.commit("Add area", {"geo.py": body}, days=1)
    repo.commit("Round the area", {"geo.py": body.replace("w * h", "round(w * h)")}, days=9)
    repo.commit("Document area", {"geo.py": '"""Shapes."""\n' + body.replace("w * h", "round(w * h)")}, days=5)
    repo.commit("Name the area", {"geo.py": '"""Shapes."""\n' + body.replace("w * h", "round(w * h, 2)")}, days=7)
    ok("index", str(repo.path), "--no-dense", "-q")
    result = json.loads(ok("history", "geo.py:3", "--json", "-C", str(repo.path)))
    dates = [c["commit"]["date"] for c in result["commits"]]
    assert dates == sorted(dates, reverse=True) and len(dates) == 3
    text = ok("history", "geo.py:3", "-C", str(repo.path))
    assert text.splitlines()[0] == "History of area  function, geo.py:2-3; 3 commits, newest first"
    assert [line.split("  ", 1)[1] for line in text.splitlines()[1::2]] == [
        "Round the area",
        "Name the area",
        "Add area",
    ]
