"""The message lane's per-commit index (`index.message_index`): one document per indexed commit, standing for its
hunks; kept up to date by every indexing run (new commits, purges), built for an index made before it without a
rebuild, built again when an older version changed the catalogue or its files are damaged; and while it is not
current, or a search has filters, the message lane searches the main index's hunks as before."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from backstory.history.repo import open_repo
from backstory.index import message_index
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.catalog import Catalog
from backstory.index.store import Store, StoreError
from backstory.index.text_index import Filters, filter_query, open_index, search_lane
from backstory.search.engine import Engine
from backstory.search.lanes import commit_lane
from backstory.search.options import SearchOptions
from gitrepo import GitRepo

QUERIES = ("retry the connection", "cache eviction", "parse the config file", "fix logging", "docs")


def _history(path: Path, multi: bool = True) -> GitRepo:
    """Commits of one file each, or (``multi``) some touching several files and several places in a file."""
    repo = GitRepo(path)
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(30))
    repo.commit("Start the client", {"client.py": body, **({"README.md": "# Client\n"} if multi else {})})
    repo.commit("Retry the connection when it drops", {"client.py": body.replace("return 3\n", "return 33\n")})
    if multi:
        repo.commit(
            "Cache eviction for the config parser\n\nParse the config file once; evict the cache on reload.",
            {
                "client.py": body.replace("return 1\n", "return 11\n").replace("return 25\n", "return 52\n"),
                "cache.py": "def evict(cache):\n    cache.clear()\n",
                "config.py": "def parse(path):\n    return open(path).read()\n",
            },
        )
    repo.commit("Fix logging of retries", {"log.py": "import logging\n\nlog = logging.getLogger()\n"})
    repo.commit("docs: describe the retry loop", {"README.md": "# Client\n\nRetries forever.\n"})
    return repo


def _store(repo: GitRepo) -> Store:
    return store_for(open_repo(repo.path))


def _held(store: Store) -> int:
    index = message_index.open_messages(store.messages_path, create=False)
    return int(index.searcher().num_docs)


def _indexed(store: Store) -> int:
    return int(store.db.execute("SELECT COUNT(*) FROM commits WHERE state='indexed' AND n_hunks > 0").fetchone()[0])


def _lanes(repo: GitRepo, query: str, filters: Filters | None = None) -> tuple[list, list]:
    """The message lane as a search ranks it with the per-commit index (as the engine hands it over) and as the
    main index's hunks rank it."""
    with Engine(repo.path) as engine:
        index = engine._text_index()
        opts = SearchOptions(lanes=("message",), filters=filters or Filters())
        meta: dict = {"warnings": []}
        ranked, _ = engine.lanes.rankings(query, opts, meta, index, None, False, engine._message_index())
        fq = filter_query(index.schema, filters) if filters is not None else None
        hunks = search_lane(index, index.searcher(), "message", query, fq)
    return ranked.get("message", []), hunks


