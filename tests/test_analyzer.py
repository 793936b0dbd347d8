"""Tokenization: change verbs ("fix", "add", ...) are left out of the code lanes' queries; counting terms word by
word gives what analysing the whole text gives."""

from __future__ import annotations

from collections import Counter

import pytest

from backstory.history.repo import open_repo
from backstory.index import analyzer, message_index
from backstory.index.analyzer import analyze, query_terms, term_counts, term_set, without_change_verbs
from backstory.index.build import BuildOptions, index_repository, store_for
from backstory.index.text_index import open_index, search_lane
from gitrepo import GitRepo


def test_change_verbs_are_dropped_unless_nothing_else_remains() -> None:
    assert without_change_verbs("Fix the cache lookup") == "the cache lookup"
    assert without_change_verbs("Use a lock; removed: the global") == "a lock; the global"
    assert without_change_verbs("Updated.") == "Updated."  # nothing else: kept
    assert without_change_verbs("add_url_rule fixes") == "add_url_rule"  # identifiers are not verbs
    assert "fix" not in query_terms("Fix cache", drop_change_verbs=True)
    assert "fix" in query_terms("Fix cache")


def test_code_lanes_ignore_change_verbs_the_message_lane_keeps_them(tmp_path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.commit("Repair the worker", {"worker.py": "def fix():\n    return fix_everything()\n"})
    repo.commit("Keep results around", {"cache.py": "cache = {}\n"})
    index_repository(repo.path, options=BuildOptions(symbols=False))
    store = store_for(open_repo(repo.path))
    index = open_index(store.tantivy_path, create=False)
    path_of = dict(store.db.execute("SELECT h.uid, f.path FROM hunks h JOIN files f ON f.fid = h.fid"))

    def lane_paths(lane: str, text: str) -> set[str]:
        return {path_of[uid] for uid, _score in search_lane(index, index.searcher(), lane, text, None)}

    assert lane_paths("diff", "fix cache") == {"cache.py"}  # "fix" says what kind of change, not where
    assert lane_paths("diff", "fix") == {"worker.py"}  # a query of only verbs still searches for them
    messages = message_index.open_messages(store.messages_path, create=False)
    found = message_index.search(messages, messages.searcher(), "repair fix")
    assert {path_of[u] for hit in found for u in hit.hunk_uids()} == {"worker.py"}  # messages keep the verbs


def test_term_counts_and_sets_equal_the_whole_texts_analysis() -> None:
    text = (
        "+static int parseHTTPResponse2(struct strbuf *sb) /* the the THE */\n"
        "-\tif (MAX_RETRY_COUNT > 3.7.1) return -1; // version 13.70 and 3.7\n"
        " getUserName get_user_name getusername running runs ran 0x1F " + "a" * 45 + " " + "Ab" * 30 + "\n"
        "É unicode naïve café __init__ _private x86_64 _ __ 1234 1.2 v2.0.1\n"
    )
    assert term_counts(text) == Counter(analyze(text))
    assert term_set(text) == frozenset(analyze(text))
    head, tail = text.split("\n", 1)
    assert term_set(head) | term_set(tail) == term_set(text)  # a newline always separates words
    assert term_counts(text + text)["pars"] == 2 * Counter(analyze(text))["pars"] > 0
    assert term_counts("") == Counter()
    analyzer._TERMS.clear()  # every word unknown: learnt in one batch, still equal
    assert term_counts(text) == Counter(analyze(text)) and len(analyzer._TERMS) > 20


def test_word_table_is_emptied_at_its_bound_and_answers_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analyzer, "_TERMS_MAX", 8)
    analyzer._TERMS.clear()
    text = " ".join(f"getValue{i} the running_total{i}" for i in range(12))
    assert term_counts(text) == Counter(analyze(text))  # more distinct words than the bound: all learnt at once
    assert term_set("alpha beta") == frozenset(analyze("alpha beta")) and len(analyzer._TERMS) == 2  # emptied
