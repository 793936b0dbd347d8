"""The evaluation's configurations reach the search options they name (a dropped key silently measures the
default instead, as happened once with a query-adapter switch)."""

from __future__ import annotations

import dataclasses

from backstory.evaluate import CONFIGS, options_for
from backstory.search.engine import SearchOptions

FIELDS = {f.name for f in dataclasses.fields(SearchOptions)}


def test_every_configuration_key_reaches_the_search_options() -> None:
    for name, cfg in CONFIGS.items():
        opts = options_for(cfg, rerank_top=20)
        for key, value in cfg.items():
            if key in FIELDS:
                got = getattr(opts, key)
                assert (list(got) if isinstance(value, list) else got) == value, f"{name}: {key}"
