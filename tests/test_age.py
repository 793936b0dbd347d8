"""The relative-age rule (views/age.py) against the table the VS Code and Neovim clients are tested with too."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from backstory.views.age import age_of, relative_age

TABLE = json.loads((Path(__file__).parent / "data" / "ages.json").read_text())
NOW = dt.datetime.fromisoformat(TABLE["now"]).timestamp()


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: f"{c['date']}={c['expected']}")
def test_shared_age_table(case: dict[str, str]) -> None:
    assert age_of(case["date"], NOW) == case["expected"]
    assert relative_age(dt.datetime.fromisoformat(case["date"]).timestamp(), NOW) == case["expected"]
