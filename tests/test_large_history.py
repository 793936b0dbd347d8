"""A history of several thousand commits, written with ``git fast-import``, indexed the way a long history is.

A run of that size takes the paths built for large histories: the keyword phase without symbols, a symbols
phase of its own, two reader processes and merges listed only where a walk can reach them. Each phase's result
is checked against a slow reference on the same history:

- hunks and their line numbers against ``git log -p`` (the git CLI, an independent diff);
- symbols against reading every commit in one process with symbols inline (the one-pass reader);
- every keyword lane's ranking against an index built in one pass;
- merge rows against ``git diff`` of each merge with its parents.

Nothing here measures time: the benchmarks do (``python -m backstory.evaluation.scale``).
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from backstory.history.libgit import walk
from backstory.history.policy import PathPolicy
from backstory.history.reader import read_commit
from backstory.history.repo import head_sha, open_repo
from backstory.index import commit_terms, merge_diffs, message_index, packing, symbols_phase, texts_phase
from backstory.index.analyzer import term_counts, term_set
from backstory.index.build import index_repository
from backstory.index.catalog import Catalog
from backstory.index.store import Store
from backstory.index.text_index import open_index, search_lane
from backstory.search import features
from backstory.search.engine import Engine
from backstory.search.lanes import commit_lane
from backstory.search.options import ModelConfig, SearchOptions
from backstory.symbols import language_for_path, supported_languages

HUNKS = "SELECT {} FROM hunks h JOIN files f ON f.fid = h.fid"  # a hunk's commit and path are its file's
COMMITS = 2400  # non-merge commits; plus a merge every TOPIC_EVERY
TOPIC_EVERY = 60
WORDS = [
    "buffer",
    "cache",
    "parse",
    "token",
    "index",
    "queue",
    "retry",
    "socket",
    "stream",
    "header",
    "config",
    "branch",
    "merge",
    "remote",
    "object",
    "pack",
    "delta",
    "commit",
    "tree",
    "blob",
    "refs",
    "reflog",
    "hook",
    "alias",
    "color",
    "pager",
    "diff",
    "patch",
    "apply",
    "rebase",
    "stash",
    "notes",
    "tag",
]


def _c_file(rng: random.Random, n: int) -> list[str]:
    lines: list[str] = ['#include "cache.h"', ""]
    for i in range(n):
        a, b = rng.sample(WORDS, 2)
        lines += [f"static int {a}_{b}_{i}(int x)", "{", f"\treturn x + {i};", "}", ""]
    return lines


def _py_file(rng: random.Random, n: int) -> list[str]:
    lines: list[str] = ["import os", ""]
    for i in range(n):
        a, b = rng.sample(WORDS, 2)
        lines += [f"def {a}_{b}_{i}(x):", f"    return x + {i}", "", ""]
    return lines


def _edit(rng: random.Random, lines: list[str]) -> list[str]:
    """Change, add or remove a line inside a definition, or add a definition at the end."""
    out = list(lines)
    kind = rng.random()
    bodies = [i for i, line in enumerate(out) if "return" in line]
    if kind < 0.5 and bodies:
        i = rng.choice(bodies)
        out[i] = out[i].replace("x +", f"x * {rng.randint(2, 9)} +", 1)
    elif kind < 0.7 and bodies:
        i = rng.choice(bodies)
        indent = "\t" if out[i].startswith("\t") else "    "
        out.insert(
            i, f"{indent}x = x - {rng.randint(1, 99)};" if indent == "\t" else f"{indent}x -= {rng.randint(1, 99)}"
        )
    elif kind < 0.8 and len(bodies) > 3:
        i = rng.choice(bodies)
        del out[i - 1]  # a line before the body: a definition line or brace goes
    else:
        a, b = rng.sample(WORDS, 2)
        if out and out[0].startswith("#include"):
            out += [f"int {a}_{b}(void)", "{", f"\treturn {rng.randint(0, 9)};", "}", ""]
        else:
            out += [f"def {a}_{b}():", f"    return {rng.randint(0, 9)}", "", ""]
    return out


def _fast_import_stream(seed: int = 7) -> bytes:
    rng = random.Random(seed)
    files: dict[str, list[str]] = {}
    for i in range(24):
        files[f"src/{WORDS[i]}.c"] = _c_file(rng, rng.randint(3, 12))
    for i in range(16):
        files[f"lib/{WORDS[i]}.py"] = _py_file(rng, rng.randint(3, 12))
    for i in range(6):  # files without symbols: the keyword phase puts them in the main index at once
        files[f"doc/{WORDS[i]}.txt"] = _py_file(rng, rng.randint(3, 12))
    out: list[bytes] = []
    mark = 0
    when = 1_600_000_000

    def blob_cmd(path: str, lines: list[str]) -> bytes:
        data = ("\n".join(lines) + "\n").encode()
        return f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"

    def commit(branch: str, message: str, ops: list[bytes], parents: list[int]) -> int:
        nonlocal mark, when
        mark += 1
        when += 3600
        msg = message.encode()
        head = [f"commit refs/heads/{branch}", f"mark :{mark}", f"committer Dev <dev@example.com> {when} +0000"]
        out.append(("\n".join(head) + f"\ndata {len(msg)}\n").encode() + msg + b"\n")
        if parents:
            out.append(f"from :{parents[0]}\n".encode())
            for p in parents[1:]:
                out.append(f"merge :{p}\n".encode())
        out.extend(ops)
        out.append(b"\n")
        return mark

    main = commit("main", "initial import", [blob_cmd(p, c) for p, c in sorted(files.items())], [])
    made = 1
    while made < COMMITS:
        if made % TOPIC_EVERY == 0:  # a topic branch of a few commits, merged while main moved on
            topic = main
            for _ in range(3):
                path = rng.choice(sorted(files))
                files[path] = _edit(rng, files[path])
                topic = commit("topic", f"topic: rework {Path(path).stem}", [blob_cmd(path, files[path])], [topic])
                made += 1
            path = rng.choice(sorted(files))
            files[path] = _edit(rng, files[path])
            main = commit("main", f"tweak {Path(path).stem}", [blob_cmd(path, files[path])], [main])
            made += 1
            # the merge's tree: the topic's files are already in `files` (both sides edited different lines
            # or the same file: the merge result is simply the current content)
            main = commit(
                "main", "Merge branch 'topic'", [blob_cmd(p, c) for p, c in sorted(files.items())], [main, topic]
            )
            continue
        roll = rng.random()
        ops: list[bytes] = []
        if roll < 0.02 and len(files) > 20:
            path = rng.choice(sorted(files))
            del files[path]
            ops.append(f"D {path}\n".encode())
            message = f"remove {Path(path).stem}"
        elif roll < 0.04:
            path = rng.choice(sorted(files))
            new = path.replace(".", f"_{made}.", 1)
            files[new] = files.pop(path)
            ops.append(f"R {path} {new}\n".encode())
            message = f"rename {Path(path).stem}"
        else:
            touched = rng.sample(sorted(files), rng.randint(1, 3))
            for path in touched:
                files[path] = _edit(rng, files[path])
                ops.append(blob_cmd(path, files[path]))
            message = f"{rng.choice(WORDS)}: adjust {' and '.join(Path(p).stem for p in touched)}"
        main = commit("main", message, ops, [main])
        made += 1
    out.append(b"reset refs/heads/main\nfrom :%d\n\n" % main)
    return b"".join(out)


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("large") / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=_fast_import_stream(), check=True)
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=path, check=True)
    return path


@pytest.fixture(scope="module")
def phased(big_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index a long run builds: keyword phase, the symbols phase (two reader processes), the message index,
    the commits' analysed texts and the merges' diffs (both computed in reader processes)."""
    out = tmp_path_factory.mktemp("phased")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(merge_diffs, "PARALLEL_FROM", 1)
        mp.setattr(texts_phase, "PARALLEL_FROM", 1)
        report = index_repository(big_repo, index_dir=out)
    assert report.new_commits > symbols_phase.DEFER_FROM  # the phased path was taken
    return out


