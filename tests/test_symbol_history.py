"""Exact symbol history checked against ``git log -L`` (the oracle) on histories that move, rename, edit and
re-indent definitions, in several languages; plus the bad positions."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from backstory import symbols
from backstory.features.exact_history import exact_commits, symbol_history
from backstory.features.locate import Position, head_blob, parse_position
from backstory.features.prior_art import prior_art
from backstory.history import libgit
from backstory.history.repo import HistoryError, open_repo
from backstory.index import build, merge_diffs
from backstory.index.build import index_repository
from backstory.index.store import store_for
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo, fast_history

NO_MODELS = ModelConfig(dense=False, reranker="none")


def at(engine: Engine, spec: str) -> Position:
    """``PATH:LINE`` (repository-relative or absolute) as the structured position the features take."""
    return parse_position(spec, engine.root)


def git_log_l(repo: GitRepo, path: str, start: int, end: int) -> list[str]:
    out = repo.git("log", f"-L{start},{end}:{path}", "--format=%H", "-s")
    return [line for line in out.splitlines() if line.strip()]


def compare_all(repo: GitRepo, stop_before_merges: bool = False) -> tuple[int, int, int, list[str]]:
    """(true positives, ours, oracle's, mismatches) over every definition at HEAD. ``stop_before_merges``: the
    run stops where the merges phase starts, so every merge is still unlisted and diffed on the fly (what exact
    history does while a long run's later phases work)."""
    cancel = threading.Event()

    def progress(phase: str, _done: int, _total: int) -> None:
        if phase != "history":  # the phases after the keyword lanes: the run stops before the merges'
            cancel.set()

    index_repository(repo.path, progress=progress if stop_before_merges else None, cancel=cancel)
    engine = Engine(repo.path, models=NO_MODELS)
    if stop_before_merges:
        assert engine.catalog.pending_merge_diffs() > 0 and not engine.indexed_merges()
    files = repo.git("ls-files").split()
    tp = ours_n = oracle_n = 0
    bad: list[str] = []
    for f in files:
        lang = symbols.language_for_path(f)
        if lang not in symbols.supported_languages():
            continue
        for d in symbols.extract_definitions(head_blob(engine, f), lang or "") or []:
            commits = symbol_history(engine, at(engine, f"{f}:{d.start_line}"))["commits"]
            ours = [c["commit"]["sha"] for c in commits]
            dates = [c["commit"]["date"] for c in commits]
            assert dates == sorted(dates, reverse=True), f"{f}:{d.name}: not newest first"
            # the innermost definition at its first line is d itself unless another starts on the same line
            oracle = git_log_l(repo, f, d.start_line, d.end_line)
            got = symbol_history(engine, at(engine, f"{f}:{d.start_line}"))["symbol"]
            if got["name"] != d.name:
                continue
            tp += len(set(ours) & set(oracle))
            ours_n += len(ours)
            oracle_n += len(oracle)
            # the same commits as git log -L; listed strictly newest first (git's order follows the graph: a
            # merged branch's older commit can come before a newer one on the first parent)
            if sorted(ours) != sorted(oracle):
                bad.append(f"{f}:{d.name}: ours={[s[:7] for s in ours]} git={[s[:7] for s in oracle]}")
    return tp, ours_n, oracle_n, bad


PY_V1 = """import os


def load(path):
    with open(path) as fh:
        return fh.read()


def save(path, data):
    with open(path, "w") as fh:
        fh.write(data)


class Store:
    def get(self, key):
        return self.items[key]

    def put(self, key, value):
        self.items[key] = value
"""


def test_python_history_matches_git_log_l(repo: GitRepo) -> None:
    repo.commit("v1", {"pkg/io.py": PY_V1})
    repo.commit("edit load", {"pkg/io.py": PY_V1.replace("return fh.read()", "return fh.read().strip()")})
    shifted = "# header comment\n# another\n" + PY_V1.replace("return fh.read()", "return fh.read().strip()")
    repo.commit("shift everything down", {"pkg/io.py": shifted})
    repo.git("mv", "pkg/io.py", "pkg/files.py")
    repo.commit("rename module")
    v = shifted.replace("        fh.write(data)\n", "        fh.write(data)\n        fh.flush()\n")
    repo.commit("flush on save", {"pkg/files.py": v})
    v2 = v.replace(
        "    def get(self, key):\n        return self.items[key]\n",
        "    def get(self, key):\n        if key in self.items:\n"
        "            return self.items[key]\n        return None\n",
    )
    repo.commit("re-indent get", {"pkg/files.py": v2})
    v3 = v2 + "\n\ndef extra():\n    return 1\n"
    repo.commit("add extra", {"pkg/files.py": v3})
    repo.commit(
        "touch both",
        {
            "pkg/files.py": v3.replace("return 1", "return 2").replace(
                "self.items[key] = value", "self.items[key] = value  # put"
            )
        },
    )
    tp, ours, oracle, bad = compare_all(repo)
    assert bad == []
    assert tp == ours == oracle > 0


JS_V1 = """export class Client {
  constructor(base) {
    this.base = base;
  }

  send(path) {
    return fetch(this.base + path);
  }
}

export function retry(fn, times) {
  for (let i = 0; i < times; i++) {
    try { return fn(); } catch (e) { continue; }
  }
}
"""

GO_V1 = """package net

type Server struct{ addr string }

func (s *Server) Run() error {
	return listen(s.addr)
}

func Dial(addr string) error {
	return nil
}
"""

RS_V1 = """pub struct Point { x: f64, y: f64 }

impl Point {
    pub fn norm(&self) -> f64 {
        (self.x * self.x + self.y * self.y).sqrt()
    }
}

pub fn origin() -> Point {
    Point { x: 0.0, y: 0.0 }
}
"""


def test_several_languages_match_git_log_l(repo: GitRepo) -> None:
    repo.commit("v1", {"web/client.js": JS_V1, "net/server.go": GO_V1, "geo/point.rs": RS_V1})
    repo.commit("edit send", {"web/client.js": JS_V1.replace("this.base + path", "this.base + '/' + path")})
    repo.commit(
        "go: log run",
        {"net/server.go": GO_V1.replace("\treturn listen(s.addr)\n", "\tlog(s.addr)\n\treturn listen(s.addr)\n")},
    )
    (repo.path / "geometry").mkdir()
    repo.git("mv", "geo/point.rs", "geometry/point.rs")
    repo.commit("move rust module")
    repo.commit(
        "rust: faster norm",
        {"geometry/point.rs": RS_V1.replace("(self.x * self.x + self.y * self.y).sqrt()", "self.x.hypot(self.y)")},
    )
    js2 = "// utilities\n" + JS_V1.replace("continue;", "if (i + 1 === times) throw e;")
    repo.commit("js: rethrow last", {"web/client.js": js2})
    tp, ours, oracle, bad = compare_all(repo)
    assert bad == []
    assert tp == ours == oracle > 0


def test_bad_positions(repo: GitRepo) -> None:
    big = "def target():\n    return 1\n" + "# filler line to pass the parse limit\n" * 14_000
    files = {"pkg/io.py": PY_V1, "README.md": "# hi\n", "min.js": "var a=" + "1+" * 6000 + "1;\n", "big.py": big}
    repo.commit("v1", files)
    index_repository(repo.path)
    engine = Engine(repo.path, models=NO_MODELS)
    outside = symbol_history(engine, at(engine, "pkg/io.py:1"))
    assert outside["symbol"] is None and outside["message"] == "no enclosing symbol at pkg/io.py:1"
    readme = symbol_history(engine, at(engine, "README.md:1"))
    assert readme["symbol"] is None and "markdown has no symbol parser" in readme["message"]
    minified = symbol_history(engine, at(engine, "min.js:1"))  # not parsed, still an answer, and it says why
    assert minified["symbol"] is None and "minified code is not parsed" in minified["message"]
    large = symbol_history(engine, at(engine, "big.py:1"))
    assert large["symbol"] is None and "symbols are parsed up to 512,000" in large["message"]
    with pytest.raises(HistoryError, match="not in HEAD"):
        symbol_history(engine, at(engine, "pkg/nope.py:1"))
    with pytest.raises(HistoryError, match="past the end"):
        symbol_history(engine, at(engine, "pkg/io.py:500"))
    with pytest.raises(HistoryError, match="PATH:LINE"):
        symbol_history(engine, at(engine, "pkg/io.py:x"))


def test_syntax_errors_and_non_utf8_in_history(repo: GitRepo) -> None:
    repo.commit("v1", {"m.py": "def ok():\n    return 1\n"})
    repo.commit("broken", {"m.py": "def ok():\n    return (1\n\ndef other(:\n    pass\n"})
    repo.commit("latin1", {"m.py": b"def ok():\n    return '\xe9'\n"})
    index_repository(repo.path)
    engine = Engine(repo.path, models=NO_MODELS)
    hist = symbol_history(engine, at(engine, "m.py:2"))
    assert hist["symbol"]["name"] == "ok"
    assert [c["commit"]["subject"] for c in hist["commits"]] == ["latin1", "broken", "v1"]


def test_history_of_a_file_whose_name_is_not_utf8(repo: GitRepo) -> None:
    name = os.fsdecode(b"caf\xe9.py")  # Latin-1 bytes: surrogate-escaped, as the file system hands them over
    (repo.path / name).write_text("def brew():\n    return 1\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "Add brew")
    (repo.path / name).write_text("def brew():\n    return 2\n")
    repo.git("commit", "-q", "-am", "Stronger brew")
    index_repository(repo.path)
    engine = Engine(repo.path, models=NO_MODELS)
    result = symbol_history(engine, at(engine, f"{repo.path / name}:2"))
    assert result["symbol"]["name"] == "brew" and result["symbol"]["path"] == "caf\ufffd.py"
    assert [c["commit"]["subject"] for c in result["commits"]] == ["Stronger brew", "Add brew"]


def test_prior_art_puts_exact_first_and_dedupes(repo: GitRepo) -> None:
    repo.commit("v1", {"pkg/io.py": PY_V1})
    repo.commit("edit load", {"pkg/io.py": PY_V1.replace("return fh.read()", "return fh.read().strip()")})
    repo.commit(
        "read config files",
        {"pkg/config.py": "def load_config(path):\n    with open(path) as fh:\n        return fh.read()\n"},
    )
    index_repository(repo.path)
    engine = Engine(repo.path, models=NO_MODELS)
    result = prior_art(engine, Position("pkg/io.py", 5), SearchOptions(rerank=False, k=5))
    assert result["symbol"]["name"] == "load"
    assert [e["commit"]["subject"] for e in result["exact"]] == ["edit load", "v1"]
    inferred = [r["commit"]["subject"] for r in result["results"]]
    assert "read config files" in inferred
    assert not set(inferred) & {"edit load", "v1"}


def test_history_cli_json(repo: GitRepo) -> None:
    import json
    import sys

    repo.commit("v1", {"pkg/io.py": PY_V1})
    repo.commit("edit save", {"pkg/io.py": PY_V1.replace('"w"', '"wb"')})
    subprocess.run(
        [sys.executable, "-m", "backstory", "index", str(repo.path), "--no-dense"], check=True, capture_output=True
    )
    out = subprocess.run(
        [sys.executable, "-m", "backstory", "history", "pkg/io.py:10", "--json", "-C", str(repo.path)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    data = json.loads(out)
    assert data["symbol"] == {"name": "save", "kind": "function", "path": "pkg/io.py", "start": 9, "end": 11}
    assert [c["commit"]["subject"] for c in data["commits"]] == ["edit save", "v1"]
    assert all(c["provenance"] == "EXACT" for c in data["commits"])
    assert data["commits"][0]["hunks"][0]["symbols"][0]["name"] == "save"
    assert Path(repo.path).exists()


def _feature_strips_load(repo: GitRepo, subject: str = "feature: strip") -> str:
    """v1 on main, then a `feature` branch whose commit makes load() strip; leaves main checked out."""
    repo.commit("v1", {"pkg/io.py": PY_V1})
    repo.git("checkout", "-q", "-b", "feature")
    side = repo.commit(subject, {"pkg/io.py": PY_V1.replace("return fh.read()", "return fh.read().strip()")})
    repo.git("checkout", "-q", "main")
    return side


@pytest.mark.parametrize("stop_before_merges", [False, True])
def test_history_through_merges_matches_git_log_l(repo: GitRepo, stop_before_merges: bool) -> None:
    _feature_strips_load(repo, "feature: strip on load")
    shifted = "# license header\n\n" + PY_V1.replace('"w"', '"wb"')
    repo.commit("main: header and binary save", {"pkg/io.py": shifted})
    repo.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    merged = (repo.path / "pkg/io.py").read_text()
    repo.commit(
        "after merge: get default",
        {"pkg/io.py": merged.replace("return self.items[key]", "return self.items.get(key)")},
    )
    tp, ours, oracle, bad = compare_all(repo, stop_before_merges)
    assert bad == []
    assert tp == ours == oracle > 0


@pytest.mark.parametrize("stop_before_merges", [False, True])
def test_merge_that_changed_the_function_against_both_parents_is_listed(
    repo: GitRepo, stop_before_merges: bool
) -> None:
    # git log -L lists a merge whose result differs from every parent inside the range (a conflict resolved
    # by hand), and keeps following both sides
    _feature_strips_load(repo)
    repo.commit("main: lower", {"pkg/io.py": PY_V1.replace("return fh.read()", "return fh.read().lower()")})
    repo.git("merge", "-q", "--no-ff", "--no-commit", "feature", check=False)
    merge = repo.commit(
        "merge feature", {"pkg/io.py": PY_V1.replace("return fh.read()", "return fh.read().casefold()")}
    )
    tp, ours, oracle, bad = compare_all(repo, stop_before_merges)
    assert bad == []
    assert tp == ours == oracle > 0
    assert merge in git_log_l(repo, "pkg/io.py", 4, 6)  # the case is really exercised


def test_merges_listed_while_the_engine_is_open_are_read_from_the_catalogue(repo: GitRepo) -> None:
    # a long run lists merges chunk by chunk after its keyword lanes, and its `indexed_at` changes only at its
    # end: an engine (the language server's) that read the listed merges before must see each chunk as it
    # lands, or every exact history (every hover) diffs every merge it crosses until the run ends
    _feature_strips_load(repo, "feature: strip on load")
    repo.commit("main: header", {"pkg/io.py": "# license header\n\n" + PY_V1})
    repo.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    merge = repo.git("rev-parse", "HEAD").strip()
    compare_all(repo, stop_before_merges=True)  # the keyword lanes only: every merge unlisted
    engine = Engine(repo.path, models=NO_MODELS)
    indexed_at = engine.store.get_state("indexed_at")
    assert engine.indexed_merges() == set()
    other = store_for(open_repo(repo.path))  # the indexing run's own connection
    assert merge_diffs.list_merges(other, str(repo.path / ".git")) == 1
    assert engine.store.get_state("indexed_at") == indexed_at  # what the cache was keyed on alone before
    assert engine.indexed_merges() == {merge}
    load = next(
        d
        for d in symbols.extract_definitions(head_blob(engine, "pkg/io.py"), "python") or []
        if d.name.endswith("load")
    )
    commits = symbol_history(engine, at(engine, f"pkg/io.py:{load.start_line}"))["commits"]
    oracle = git_log_l(repo, "pkg/io.py", load.start_line, load.end_line)
    assert sorted(c["commit"]["sha"] for c in commits) == sorted(oracle) and len(oracle) == 2


def test_a_history_asked_while_the_keyword_lanes_write_is_not_kept_for_the_later_phases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run sets `indexed_at` when it starts and ends only: the commit graph an exact history read while the
    # keyword lanes were writing (a symbol history asked then) must not stand in for the whole history in the
    # run's later phases, when hovers answer
    fast_history(tmp_path, 300, files=3)
    monkeypatch.setattr(build, "BATCH_COMMITS", 20)
    engine = Engine(tmp_path, models=NO_MODELS)
    whole = len((tmp_path / "pkg/mod_0.py").read_text().splitlines())
    counts: list[int] = []

    def progress(phase: str, done: int, total: int) -> None:  # between the run's batches
        if phase == "history" and ((0 < done < total and not counts) or done == total):
            counts.append(len(exact_commits(engine, "pkg/mod_0.py", 1, whole, limit=None)))

    index_repository(tmp_path, progress=progress)
    assert len(counts) == 2 and counts[0] < counts[1] == 100  # every commit that edited mod_0.py, at the end


def test_merge_that_kept_the_first_parent_hides_the_side_branch(repo: GitRepo) -> None:
    # the side branch edited load() but the merge kept main's version: the first parent takes all the blame,
    # so git log -L does not follow the side branch (the old walk, carrying to every parent, listed its commit)
    side = _feature_strips_load(repo)
    repo.commit("main: save flushes", {"pkg/io.py": PY_V1.replace("fh.write(data)", "fh.write(data); fh.flush()")})
    repo.git("merge", "-q", "--no-ff", "-s", "ours", "-m", "merge feature, keep ours", "feature")
    tp, ours, oracle, bad = compare_all(repo)
    assert bad == []
    assert tp == ours == oracle > 0
    assert side not in git_log_l(repo, "pkg/io.py", 4, 6)


REWRITE_V1 = "def f():\n    y = x\n    return x\n\ndef g():\n    x = 1\n    x = 1\n\ndef h():\n    return y\n"
# patience aligns old lines 6-8 with new 6-9 as one replaced block; git's Myers inserts two lines after "def g():"
# and removes the blank line before "def h():" (two blocks, different old sides)
REWRITE_V2 = (
    "def f():\n    y = x\n    return x\n\ndef g():\n    return y\n    x = 1\n    x = 1\n    x = 1\ndef h():\n"
    "    return y\n"
)


def test_rewrite_where_patience_and_myers_disagree_matches_git_log_l(repo: GitRepo) -> None:
    repo.commit("v0", {"m.py": REWRITE_V1.replace("\n\ndef h", "\n# h next\ndef h")})
    # git maps g through the rewrite to old lines 5-7 only: this edit of line 8 is not part of g's history
    repo.commit("drop the comment", {"m.py": REWRITE_V1})
    repo.commit("h returns more", {"m.py": REWRITE_V1.replace("return y", "return y + 1")})
    repo.commit("rewrite g", {"m.py": REWRITE_V2.removesuffix("return y\n") + "return y + 1\n"})
    repo.commit("f edited", {"m.py": (repo.path / "m.py").read_text().replace("y = x", "y = -x")})
    tp, ours, oracle, bad = compare_all(repo)
    assert bad == []
    assert tp == ours == oracle > 0


def test_merge_blocks_are_stored_at_index_time(repo: GitRepo) -> None:
    from backstory.history.diff import changes
    from backstory.index.merge_diffs import ADDED, decode

    _feature_strips_load(repo)
    repo.commit("main: wb", {"pkg/io.py": PY_V1.replace('"w"', '"wb"')})
    repo.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    repo.git("checkout", "-q", "-b", "other", "HEAD~1")
    repo.commit("other: new module", {"pkg/new.py": "def f():\n    return 1\n"})
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge other", "other")
    seen: list[tuple[str, int, int]] = []
    index_repository(repo.path, progress=lambda phase, done, total: seen.append((phase, done, total)))
    merges = [s for s in seen if s[0] == "merges"]
    assert merges and merges[-1][1] == merges[-1][2] > 0  # the pass reports progress to the end
    assert seen.index(merges[0]) > max(i for i, s in enumerate(seen) if s[0] == "history")
    engine = Engine(repo.path, models=NO_MODELS)
    rows = engine.store.db.execute("SELECT sha, parent, path, ops FROM merge_paths ORDER BY sha, parent").fetchall()
    assert rows and all(r["ops"] is not None for r in rows)
    for sha, parent, path, ops in rows:
        first = repo.git("rev-parse", f"{sha}^1").strip()
        if parent != first:  # a later parent is listed only behind a first parent that differs too
            assert any(r[0] == sha and r[1] == first and r[2] == path for r in rows)
        if ops == ADDED:
            continue
        old = repo.git("show", f"{parent}:{path}").encode()
        new = repo.git("show", f"{sha}:{path}").encode()
        assert decode(ops) == [(i, i + n, j, j + m) for i, n, j, m in changes(old, new)]
    assert ADDED in {r["ops"] for r in rows}  # a file new relative to a parent
    # diffed on the fly with one memo of blob ids shared by every row (as exact history does before the merges
    # phase), the blocks are the stored ones
    memo: merge_diffs.BlobMemo = {}
    git = libgit.of(engine.repo)
    assert [merge_diffs.merge_blocks(git, sha, parent, path, memo) for sha, parent, path, _ops in rows] == [
        r["ops"] for r in rows
    ]
    assert len(memo) < 2 * len(rows)  # a merge's blob is looked up once for all of its parents
    # between indexing runs the engine lets go of libgit2, whose handle keeps the pack index and pages mapped;
    # a later merge diff opens it again
    sha, parent, path, ops = rows[0]
    assert engine.merge_blocks(sha, parent, path) == ops and libgit.is_open(engine.repo)
    engine.release_git()
    assert not libgit.is_open(engine.repo) and engine._git is None
    assert engine.merge_blocks(sha, parent, path) == ops


@pytest.mark.parametrize("stop_before_merges", [False, True])
def test_merge_that_renamed_the_file_relative_to_a_parent_follows_the_rename(
    repo: GitRepo, stop_before_merges: bool
) -> None:
    # the side branch moved the module; relative to main the merge *adds* pkg/files.py: git's line-log finds the
    # rename there and follows main's history of pkg/io.py (where save() was edited) instead of the side branch
    repo.commit("v1", {"pkg/io.py": PY_V1})
    repo.git("checkout", "-q", "-b", "move")
    repo.git("mv", "pkg/io.py", "pkg/files.py")
    repo.commit("move: rename module", {"pkg/files.py": PY_V1.replace("return fh.read()", "return fh.read(-1)")})
    repo.git("checkout", "-q", "main")
    edit = repo.commit("main: binary save", {"pkg/io.py": PY_V1.replace('"w"', '"wb"')})
    repo.git("merge", "-q", "--no-ff", "-m", "merge move", "move")
    assert (repo.path / "pkg/files.py").exists() and not (repo.path / "pkg/io.py").exists()
    tp, ours, oracle, bad = compare_all(repo, stop_before_merges)
    assert bad == []
    assert tp == ours == oracle > 0
    assert edit in git_log_l(repo, "pkg/files.py", 9, 11)  # save() at HEAD: the case is really exercised


def test_exact_history_reads_the_catalogue_under_the_engines_lock(repo: GitRepo, monkeypatch) -> None:
    """The language server's threads share one catalogue connection (status polls, searches, hovers, prewarming),
    which SQLite's Python binding lets only one thread use at a time: a status poll beside a prewarmed hover's
    history failed in CI with a ``SystemError``. Every catalogue read of an exact history holds the lock."""
    from backstory.index.catalog import Catalog

    _feature_strips_load(repo, "feature: strip on load")
    repo.commit("main: header", {"pkg/io.py": "# license header\n\n" + PY_V1})
    repo.git("merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    compare_all(repo, stop_before_merges=False)
    engine = Engine(repo.path, models=NO_MODELS)
    unlocked: list[str] = []
    for name in ("path_changes", "merge_changes", "indexed_parents", "indexed_merges", "shas_with_prefix"):
        real = getattr(Catalog, name)

        def checked(self: Catalog, *args: object, _real=real, _name=name, **kwargs: object) -> object:
            if not engine.catalogue_lock._is_owned():  # type: ignore[attr-defined]
                unlocked.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Catalog, name, checked)
    (repo.path / ".git-blame-ignore-revs").write_text(repo.git("rev-parse", "--short", "HEAD~1"))
    load = next(
        d
        for d in symbols.extract_definitions(head_blob(engine, "pkg/io.py"), "python") or []
        if d.name.endswith("load")
    )
    assert symbol_history(engine, at(engine, f"pkg/io.py:{load.start_line}"))["commits"]
    assert unlocked == []
