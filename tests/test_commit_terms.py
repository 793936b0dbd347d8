"""Each commit's analysed text, stored at index time for the second stage (`index.commit_terms`): the stored
form gives exactly what reading the catalogue's excerpts gives, for every feature, and a missing or damaged row
loses nothing (the search computes it again)."""

from __future__ import annotations

import random
import sqlite3
import threading
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from backstory.history.repo import open_repo
from backstory.index import commit_terms, symbols_phase, texts_phase
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.catalog import Catalog
from backstory.search import features
from backstory.search.engine import Engine
from backstory.search.fusion import FusedCommit
from gitrepo import GitRepo

POLL = "import time\n\ndef poll(job):\n    return job.result()\n"
QUERIES = ("use time.sleep in poll", "Back off the retry loop", "remove job.result()", "README typo", "x3 = 3.7")


def _history(tmp_path: Path) -> tuple[GitRepo, list[str]]:
    repo = GitRepo(tmp_path / "r")
    shas = [
        repo.commit("Start", {"jobs/poll.py": POLL, "README.md": "# Jobs\n\nPoll them.\n"}),
        repo.commit(
            "Back off\n\nSleep between polls, so the retry loop does not spin.",
            {"jobs/poll.py": POLL.replace("    return", "    time.sleep(1)\n    return")},
        ),
        repo.commit("Fix the README typo", {"README.md": "# Jobs\n\nPoll them, with back-off.\n"}),
        repo.commit("Drop the result call", {"jobs/poll.py": "import time\n\ndef poll(job):\n    time.sleep(1)\n"}),
        repo.commit("Versions", {f"v{i}.py": f"x{i} = 3.{i}\nx{i}b = 3.70\n" for i in range(6)}),
    ]
    return repo, shas


def _gathered(store_path: Path, shas: list[str]) -> list[dict[str, features.CommitText]]:
    db = Catalog.of(store_for(open_repo(store_path)))
    return [features.gather(db, shas, features.query_info(q, lambda t: 1, 10), messages=True) for q in QUERIES]


@pytest.mark.parametrize("no_messages", [False, True])
def test_stored_terms_give_what_the_excerpts_give(tmp_path: Path, no_messages: bool) -> None:
    repo, shas = _history(tmp_path)
    index_repository(repo.path, options=BuildOptions(no_messages=no_messages))
    store = store_for(open_repo(repo.path))
    db = Catalog.of(store)
    for sha in shas:
        n_hunks, packed = db.commit_terms(sha) or (0, None)
        assert packed is not None and n_hunks > 0
        excerpts = [text for _path, text, _symbols in db.commit_hunk_texts(sha, commit_terms.MAX_HUNKS)]
        subject, body = (db.message_row(sha) or (0, "", ""))[1:]
        stored = commit_terms.unpack(packed)
        assert stored == commit_terms.from_catalogue(db, sha)
        assert replace(stored, files=None, names=None) == commit_terms.commit_terms(excerpts, subject, body)
        assert stored.files == tuple(db.commit_paths(sha)) and stored.names
    stored = _gathered(repo.path, shas)
    assert stored[0][shas[1]].identifiers == {"time.sleep"} and "sleep" in stored[0][shas[1]].tf["add"]
    assert stored[2][shas[3]].identifiers == {"job.result"}
    assert "3.7" not in stored[4][shas[4]].identifiers  # only "3.70" and "3.0".."3.5" were written
    assert "retri" in stored[1][shas[1]].seen_message and "retri" not in stored[1][shas[1]].seen  # stemmed
    with sqlite3.connect(store.db_path) as conn:  # an index built before the rows existed: computed again
        conn.execute("DELETE FROM commit_terms")
    assert _gathered(repo.path, shas) == stored


