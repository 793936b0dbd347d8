"""Query-side tokenization: change verbs ("fix", "add", ...) are left out of the code lanes' queries."""

from __future__ import annotations

from backstory.history.repo import open_repo
from backstory.index.analyzer import query_terms, without_change_verbs
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
    assert lane_paths("message", "repair fix") == {"worker.py"}  # messages keep the verbs (and match "repair")
