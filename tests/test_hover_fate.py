"""The hover says what became of a definition's last change when it was reverted or fixed (issue #28)."""

from __future__ import annotations

from backstory.lsp.hover import render_markdown


def _model(consequences: list[dict]) -> dict:
    commit = {
        "sha": "a" * 40, "short_sha": "aaaaaaa", "subject": "Cache parsed settings", "body": "",
        "author": {"name": "Ada", "email": "ada@example.com"}, "date": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip
    return {
        "symbol": {"name": "load", "kind": "function", "path": "cfg.py", "start": 1, "end": 3},
        "uri": "file:///r/cfg.py", "position": {"line": 0, "character": 4}, "total": 1, "more": False,
        "commits": [{"provenance": "EXACT", "commit": commit, "hunks": [], "consequences": consequences}],
        "related": [],
    }  # fmt: skip


def test_a_reverted_last_change_is_said_first() -> None:
    by = {"sha": "b" * 40, "short_sha": "bbbbbbb"}
    text = render_markdown(_model([{"kind": "reverted", "by": by, "after_days": 21}]), links=False)
    assert "_Its last change was reverted 3 weeks later by bbbbbbb._" in text
    assert text.index("reverted 3 weeks later") < text.index("Cache parsed settings")


def test_nothing_is_said_when_nothing_happened_or_only_a_cherry_pick() -> None:
    assert "Its last change" not in render_markdown(_model([]), links=False)
    pick = [{"kind": "cherry-picked", "by": {"sha": "c" * 40, "short_sha": "ccccccc"}, "after_days": 2}]
    assert "Its last change" not in render_markdown(_model(pick), links=False)