def test_a_damaged_row_is_computed_again(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    index_repository(repo.path)
    store = store_for(open_repo(repo.path))
    before = _gathered(repo.path, shas)
    with sqlite3.connect(store.db_path) as conn:
        conn.execute("UPDATE commit_terms SET data=? WHERE sha=?", (b"not zlib", shas[1]))
        conn.execute("UPDATE commit_terms SET data=? WHERE sha=?", (zlib.compress(b"[1, 2]"), shas[2]))
        wrong = zlib.compress(b'[{"a": "x"}, {}, [], "", [], []]')  # parses, but counts are text
        conn.execute("UPDATE commit_terms SET data=? WHERE sha=?", (wrong, shas[3]))
        conn.execute("UPDATE commit_terms SET data=? WHERE sha=?", ("text, not bytes", shas[4]))
    assert _gathered(repo.path, shas) == before
    for data in (b"not zlib", wrong, zlib.compress(b'[{}, {}, [], "abc", "abcdef", []]')):
        with pytest.raises(ValueError, match="not a stored commit text"):
            commit_terms.unpack(data)


def test_only_the_first_hunks_are_analysed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {f"m{i}.py": f"x{i} = 0\n" for i in range(5)})
    sha = repo.commit("Bump all", {f"m{i}.py": f"x{i} = 1\n" for i in range(5)})
    q = features.query_info("bump", lambda t: 1, 10)
    index_repository(repo.path, options=BuildOptions(no_messages=True))
    every = features.gather(Catalog.of(store_for(open_repo(repo.path))), [sha], q)[sha]
    monkeypatch.setattr(commit_terms, "MAX_HUNKS", 2)
    index_repository(repo.path, options=BuildOptions(no_messages=True), rebuild=True)
    capped = features.gather(Catalog.of(store_for(open_repo(repo.path))), [sha], q)[sha]
    assert capped.n_hunks == every.n_hunks == 5 and len(capped.files) == 5  # counts come from the catalogue
    assert capped.length["add"] > 0 and capped.length["add"] * 5 == every.length["add"] * 2  # 2 of 5 alike hunks


def test_the_stored_words_find_every_identifier_the_whole_text_does() -> None:
    """``changed`` keeps the distinct code-like words of the changed lines: for every identifier a query can
    have (features.identifiers), verbatim() answers on it as on the whole changed text (random texts too)."""
    text = "+    frame.set_next(tb)  # set_next\n-reset_next()\n+python_requires >= 3.7\n+x = 13.7 + 3.70\n+a.b."
    added = [ln[1:] for ln in text.split("\n") if ln[0] == "+"]
    removed = [ln[1:] for ln in text.split("\n") if ln[0] == "-"]
    words = commit_terms.commit_terms([f"@@ -1 +1 @@\n{text}"], "", "").changed.split("\n")
    assert words == ["frame.set_next(tb)", "set_next", "python_requires", "3.7", "13.7", "3.70", "a.b.", "reset_next()"]
    rng = random.Random(3)
    alphabet = [
        "set",
        "_next",
        "Next",
        ".",
        "(",
        ")",
        "3",
        "7",
        " ",
        "  ",
        "\t",
        "x",
        "a",
        "B",
        "-",
        ">",
        "\u2028",
        ",",
    ]
    for _ in range(300):
        lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(1, 4))]
        excerpt = "@@ -1 +1 @@\n" + "\n".join(rng.choice("+-") + line for line in lines)
        stored = commit_terms.commit_terms([excerpt], "", "").changed
        whole = "\n".join(
            [ln[1:] for ln in excerpt.split("\n")[1:] if ln[0] == "+"]
            + [ln[1:] for ln in excerpt.split("\n")[1:] if ln[0] == "-"]
        )
        for word in features.identifiers(" ".join([*lines, "set_next", "3.7", "a.b", "setNext(", "x3"])):
            assert features.verbatim(word, stored) == features.verbatim(word, whole), (word, lines)
    for word in ("set_next", "set_next(tb)", "3.7", "13.7", "3.70", "a.b", "reset_next"):
        assert features.verbatim(word, "\n".join(words)) == features.verbatim(word, "\n".join(added + removed)), word


def test_the_stored_form_is_deterministic_and_round_trips() -> None:
    excerpt = "@@ -1,2 +1,2 @@\n def poll(job):\n-    return job.result()\n+    return job.result(timeout=5)\n"
    terms = commit_terms.commit_terms([excerpt], "Poll with a timeout", "Jobs hung forever.")
    assert commit_terms.pack(terms) == commit_terms.pack(
        commit_terms.commit_terms([excerpt], *("Poll with a timeout", "Jobs hung forever."))
    )
    assert commit_terms.unpack(commit_terms.pack(terms)) == terms
    assert terms.counts["add"]["timeout"] == 1 and "poll" in terms.context and "result" not in terms.context
    assert "hung" in terms.message and "hung" not in terms.subject


