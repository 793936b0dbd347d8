"""The catalogue's compressed values (`index.packing`): once an index holds enough history, excerpts, commit
bodies and analysed texts are zstd frames with dictionaries trained on its newest commits; they read back as the
zlib values they replace, in any process, the same bytes for the same history; a value whose dictionary is gone
is reported as damage."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backstory.history.repo import open_repo
from backstory.index import packing
from backstory.index.build import index_repository, store_for
from backstory.index.catalog import Catalog
from backstory.index.store import Store, StoreError
from backstory.index.values import read_excerpts
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo, fast_import

WORDS = ("retry", "cache", "parse", "token", "buffer", "socket", "config", "stream", "header", "index")


def _history(path: Path, n: int = 240, files: int = 12) -> None:
    """``n`` commits, each editing one of ``files`` Python files, with a subject and a body."""
    contents = {f: [f"def func_{f}_0():\n    return 0\n"] for f in range(files)}

    def commits() -> Iterator[tuple[str, str, bytes, str]]:
        for i in range(1, n + 1):
            f, word = i % files, WORDS[i % len(WORDS)]
            contents[f].append(f"\n\ndef {word}_{f}_{i}(value):\n    return value * {i} + {f}  # {word} {i}\n")
            message = (
                f"Change {i}: teach module {f} to {word}\n\nThe {word} path of module {f} now scales the value by "
                f"{i}, as the {WORDS[(i + 3) % len(WORDS)]} code expects.\n"
            )
            yield f"Dev {i % 5} <dev{i % 5}@example.com>", f"pkg/mod_{f}.py", "".join(contents[f]).encode(), message

    fast_import(path, commits())


def _db(index: Path) -> sqlite3.Connection:
    return sqlite3.connect(Store(index).db_path)


def _values(index: Path) -> dict[str, dict[str, bytes]]:
    db = _db(index)
    return {
        "excerpts": {  # by commit and path: the two runs of an index number files in another order than one run
            f"{sha} {path}": bytes(d)
            for sha, path, d in db.execute("SELECT f.sha, f.path, e.data FROM excerpts e JOIN files f USING (fid)")
        },
        "text": {sha: bytes(d) for sha, d in db.execute("SELECT sha, body FROM commits")},
        "terms": {sha: bytes(d) for sha, d in db.execute("SELECT sha, data FROM commit_terms")},
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _history(tmp_path / "r")
    return tmp_path / "r"


def test_a_long_enough_history_is_compressed_with_its_own_dictionaries(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every value reads back as an index built without dictionaries stored it, and searches find the same; the
    values written once the dictionaries exist are zstd frames, smaller than zlib made them. (A first run's
    analysed texts come after its dictionary is trained on them; a later run's use it.)"""
    index_repository(repo, index_dir=tmp_path / "with")
    later = GitRepo(repo)
    for i in range(40):
        later.commit(f"Teach the parser to {WORDS[i % 10]}\n\nLater work on {WORDS[(i + 1) % 10]}.", {
            f"pkg/late_{i % 4}.py": "".join(f"def {WORDS[j % 10]}_{j}(x):\n    return x + {j}\n" for j in range(i + 3))
        })  # fmt: skip
    index_repository(repo, index_dir=tmp_path / "with")
    with monkeypatch.context() as none:
        none.setattr(packing, "MIN_COMMITS", 10**9)
        index_repository(repo, index_dir=tmp_path / "without")
    assert set(packing.load(_db(tmp_path / "with"))) == set(packing.KINDS)
    assert packing.load(_db(tmp_path / "without")) == {}
    with_, without = _values(tmp_path / "with"), _values(tmp_path / "without")
    for kind in packing.KINDS:
        assert with_[kind].keys() == without[kind].keys()
        assert {k: packing.unpack(v) for k, v in with_[kind].items()} == {
            k: packing.unpack(v) for k, v in without[kind].items()
        }, kind
        framed = [v for v in with_[kind].values() if v[:4] == packing.ZSTD_MAGIC]
        assert len(framed) >= 40, kind  # at least the second run's (a first run's prelude stays zlib)
        assert not any(v[:4] == packing.ZSTD_MAGIC for v in without[kind].values())
        plain = [without[kind][k] for k, v in with_[kind].items() if v[:4] == packing.ZSTD_MAGIC]
        assert sum(map(len, framed)) < 0.9 * sum(map(len, plain)), kind
    found = []
    for index in ("with", "without"):
        with Engine(repo, tmp_path / index, ModelConfig(dense=False, reranker="none")) as engine:
            runs = [engine.search(q, SearchOptions(k=10)) for q in ("retry module 3", "scales the value", "token")]
            found.append([[(r["commit"]["sha"], [h["excerpt"] for h in r["hunks"]]) for r in run["results"]]
                          for run in runs])  # fmt: skip
    assert found[0] == found[1] and all(found[0])