@pytest.fixture(scope="module")
def one_pass(big_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slow reference: one process, symbols read inline with every commit."""
    out = tmp_path_factory.mktemp("one-pass")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(symbols_phase, "DEFER_FROM", 10**9)
        mp.setenv("BACKSTORY_WORKERS", "1")
        index_repository(big_repo, index_dir=out)
    return out


def _db(index: Path) -> sqlite3.Connection:
    return sqlite3.connect(Store(index).db_path)


def test_hunks_match_git_log_p(big_repo: Path, phased: Path) -> None:
    """Every hunk header git prints is in the catalogue, and nothing else (renames here are exact, so git's
    rename detection and ours agree)."""
    log = subprocess.run(
        ["git", "log", "-p", "-M", "--no-indent-heuristic", "--no-merges", "--format=commit %H", "--no-color"],
        cwd=big_repo, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    expected: set[tuple[str, str, int, int, int, int]] = set()
    sha = path = ""
    for line in log.splitlines():
        if line.startswith("commit "):
            sha = line.split()[1]
        elif line.startswith("+++ "):
            path = line[6:] if line != "+++ /dev/null" else path
        elif line.startswith("--- a/"):
            path = line[6:]
        elif line.startswith("@@ "):
            m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
            assert m
            a, b, c, d = m.groups()
            expected.add((sha, path, int(a), int(b or 1), int(c), int(d or 1)))
    got = set(_db(phased).execute(HUNKS.format("f.sha, f.path, h.old_start, h.old_lines, h.new_start, h.new_lines")))
    assert len(expected) > 2000
    assert got == expected


def test_symbols_phase_matches_one_pass(phased: Path, one_pass: Path) -> None:
    query = HUNKS.format("f.sha, f.path, h.idx, h.symbols, f.parsed")
    a = sorted(_db(phased).execute(query))
    b = sorted(_db(one_pass).execute(query))
    assert a == b
    assert sum(1 for r in a if r[3] != "[]") > len(a) // 2  # most hunks sit in a definition
    assert not _db(phased).execute("SELECT 1 FROM files WHERE parsed=?", (symbols_phase.PENDING,)).fetchone()


def _tokens_as_before(catalog: Catalog, sha: str) -> features.CommitTokens:
    """The second stage's view of a commit as the search computed it before the analysed text was stored at
    index time (kept here as the reference): the whole changed lines, every context term."""
    row = catalog.message_row(sha)
    n_hunks, subject, body = row if row is not None else (0, "", "")
    lines: dict[str, list[str]] = {"add": [], "rem": [], "ctx": []}
    names: list[str] = []
    kinds = (("add", r"^\+(.*)$"), ("rem", r"^-(.*)$"), ("ctx", r"^(?!@@|[+-]).?(.*)$"))
    for path, excerpt, symbols in catalog.commit_hunk_texts(sha, 40):
        names += [path, *(s[0] for s in json.loads(symbols))]
        for kind, pattern in kinds:
            lines[kind] += re.findall(pattern, excerpt, re.M)
    return features.CommitTokens(
        n_hunks=n_hunks,
        files=tuple(catalog.commit_paths(sha)),
        counts={kind: term_counts("\n".join(lines[kind])) for kind in ("add", "rem")},
        context=term_set("\n".join(lines["ctx"])),
        names=term_set(" ".join(names)),
        changed="\n".join(lines["add"] + lines["rem"]),
        message=term_set(subject) | term_set(body),
        subject=term_set(subject),
    )


def test_stored_commit_terms_give_the_features_computed_before(phased: Path, one_pass: Path) -> None:
    """The second stage's stored text of each commit (analysed in the texts phase's processes) gives every feature the
    search computed from the catalogue's excerpts before it was stored, and what a one-process build stored;
    every commit with hunks has it."""
    catalog = Catalog.of(Store(phased))
    rows = dict(_db(phased).execute("SELECT sha, data FROM commit_terms"))
    assert set(rows) == {r[0] for r in _db(phased).execute("SELECT sha FROM commits WHERE n_hunks > 0")}
    others = dict(_db(one_pass).execute("SELECT sha, data FROM commit_terms"))
    assert {sha: commit_terms.unpack(d) for sha, d in rows.items()} == {
        sha: commit_terms.unpack(d) for sha, d in others.items()
    }
    # compressed with the index's dictionary, trained on the texts phase's first chunk (the newest commits'), and
    # so were the excerpts and bodies after the first run's first 200 commits (`packing`)
    zstd = [sha for sha, d in rows.items() if d[:4] == packing.ZSTD_MAGIC]
    assert len(rows) - texts_phase.FILL_BATCH <= len(zstd) < len(rows)
    assert set(packing.load(_db(phased))) == {"excerpts", "terms"}  # its commits have no bodies to train on
    # with paths and names: the symbols phase rewrote the names its symbols changed
    assert all(commit_terms.unpack(data).names is not None for data in rows.values())
    shas = sorted(rows)[::5]
    queries = [
        "adjust the buffer cache", "rename parse", "x * 3", "return x + 4", "static int", "cache.h",
        f"{WORDS[0]}_{WORDS[1]}_2", "remove retry_socket", "def stream", "fix the queue",
    ]  # fmt: skip
    for query in queries:
        q = features.query_info(query, lambda t: 1, 10)
        before = {sha: features.commit_text(_tokens_as_before(catalog, sha), q, messages=True) for sha in shas}
        assert features.gather(catalog, shas, q, messages=True) == before, query
    assert sum(1 for sha in shas if features.gather(catalog, [sha], q, messages=True)[sha].seen) > 10


def test_symbols_phase_matches_a_slow_sequential_read(big_repo: Path, phased: Path) -> None:
    """Symbols of a sample of commits, read one by one with no cache shared between them."""
    repo = open_repo(big_repo)
    infos = [c for c in walk(repo, head_sha(repo)) if not c.is_merge]
    db = _db(phased)
    for info in random.Random(3).sample(infos, 60):
        fresh = read_commit(open_repo(big_repo), info, PathPolicy(), with_symbols=True)
        want = {
            (f.path, i): [[s.name, s.kind, s.start, s.end] for s in h.symbols]
            for f in fresh.files
            for i, h in enumerate(f.hunks)
        }
        got = {
            (r[0], r[1]): json.loads(r[2])
            for r in db.execute(HUNKS.format("f.path, h.idx, h.symbols") + " WHERE f.sha=?", (info.sha,))
        }
        assert got == want, info.sha


QUERIES = ("parse token", "retry_socket", "cache header buffer", "rework stream")


@pytest.mark.parametrize("lane", ["diff", "symbol", "path", "message"])
def test_keyword_lanes_rank_as_one_pass(phased: Path, one_pass: Path, lane: str) -> None:
    uids = {}
    for name, index_dir in (("phased", phased), ("one_pass", one_pass)):
        index = open_index(Store(index_dir).tantivy_path, create=False)
        index.reload()
        searcher = index.searcher()
        db = _db(index_dir)
        where = {u: (s, p, i) for u, s, p, i in db.execute(HUNKS.format("h.uid, f.sha, f.path, h.idx"))}
        if lane == "message":  # the message index's, as a search ranks it
            messages = message_index.open_messages(Store(index_dir).messages_path, create=False)
            ranked = [commit_lane(message_index.search(messages, messages.searcher(), q)) for q in QUERIES]
        else:
            ranked = [search_lane(index, searcher, lane, q, None) for q in QUERIES]
        uids[name] = [[(where[u], round(score, 4)) for u, score in r] for r in ranked]
    assert uids["phased"] == uids["one_pass"]
    assert any(uids["phased"])


def test_merge_rows_are_the_ones_a_walk_reaches(big_repo: Path, phased: Path) -> None:
    """(merge, parent, path) rows: the path, in a language with symbols, differs from that parent and from every
    earlier one."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=big_repo, check=True, capture_output=True, text=True).stdout

    expected = set()
    for line in git("log", "--merges", "--format=%H %P").splitlines():
        merge, *parents = line.split()
        differing: set[str] | None = None
        for parent in parents:
            names = {
                p
                for p in git("diff", "--name-only", "--no-renames", parent, merge).split()
                if language_for_path(p) in supported_languages()
            }
            differing = names if differing is None else differing & names
            expected |= {(merge, parent, p) for p in differing}
    got = {r for r in _db(phased).execute("SELECT sha, parent, path FROM merge_paths")}
    assert len(expected) > 30
    assert got == expected
    assert not _db(phased).execute("SELECT 1 FROM merge_paths WHERE ops IS NULL").fetchone()