def test_the_next_run_stores_what_an_older_index_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = _history(tmp_path)
    index_repository(repo.path)
    store = store_for(open_repo(repo.path))
    with sqlite3.connect(store.db_path) as conn:
        built = dict(conn.execute("SELECT sha, data FROM commit_terms"))
        conn.execute("DELETE FROM commit_terms")  # as an index built before the rows existed
        conn.execute("DELETE FROM state WHERE key=?", (commit_terms.STATE,))
    cancel = threading.Event()
    monkeypatch.setattr(texts_phase, "FILL_BATCH", 2)
    real_pack = commit_terms.pack
    monkeypatch.setattr(commit_terms, "pack", lambda t, p=None: (cancel.set(), real_pack(t, p))[1])
    assert (
        texts_phase.fill_missing(store, Catalog.of(store), cancel) == 2
    )  # a cancelled fill keeps its first batch, newest first
    with sqlite3.connect(store.db_path) as conn:
        assert {r[0] for r in conn.execute("SELECT sha FROM commit_terms")} == set(shas[-2:])
        assert conn.execute("SELECT 1 FROM state WHERE key=?", (commit_terms.STATE,)).fetchone() is None
    monkeypatch.setattr(commit_terms, "pack", real_pack)
    engine = Engine(repo.path)
    assert engine.status(thorough=False)["pending"]["texts"] == 5  # 5 commits with hunks: 3 to store, 2 to check
    assert "store or check the analysed text of 5 commit(s)" in engine.status(thorough=False)["next"]
    seen: list[tuple[str, int, int]] = []
    index_repository(repo.path, progress=lambda *a: seen.append(a))  # nothing new to index: it stores the rest
    texts = [a for a in seen if a[0] == "texts"]
    assert texts == [("texts", 0, 5), ("texts", 2, 5), ("texts", 3, 5), ("texts", 5, 5)]  # 2 + 1 stored, 2 checked
    with sqlite3.connect(store.db_path) as conn:
        assert dict(conn.execute("SELECT sha, data FROM commit_terms")) == built
        assert conn.execute("SELECT value FROM state WHERE key=?", (commit_terms.STATE,)).fetchone() == ("2",)
    assert engine.status(thorough=False)["pending"]["texts"] == 0


def test_an_older_state_is_brought_up_to_date_without_rows_to_store(tmp_path: Path) -> None:
    """An index an older version left (its state key behind this version's) whose commits have no hunks: the
    next run still marks the rows current, so the language server may update it in its own process."""
    repo = GitRepo(tmp_path / "r")
    repo.commit("Start", {"notes.txt": "a\n"})
    repo.git("commit", "-q", "--allow-empty", "-m", "Nothing")
    index_repository(repo.path)
    store = store_for(open_repo(repo.path))
    with sqlite3.connect(store.db_path) as conn:
        conn.execute("DELETE FROM commit_terms")
        conn.execute("UPDATE commits SET n_hunks = 0")  # as if none had hunks
        conn.execute("UPDATE state SET value='1' WHERE key=?", (commit_terms.STATE,))
    assert not Catalog.of(store).commit_texts_stored()
    index_repository(repo.path)
    assert Catalog.of(store).commit_texts_stored()
    assert store.get_state(commit_terms.STATE) == commit_terms.VERSION


def test_rows_computed_in_reader_processes_are_the_ones_stored_in_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The texts phase's reader processes store the bytes one process would, chunk by chunk in order; cancelled
    after its first chunk, it keeps that chunk, stops its workers and leaves the rest for the next run."""
    repo, shas = _history(tmp_path)
    index_repository(repo.path)
    store = store_for(open_repo(repo.path))
    with sqlite3.connect(store.db_path) as conn:
        built = dict(conn.execute("SELECT sha, data FROM commit_terms"))
        conn.execute("DELETE FROM commit_terms")
    monkeypatch.setattr(texts_phase, "PARALLEL_FROM", 1)
    monkeypatch.setattr(texts_phase, "FILL_BATCH", 2)
    monkeypatch.setenv("BACKSTORY_WORKERS", "2")
    cancel = threading.Event()
    seen: list[int] = []

    def progress(_phase: str, done: int, _total: int) -> None:
        seen.append(done)
        if done:
            cancel.set()

    assert texts_phase.fill_missing(store, Catalog.of(store), cancel, progress) == 2
    assert seen == [0, 2]
    with sqlite3.connect(store.db_path) as conn:
        assert dict(conn.execute("SELECT sha, data FROM commit_terms")) == {s: built[s] for s in shas[-2:]}
    assert texts_phase.fill_missing(store, Catalog.of(store)) == len(built) - 2
    with sqlite3.connect(store.db_path) as conn:
        assert dict(conn.execute("SELECT sha, data FROM commit_terms")) == built


def test_a_long_lived_engine_sees_symbols_attached_after_it_read_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second stage caches each commit's text; symbols the symbols phase attaches later (another process)
    must reach it, as they would a new engine: the phase rewrites the names in the stored texts."""
    repo, sha = _before_the_symbols_phase(tmp_path, monkeypatch)
    engine = Engine(repo.path)
    fused = [FusedCommit(sha=sha, fused=1.0, lanes={})]

    def names() -> float:
        row = engine.candidate_features("backoff_delay", fused, {}, {})[0]
        return row[features.FEATURES.index("cover_names")]

    assert names() == 0.0 and names() == 0.0  # the second from the cache
    index_repository(repo.path)  # the symbols phase
    assert names() > 0.0
    assert (
        names()
        == Engine(repo.path).candidate_features("backoff_delay", fused, {}, {})[0][
            features.FEATURES.index("cover_names")
        ]
    )