def test_one_document_per_commit_standing_for_its_hunks(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    assert message_index.current(store) and _held(store) == _indexed(store) == 5
    catalog = Catalog.of(store)
    index = message_index.open_messages(store.messages_path, create=False)
    hits = message_index.search(index, index.searcher(), "cache config parse retry client docs logging", 100)
    assert len(hits) == 5
    for hit in hits:
        (sha,) = {catalog.hunk_places([u])[u]["sha"] for u in hit.hunk_uids()}
        assert list(hit.hunk_uids()) == catalog.first_hunks_of([sha], 1000)[sha]  # every hunk, in order
    assert max(h.hunks for h in hits) >= 4  # the multi-file commit stands for all its hunks


def test_the_lane_ranks_as_the_hunks_did_when_a_commit_is_one_hunk(tmp_path: Path) -> None:
    """With one hunk a commit, the per-commit documents are the hunk documents' messages: the same BM25 and
    the same ranking, to the uid and the score."""
    repo = _history(tmp_path / "r", multi=False)
    index_repository(repo.path)
    found = 0
    for query in QUERIES:
        ranked, hunks = _lanes(repo, query)
        assert [u for u, _ in ranked] == [u for u, _ in hunks]
        assert [round(s, 4) for _, s in ranked] == [round(s, 4) for _, s in hunks]
        found += bool(ranked)
    assert found >= 3


def test_filters_search_the_hunks(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    ranked, hunks = _lanes(repo, "parse the config file", Filters(path_glob="config.py"))
    assert ranked == hunks and len(ranked) == 1


def test_new_commits_and_purges_keep_it_current(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    new = repo.commit("Retry with jitter", {"client.py": "def f0():\n    return 'jitter'\n"})
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 6
    ranked, _ = _lanes(repo, "jitter")
    assert {Catalog.of(store).hunk_places([u])[u]["sha"] for u, _ in ranked} == {new}
    repo.git("commit", "-q", "--amend", "-m", "Retry with random jitter")  # a purge and a new commit
    totals: list[int] = []
    index_repository(
        repo.path, progress=lambda phase, _d, total: totals.append(total) if phase == "message_index" else None
    )
    assert message_index.current(store) and _held(store) == _indexed(store) == 6
    assert set(totals) == {1}  # the purged commit's document was deleted, the new one added: no rebuild
    repo.git("reset", "-q", "--hard", "HEAD~2")  # purges only: the next hunk id does not move
    report = index_repository(
        repo.path, progress=lambda phase, _d, total: totals.append(total) if phase == "message_index" else None
    )
    assert report.purged_commits == 2 and set(totals) == {1}
    assert message_index.current(store) and _held(store) == _indexed(store) == 4
    assert _lanes(repo, "jitter")[0] == []


def test_an_index_made_before_it_gets_it_without_a_rebuild(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    _as_an_older_version_left_it(store)
    ranked, hunks = _lanes(repo, "retry the connection")
    assert ranked == hunks and ranked  # the hunk lane meanwhile
    with Engine(repo.path) as engine:
        status = engine.status(thorough=False)
        assert status["pending"]["message_index"] == 5 and "index the messages of 5 commit(s)" in status["next"]
        assert not engine.small_update_due(dense=False)  # reading every message: not in a server's process
    main_files = sorted(p.name for p in store.tantivy_path.iterdir())
    report = index_repository(repo.path)
    assert report.new_commits == 0 and sorted(p.name for p in store.tantivy_path.iterdir()) == main_files
    assert message_index.current(store) and _held(store) == 5
    with Engine(repo.path) as engine:
        assert engine.status(thorough=False)["pending"]["message_index"] == 0
        assert engine.small_update_due(dense=False)


def test_changes_an_older_version_made_are_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An older backstory keeps no message index: the commits it adds make this one not current (the hunk lane
    answers) and those it purges leave documents behind, which the next run notices by their count."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    with _older_version(monkeypatch):
        repo.commit("Retry with jitter", {"client.py": "def f0():\n    return 'jitter'\n"})
        index_repository(repo.path)
        assert not message_index.current(store)
        ranked, hunks = _lanes(repo, "jitter")
        assert ranked == hunks and ranked
        index_repository(repo.path)  # (nothing new)
        repo.git("reset", "-q", "--hard", "HEAD~3")
        index_repository(repo.path)
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 3
    assert _lanes(repo, "jitter")[0] == []


def test_a_purge_by_an_older_version_alone_makes_it_not_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reset an older version indexed adds no commit (no new hunk id), but the catalogue has fewer commits."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    with _older_version(monkeypatch):
        repo.git("reset", "-q", "--hard", "HEAD~1")
        assert index_repository(repo.path).purged_commits == 1
    assert not message_index.current(store)
    ranked, hunks = _lanes(repo, "describe the retry loop")
    assert ranked == hunks and ranked
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 4


def test_a_commit_a_killed_purge_left_is_written_once_when_reachable_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge killed before it deleted a commit's rows leaves them; if the commit is reachable again, it is
    written afresh: one run of hunk ids, which the message index's document stands for, and its paths once."""
    repo = _history(tmp_path / "r")
    tip = repo.commit("Two files at once", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    index_repository(repo.path)
    store = _store(repo)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    with monkeypatch.context() as killed:

        def die(*_a: object) -> None:
            raise KeyboardInterrupt

        killed.setattr("backstory.index.relations.purge", die)  # inside the purge's last transaction
        with pytest.raises(KeyboardInterrupt):
            index_repository(repo.path)
    catalog = Catalog.of(store)
    assert catalog.commit_state(tip) == "pending" and len(catalog.first_hunks_of([tip], 100)[tip]) == 2
    repo.git("reset", "-q", "--hard", tip)
    index_repository(repo.path)
    uids = catalog.first_hunks_of([tip], 100)[tip]
    assert len(uids) == 2 and catalog.commit_paths(tip) == ["a.py", "b.py"]
    assert message_index.current(store) and _held(store) == _indexed(store) == 6
    index = message_index.open_messages(store.messages_path, create=False)
    (hit,) = message_index.search(index, index.searcher(), "two files at once", 1)
    assert list(hit.hunk_uids()) == uids


def test_a_damaged_message_index_is_searched_around_and_built_again(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    for f in store.messages_path.iterdir():
        if f.is_file() and not f.name.endswith(".lock"):
            f.write_bytes(b"\x00garbage" * 64)
    ranked, hunks = _lanes(repo, "retry the connection")
    assert ranked == hunks and ranked
    with Engine(repo.path) as engine:
        assert engine.search("retry the connection")["results"]
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store)
    ranked, _ = _lanes(repo, "retry the connection")
    assert ranked


def test_a_segment_failing_its_checksum_is_never_written_to(tmp_path: Path) -> None:
    """Bytes changed inside a segment, its footer intact: the index still opens, and a writer deleting from it
    would make Tantivy abort the process (a panic in its merge threads). Indexing a purge and a new commit
    builds it again instead; searches meanwhile use the hunks."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    segment = max((f for f in store.messages_path.iterdir() if f.suffix in (".term", ".idx", ".store")),
                  key=lambda f: f.stat().st_size)  # fmt: skip
    data = bytearray(segment.read_bytes())
    middle = len(data) // 3
    data[middle : middle + 40] = bytes(b ^ 0xFF for b in data[middle : middle + 40])
    segment.write_bytes(bytes(data))
    assert message_index.damaged(store) and message_index.pending(store) == 5
    ranked, hunks = _lanes(repo, "retry the connection")
    assert ranked == hunks and ranked
    repo.git("reset", "-q", "--hard", "HEAD~1")  # a purge: deleting from the damaged index is not tried
    index_repository(repo.path)
    assert not message_index.damaged(store) and message_index.current(store) and _held(store) == _indexed(store)
    repo.commit("Retry with jitter", {"client.py": "def f0():\n    return 'jitter'\n"})
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 5


def test_a_message_index_failing_during_a_search_leaves_it_to_the_hunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built again by an indexer under a search, or damaged in a way only a search meets: Tantivy's error is
    not the search's; the hunks answer the lane."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)

    def damaged(*_a: object, **_k: object) -> list[message_index.MessageHit]:
        raise StoreError("the Tantivy index is damaged (test)")

    monkeypatch.setattr(message_index, "search", damaged)
    ranked, hunks = _lanes(repo, "retry the connection")
    assert ranked == hunks and ranked


def test_a_cancelled_sync_is_finished_by_the_next_run(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    _as_an_older_version_left_it(store)
    cancel = threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "message_index":
            cancel.set()

    message_index.sync(store, cancel, progress)
    assert not message_index.current(store)
    assert message_index.sync(store) == 5 and message_index.current(store)


def test_a_message_blind_index_has_none(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    store = _store(repo)
    assert not store.messages_path.exists() and not message_index.current(store)
    open_index(store.tantivy_path, create=False)  # the main index is there


def test_the_lane_cuts_a_commits_hunks_at_its_length() -> None:
    hits = [message_index.MessageHit(10, 70, 3.0), message_index.MessageHit(200, 50, 2.0)]
    ranked = commit_lane(hits, limit=100)
    assert ranked[:70] == [(u, 3.0) for u in range(10, 80)] and ranked[70:] == [(u, 2.0) for u in range(200, 230)]


@contextlib.contextmanager
def _older_version(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Indexing as a version without the message index does: it neither builds nor deletes from it."""
    with monkeypatch.context() as older:
        older.setattr(message_index, "sync", lambda *a, **k: 0)
        older.setattr(message_index, "delete", lambda *a, **k: None)
        yield


def _as_an_older_version_left_it(store: Store) -> None:
    """No message index, no state key: an index built before the message index existed."""
    import shutil

    shutil.rmtree(store.messages_path)
    with store.transaction() as db:
        db.execute("DELETE FROM state WHERE key=?", (message_index.STATE,))