def test_the_same_history_gives_the_same_bytes(repo: Path, tmp_path: Path) -> None:
    index_repository(repo, index_dir=tmp_path / "a")
    index_repository(repo, index_dir=tmp_path / "b")
    assert packing.load(_db(tmp_path / "a")) == packing.load(_db(tmp_path / "b"))
    assert _values(tmp_path / "a") == _values(tmp_path / "b")


def test_another_process_reads_the_values(repo: Path, tmp_path: Path) -> None:
    """A process that has not trained or loaded the dictionaries finds them in the catalogue it opens (at a path
    a URI would have to escape), and one that imported the store alone reads commit bodies as text."""
    index = tmp_path / "a#b %20?c"
    index_repository(repo, index_dir=index)
    code = (
        "import sys; from pathlib import Path; from backstory.index.store import Store; s = Store(Path(sys.argv[1]));"
        "bodies = [r[0] for r in s.db.execute('SELECT body FROM commits')];"  # the store alone reads them as text
        "assert all(isinstance(b, str) for b in bodies), bodies[:1];"
        "from backstory.index.values import read_excerpts;"
        "fids = [r[0] for r in s.db.execute('SELECT fid FROM excerpts')];"
        "print(sum(len(x) for v in read_excerpts(s.db, fids).values() for x in v));"
        "print(sum(len(b) for b in bodies))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(index)], capture_output=True, text=True, check=True)
    db = Store(index).db
    fids = [r[0] for r in db.execute("SELECT fid FROM excerpts")]
    excerpts = sum(len(x) for v in read_excerpts(db, fids).values() for x in v)
    bodies = sum(len(r[0]) for r in db.execute("SELECT body FROM commits"))
    assert out.stdout.split() == [str(excerpts), str(bodies)] and excerpts > 0 and bodies > 0


def test_a_value_whose_dictionary_is_gone_is_damage(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dictionaries deleted from the catalogue (and not met before by this process): the values that need
    one cannot be read, which says the catalogue is damaged and names the fix; nothing reads wrong text."""
    index_repository(repo)
    store = store_for(open_repo(repo))
    with store.transaction() as db:
        db.execute("DELETE FROM dictionaries")
    monkeypatch.setattr(packing, "_dictionaries", {})  # a fresh process that opened this catalogue only
    monkeypatch.setattr(packing, "_sources", {store.db_path})
    monkeypatch.setattr(packing, "_local", type(packing._local)())
    catalog = Catalog.of(store)
    fid = next(fid for fid, d in store.db.execute("SELECT fid, data FROM excerpts") if d[:4] == packing.ZSTD_MAGIC)
    (uid,) = store.db.execute("SELECT uid FROM hunks WHERE fid=? LIMIT 1", (fid,)).fetchone()
    with pytest.raises(StoreError, match=r"dictionary \d+, which the catalogue does not hold.*--rebuild"):
        catalog.hunk_rows([uid])
    raw = sqlite3.connect(store.db_path)  # the bodies as stored (the store's connection decompresses them)
    sha = next(sha for sha, body in raw.execute("SELECT sha, body FROM commits") if body[:4] == packing.ZSTD_MAGIC)
    with pytest.raises(ValueError, match="dictionary"):
        store.db.execute("SELECT body FROM commits WHERE sha=?", (sha,)).fetchone()


def test_values_that_are_neither_zlib_nor_zstd_are_refused() -> None:
    for junk in (b"", b"\x00garbage", packing.ZSTD_MAGIC + b"\x00\x01"):
        with pytest.raises(ValueError):
            packing.unpack(junk)


def test_a_dictionary_trained_after_a_process_opened_the_catalogue_is_found(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A language server opened the catalogue before an indexing process trained the dictionaries: a value
    naming one it has not met is read after looking the dictionary up there (at a path a URI must escape)."""
    index = tmp_path / "x#y %41?z"
    index_repository(repo, index_dir=index)
    store = Store(index)
    monkeypatch.setattr(packing, "_dictionaries", {})  # met none yet
    monkeypatch.setattr(packing, "_local", type(packing._local)())
    monkeypatch.setattr(packing, "_sources", {store.db_path.resolve()})
    framed = [fid for fid, d in store.db.execute("SELECT fid, data FROM excerpts") if d[:4] == packing.ZSTD_MAGIC]
    assert framed and all(read_excerpts(store.db, framed).values())