def test_a_row_stored_before_it_held_paths_and_names_gives_the_same_features(tmp_path: Path) -> None:
    """Rows an earlier version stored (six fields: no paths, no names) stay valid: the search reads those
    commits' paths and names from the catalogue, and every feature is what a row with them gives."""
    repo, shas = _history(tmp_path)
    index_repository(repo.path)
    full = _gathered(repo.path, shas)
    store = store_for(open_repo(repo.path))
    with store.transaction() as tx:
        rows = tx.execute("SELECT sha, data FROM commit_terms").fetchall()
        for sha, data in rows:
            older = commit_terms.pack(replace(commit_terms.unpack(data), files=None, names=None))
            tx.execute("UPDATE commit_terms SET data=? WHERE sha=?", (older, sha))
    store.close()
    older_rows = dict(sqlite3.connect(store.db_path).execute("SELECT sha, data FROM commit_terms"))
    assert all(commit_terms.unpack(d).names is None and len(d) < len(dict(rows)[s]) for s, d in older_rows.items())
    assert _gathered(repo.path, shas) == full
    with store.transaction() as tx:  # as an older version leaves the state key
        store.set_state(tx, commit_terms.STATE, "1")
    with Engine(repo.path) as engine:
        assert engine.status(thorough=False)["pending"]["texts"] == 5
    seen: list[tuple[str, int, int]] = []
    index_repository(repo.path, progress=lambda *a: seen.append(a))  # completes them, once
    assert [a for a in seen if a[0] == "texts"][-1] == ("texts", 5, 5)
    assert dict(sqlite3.connect(store.db_path).execute("SELECT sha, data FROM commit_terms")) == dict(rows)
    seen.clear()
    index_repository(repo.path, progress=lambda *a: seen.append(a))
    assert not [a for a in seen if a[0] == "texts"]


def test_names_an_older_symbols_phase_left_behind_are_brought_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older version's symbols phase attaches symbols without rewriting the stored names, and sets the state
    key to its own version at the end of its run: the next run of this one checks every row."""
    repo, sha = _before_the_symbols_phase(tmp_path, monkeypatch)
    store = store_for(open_repo(repo.path))
    catalog = Catalog.of(store)

    with monkeypatch.context() as older:
        older.setattr(symbols_phase, "_rename", lambda *a: None)
        index_repository(repo.path)
    with store.transaction() as tx:  # what an older version's run ends with (its own version of the rows)
        store.set_state(tx, commit_terms.STATE, "1")
    stale = commit_terms.unpack(catalog.commit_terms(sha)[1])  # type: ignore[index]
    assert stale.names is not None and "delay" not in stale.names  # the path's terms only
    index_repository(repo.path)
    fixed = commit_terms.unpack(catalog.commit_terms(sha)[1])  # type: ignore[index]
    assert fixed == commit_terms.from_catalogue(catalog, sha) and "delay" in (fixed.names or ())


def _before_the_symbols_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[GitRepo, str]:
    """A history whose second commit changes the body of ``backoff_delay``, indexed up to the symbols phase
    (forced on), with its commits' rows stored as the ninth pass's keyword phase stored them (before the
    symbols phase: this version stores a long run's rows after it): its stored names hold the path's terms
    only until the phase attaches the symbol."""
    monkeypatch.setattr(symbols_phase, "DEFER_FROM", 1)
    repo = GitRepo(tmp_path / "r")
    code = "import time\n\n\ndef backoff_delay(n):\n    return n\n"
    repo.commit("Start", {"jobs/runner.py": code})
    sha = repo.commit("Double it", {"jobs/runner.py": code.replace("return n", "return 2 * n")})
    cancel = threading.Event()
    stop = lambda phase, _d, _t: cancel.set() if phase == "symbols" else None  # noqa: E731
    assert index_repository(repo.path, progress=stop, cancel=cancel).cancelled
    store = store_for(open_repo(repo.path))
    assert Catalog.of(store).commit_terms(sha) == (1, None)  # a long run's rows come after its symbols phase
    assert texts_phase.fill_missing(store, Catalog.of(store)) == 2
    store.close()
    return repo, sha
