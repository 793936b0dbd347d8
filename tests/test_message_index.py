"""The message lane's index (`index.message_index`): one document per indexed commit, standing for its hunks,
the only place a commit's message is searched (the hunks' documents carry none). Written in step with the keyword
phase's batches, so a run stopped after one batch finds its commits by their messages; kept current by purges;
built again from the catalogue when it is missing, damaged or behind; answers filtered searches with the hunks
that pass the filters; and a search without one to read says so."""

from __future__ import annotations

import threading
from fnmatch import fnmatch
from pathlib import Path

import pytest

from backstory.history.repo import open_repo
from backstory.index import message_index, relations, symbols_phase
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.catalog import Catalog
from backstory.index.store import Store, StoreError
from backstory.index.text_index import Filters, open_index
from backstory.search.engine import Engine
from backstory.search.lanes import MESSAGES_UNAVAILABLE, commit_lane
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


def _lane(repo: GitRepo, query: str, filters: Filters | None = None) -> tuple[list, list[str]]:
    """The message lane as a search ranks it (as the engine hands the indexes over), and the search's warnings."""
    with Engine(repo.path) as engine:
        opts = SearchOptions(lanes=("message",), filters=filters or Filters())
        meta: dict = {"warnings": []}
        ranked, _ = engine.lanes.rankings(
            query, opts, meta, engine._text_index(), engine._staging_index(), False, engine._message_index()
        )
    return ranked.get("message", []), meta["warnings"]


def _places(repo: GitRepo, ranked: list) -> list[tuple[str, str]]:
    """(subject, path) of each ranked hunk."""
    with Engine(repo.path) as engine:
        places = engine.catalog.hunk_places([u for u, _ in ranked])
        subjects = {
            sha: row["subject"] for sha, row in engine.catalog.commit_rows({p["sha"] for p in places.values()}).items()
        }
        return [(subjects[places[u]["sha"]], places[u]["path"]) for u, _ in ranked]


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


def test_the_hunks_documents_carry_no_message(tmp_path: Path) -> None:
    """A word only a commit's message has is found by the message lane and by no lane of the hunk indexes."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    ranked, warnings = _lane(repo, "eviction reload")
    assert {subject for subject, _path in _places(repo, ranked)} == {"Cache eviction for the config parser"}
    assert not warnings
    index = open_index(_store(repo).tantivy_path, create=False)
    everywhere = index.parse_query("reload")  # every text field of the hunks' documents
    assert index.searcher().search(everywhere, limit=10).hits == []
    assert index.searcher().search(index.parse_query("evict"), limit=10).hits  # a word of the diff is there


def test_a_run_stopped_after_its_first_batch_finds_its_commits_by_their_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch's commits get their documents with the batch, and the batch's transaction records the index as
    current: nothing waits for the run's end (which this run never reaches)."""
    repo = _history(tmp_path / "r")
    monkeypatch.setattr("backstory.index.build.BATCH_COMMITS", 2)
    cancel = threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "history" and done > 0:
            cancel.set()

    report = index_repository(repo.path, progress=progress, cancel=cancel)
    store = _store(repo)
    assert report.cancelled and 0 < _indexed(store) < 5
    assert message_index.current(store) and _held(store) == _indexed(store)
    ranked, warnings = _lane(repo, "logging describe retry")  # the newest first
    assert {s for s, _p in _places(repo, ranked)} == {"Fix logging of retries", "docs: describe the retry loop"}
    assert not warnings


