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


def ok(*args: str, **kw: Any) -> str:
    proc = run(*args, **kw)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def query(path: Path, text: str, *extra: str) -> dict[str, Any]:
    return json.loads(ok("query", "-C", str(path), text, "--json", "--no-dense", "--no-rerank", *extra))


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
    assert "no matching commits" in ok("query", "-C", str(path), "zzzzqqq", "--no-dense", "--no-rerank")


def test_status_and_show(indexed) -> None:
    path, shas = indexed
    status = json.loads(ok("status", "-C", str(path), "--json"))
    assert status["index"]["indexed_commits"] == len(shas)
    assert status["index"]["commits_behind_head"] == 0
    assert status["options"]["no_messages"] is False
    assert status["size_bytes"] > 0
    assert "indexed commits:" in ok("status", "-C", str(path))
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
    assert proc.returncode == 1
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
    ("args", "message"),
    [
        (("query", "x", "--since", "yesterday-ish"), "cannot understand the date"),
        (("query", "x", "-k", "0"), "-k must be at least 1"),
        (("show", "zzzz"), "not a commit id, branch or tag"),
        (("show", "abcdef12"), "no commit starting with"),
        (("history", "nope.py:1"), "not in HEAD"),
        (("history", "src/app/net.py:999"), "past the end"),
        (("history", "src/app/net.py"), "expected PATH:LINE"),
        (("query", "x", "--lanes", "diff,messages"), "unknown lane(s) messages; lanes are diff, message"),
        (("query", "x", "--batch", "/nonexistent/queries.txt"), "cannot read the query file"),
        (("query", "x", "--language", "klingon"), "unknown language 'klingon'; known: batch, c, "),
        (("query", "x", "--since", "2024-02-01", "--until", "2024-01-01"), "is after --until"),
        (("query", "x", "--dense-pool", "-1"), "--dense-pool must be 0 or more, not -1"),
    ],
)
def test_bad_input_is_a_clear_error(indexed, args, message) -> None:
    path, _ = indexed
    proc = run(*args, "-C", str(path))
    assert proc.returncode == 1
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_not_a_repository_and_missing_path(tmp_path) -> None:
    proc = run("index", str(tmp_path))
    assert proc.returncode == 1 and "not a git repository" in proc.stderr
    proc = run("index", str(tmp_path / "missing"))
    assert proc.returncode == 1 and "does not exist" in proc.stderr
    proc = run("query", "x", "-C", str(tmp_path))
    assert proc.returncode == 1 and "not a git repository" in proc.stderr


def test_index_dir_that_is_a_file_is_a_clear_error(sample, tmp_path) -> None:
    path, _ = sample
    (tmp_path / "a-file").write_text("not a directory\n")
    proc = run("index", str(path), "--no-dense", "--index-dir", str(tmp_path / "a-file"))
    assert proc.returncode == 1 and f"cannot use {tmp_path / 'a-file'}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_repository(tmp_path) -> None:
    GitRepo(tmp_path / "empty")
    proc = run("index", str(tmp_path / "empty"), "--no-dense")
    assert proc.returncode == 1 and "no commits yet" in proc.stderr
    result = json.loads(ok("query", "x", "-C", str(tmp_path / "empty"), "--json"))
    assert result["results"] == [] and "empty" in result["_meta"]["hint"]
    for rev in ("HEAD", "main~1"):
        proc = run("show", rev, "-C", str(tmp_path / "empty"))
        assert proc.returncode == 1 and "has no commits yet" in proc.stderr


def test_query_before_index_hints(sample) -> None:
    path, _ = sample
    result = query(path, "retry")
    assert result["results"] == []
    assert "run `backstory index`" in result["_meta"]["hint"]


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
    assert proc.returncode == 1 and "does not change logo.png" in proc.stderr


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
    assert proc.returncode == 1 and "does not change k\ufffdlnx.py" in proc.stderr


def test_second_stage_choice(indexed) -> None:
    from backstory import cli
    from backstory.search import engine

    assert cli.SECOND_STAGES == engine.SECOND_STAGES  # the CLI keeps its own copy so that it starts fast
    assert engine.SearchOptions().dense_pool == cli.DENSE_POOL
    args = cli._parser().parse_args(["query", "x", "--dense-pool", "3"])
    assert cli._search_options(args).dense_pool == 3
    path, _ = indexed
    assert query(path, "retry backoff", "--second-stage", "blend")["results"]
    bad = run("query", "-C", str(path), "retry", "--second-stage", "cross")
    assert bad.returncode == 2 and "--second-stage" in bad.stderr
