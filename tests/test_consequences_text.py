"""The consequence line (views/consequences.py) against the table the VS Code and Neovim clients are tested with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backstory.views.consequences import consequence_line

TABLE = json.loads((Path(__file__).parent / "data" / "consequences.json").read_text())


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: c["expected"] or "none")
def test_shared_consequence_table(case: dict[str, Any]) -> None:
    assert consequence_line(case["consequences"]) == case["expected"]