def test_filters_keep_the_commits_and_the_hunks_that_pass_them(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    ranked, _ = _lane(repo, "parse the config file", Filters(path_glob="config.py"))
    assert _places(repo, ranked) == [("Cache eviction for the config parser", "config.py")]
    ranked, _ = _lane(repo, "parse the config file cache eviction", Filters(path_glob="client.py"))
    assert _places(repo, ranked) == [("Cache eviction for the config parser", "client.py")] * 3  # its 3 hunks there
    assert _lane(repo, "parse the config file", Filters(path_glob="log.py"))[0] == []
    assert _lane(repo, "parse the config file", Filters(author="nobody"))[0] == []
    everyone, _ = _lane(repo, "retry", Filters(author="ada"))
    assert {s for s, _p in _places(repo, everyone)} == {
        "Retry the connection when it drops", "Fix logging of retries", "docs: describe the retry loop"
    }  # fmt: skip


def test_a_filtered_lane_is_the_lane_cut_to_the_hunks_that_pass(tmp_path: Path) -> None:
    """Commits of several hunks each, with commits between them the query does not find: each commit found stands
    for exactly its hunks that pass, in the unfiltered lane's order and with its scores."""
    repo = _history(tmp_path / "r")
    repo.commit("Retry the cache eviction twice", {
        "client.py": "".join(f"def f{i}():\n    return {i * 7}\n\n\n" for i in range(30)),
        "cache.py": "def evict(cache):\n    cache.clear()\n    cache.clear()\n",
    })  # fmt: skip
    index_repository(repo.path)
    query = "retry cache eviction connection"
    everything, _ = _lane(repo, query)
    for glob in ("client.py", "cache.py", "*.py"):
        kept, _ = _lane(repo, query, Filters(path_glob=glob))
        places = _places(repo, everything)
        expected = [hit for hit, (_s, path) in zip(everything, places, strict=True) if fnmatch(path, glob)]
        assert [u for u, _ in kept] == [u for u, _ in expected], glob  # (scores: the filter's constant added)
        assert len({s for s, _p in _places(repo, kept)}) >= 2, glob


def test_filters_find_hunks_still_waiting_for_their_symbols(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """During a long run's symbols phase a file's hunks are in the staging index: a filtered message lane finds
    them there."""
    monkeypatch.setattr(symbols_phase, "DEFER_FROM", 1)
    repo = _history(tmp_path / "r")
    cancel = threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "symbols":
            cancel.set()

    assert index_repository(repo.path, progress=progress, cancel=cancel).cancelled
    assert _store(repo).staging_path.is_dir()
    ranked, _ = _lane(repo, "parse the config file", Filters(path_glob="config.py"))
    assert _places(repo, ranked) == [("Cache eviction for the config parser", "config.py")]


def test_new_commits_and_purges_keep_it_current(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    new = repo.commit("Retry with jitter", {"client.py": "def f0():\n    return 'jitter'\n"})
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 6
    ranked, _ = _lane(repo, "jitter")
    assert {Catalog.of(store).hunk_places([u])[u]["sha"] for u, _ in ranked} == {new}
    repo.git("commit", "-q", "--amend", "-m", "Retry with random jitter")  # a purge and a new commit
    totals: list[int] = []
    index_repository(
        repo.path, progress=lambda phase, _d, total: totals.append(total) if phase == "message_index" else None
    )
    assert message_index.current(store) and _held(store) == _indexed(store) == 6
    assert set(totals) == {1}  # the purged commit's document deleted, the new one added at the end: no rebuild
    totals.clear()
    repo.git("reset", "-q", "--hard", "HEAD~2")  # purges only: the next hunk id does not move
    report = index_repository(
        repo.path, progress=lambda phase, _d, total: totals.append(total) if phase == "message_index" else None
    )
    assert report.purged_commits == 2 and totals == []
    assert message_index.current(store) and _held(store) == _indexed(store) == 4
    assert _lane(repo, "jitter")[0] == []


def test_a_missing_message_index_is_said_and_built_again_without_a_rebuild(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    _remove_it(store)
    ranked, warnings = _lane(repo, "retry the connection")
    assert ranked == [] and warnings == [MESSAGES_UNAVAILABLE]
    with Engine(repo.path) as engine:
        found = engine.search("retry the connection")
        assert found["results"] and MESSAGES_UNAVAILABLE in found["_meta"]["warnings"]  # the other lanes answer
        status = engine.status(thorough=False)
        assert status["pending"]["message_index"] == 5 and "index the messages of 5 commit(s)" in status["next"]
        assert not engine.small_update_due(dense=False)  # reading every message: not in a server's process
    main_files = sorted(p.name for p in store.tantivy_path.iterdir())
    report = index_repository(repo.path)
    assert report.new_commits == 0 and sorted(p.name for p in store.tantivy_path.iterdir()) == main_files
    assert message_index.current(store) and _held(store) == 5
    assert _lane(repo, "retry the connection")[1] == []
    with Engine(repo.path) as engine:
        assert engine.status(thorough=False)["pending"]["message_index"] == 0
        assert engine.small_update_due(dense=False)


def test_a_run_killed_between_the_two_commits_is_repaired_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message index committed a batch's documents, the catalogue never marked the batch indexed: searches
    find nothing through them meanwhile, and the next run writes the commits and repairs the index."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    repo.commit("Retry with jitter", {"client.py": "def f0():\n    return 'jitter'\n"})
    with monkeypatch.context() as killed:

        def die(*_a: object) -> None:
            raise KeyboardInterrupt

        killed.setattr(relations, "record", die)  # inside the batch's last transaction
        with pytest.raises(KeyboardInterrupt):
            index_repository(repo.path)
    assert _held(store) == _indexed(store) + 1 and not message_index.current(store)
    with Engine(repo.path) as engine:  # its document stands for hunks not indexed yet: no result
        assert engine.search("jitter", SearchOptions(lanes=("message",), rerank=False))["results"] == []
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 6
    assert {s for s, _p in _places(repo, _lane(repo, "jitter")[0])} == {"Retry with jitter"}


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


def test_a_damaged_message_index_is_said_and_built_again(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    for f in store.messages_path.iterdir():
        if f.is_file() and not f.name.endswith(".lock"):
            f.write_bytes(b"\x00garbage" * 64)
    assert _lane(repo, "retry the connection") == ([], [MESSAGES_UNAVAILABLE])
    with Engine(repo.path) as engine:
        assert engine.search("retry the connection")["results"]
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store)
    ranked, warnings = _lane(repo, "retry the connection")
    assert ranked and not warnings


def test_a_segment_failing_its_checksum_is_never_written_to(tmp_path: Path) -> None:
    """Bytes changed inside a segment, its footer intact: the index still opens, and a writer deleting from it
    would make Tantivy abort the process (a panic in its merge threads). Indexing a purge and a new commit
    builds it again instead; searches meanwhile leave the lane out and say so."""
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
    assert _lane(repo, "retry the connection") == ([], [MESSAGES_UNAVAILABLE])
    repo.git("reset", "-q", "--hard", "HEAD~1")  # a purge: deleting from the damaged index is not tried
    index_repository(repo.path)
    assert not message_index.damaged(store) and message_index.current(store) and _held(store) == _indexed(store)
    repo.commit("Retry with jitter", {"client.py": "def f0():\n    return 'jitter'\n"})
    index_repository(repo.path)
    assert message_index.current(store) and _held(store) == _indexed(store) == 5


def test_a_message_index_failing_during_a_search_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built again by an indexer under a search, or damaged in a way only a search meets: Tantivy's error is
    not the search's; the lane is left out and the search says why."""
    repo = _history(tmp_path / "r")
    index_repository(repo.path)

    def damaged(*_a: object, **_k: object) -> list[message_index.MessageHit]:
        raise StoreError("the Tantivy index is damaged (test)")

    monkeypatch.setattr(message_index, "search", damaged)
    assert _lane(repo, "retry the connection") == ([], [MESSAGES_UNAVAILABLE])


def test_a_cancelled_sync_is_finished_by_the_next_run(tmp_path: Path) -> None:
    repo = _history(tmp_path / "r")
    index_repository(repo.path)
    store = _store(repo)
    _remove_it(store)
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


def _remove_it(store: Store) -> None:
    """No message index, no state key (a directory deleted by hand, or a sync that began building it again)."""
    import shutil

    shutil.rmtree(store.messages_path)
    with store.transaction() as db:
        db.execute("DELETE FROM state WHERE key=?", (message_index.STATE,))