def test_merge_blocks_diffed_in_readers_equal_one_process(phased: Path, one_pass: Path) -> None:
    query = "SELECT sha, parent, path, ops FROM merge_paths"
    assert sorted(_db(phased).execute(query)) == sorted(_db(one_pass).execute(query))


def test_search_answers_while_symbols_wait_and_the_next_run_finishes(
    big_repo: Path, one_pass: Path, tmp_path: Path
) -> None:
    """Stopped when the symbols phase starts: keyword search already covers every commit (staged ones
    included), merges are listed, status and freshness say how many changes wait for symbols, and that the
    message lane's own index, the commits' analysed texts and the merges' diffs come after them; the next run
    does those phases in that order and the index is then the one-pass index."""
    cancel = threading.Event()
    phases: list[str] = []

    def progress(phase: str, done: int, total: int) -> None:
        phases.append(phase) if phase not in phases else None
        if phase == "symbols":
            cancel.set()

    report = index_repository(big_repo, index_dir=tmp_path, progress=progress, cancel=cancel)
    assert report.cancelled
    assert phases == ["history", "merge_paths", "symbols"]  # merges listed before the symbols, diffed last
    assert not _db(tmp_path).execute("SELECT 1 FROM merges_unlisted").fetchone()
    store = Store(tmp_path)
    assert store.staging_path.is_dir()
    with_hunks = _db(tmp_path).execute("SELECT COUNT(*) FROM commits WHERE n_hunks > 0").fetchone()[0]
    with Engine(big_repo, index_dir=tmp_path, models=ModelConfig(dense=False, reranker="none")) as engine:
        info, _allowed, _hint = engine.freshness()
        assert info["symbols_pending"] > 100
        pending = engine.status()["pending"]
        assert pending["symbols"] == info["symbols_pending"]
        assert pending["texts"] == with_hunks > 1000 and pending["merges"] > 10  # after the symbols phase
        assert pending["message_index"] == 0  # written with each batch of the history phase
        staged = {r[0] for r in _db(tmp_path).execute("SELECT DISTINCT sha FROM files WHERE parsed=-1")}
        rows = engine.search("retry socket", SearchOptions(k=50, rerank=False))["results"]
        assert {r["commit"]["sha"] for r in rows} & staged  # staged commits are found
    phases.clear()
    index_repository(big_repo, index_dir=tmp_path, progress=progress)
    assert phases == ["history", "symbols", "texts", "merges"]  # nothing left for the message index
    with Engine(big_repo, index_dir=tmp_path, models=ModelConfig(dense=False, reranker="none")) as engine:
        pending = engine.status()["pending"]
        assert pending["texts"] == pending["merges"] == pending["symbols"] == 0
    assert not store.staging_path.exists()
    query = HUNKS.format("f.sha, f.path, h.idx, h.symbols")
    assert sorted(_db(tmp_path).execute(query)) == sorted(_db(one_pass).execute(query))


def test_a_run_stopped_while_merges_are_diffed_says_so_and_the_next_finishes(
    big_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merges' phase comes last: stopped there, the run reports itself cancelled and does not record HEAD as
    indexed (a view would take it as complete and not run again); the next run diffs the rest."""
    monkeypatch.setattr(merge_diffs, "CHUNK", 5)
    cancel = threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "merges" and done:
            cancel.set()

    assert index_repository(big_repo, index_dir=tmp_path, progress=progress, cancel=cancel).cancelled
    store = Store(tmp_path)
    assert Catalog.of(store).pending_merge_diffs() > 0 and not store.get_state("indexed_head")
    assert not index_repository(big_repo, index_dir=tmp_path).cancelled
    assert Catalog.of(store).pending_merge_diffs() == 0
    assert store.get_state("indexed_head") == head_sha(open_repo(big_repo))
