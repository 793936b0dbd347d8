"""Work one request may cause is bounded (issue #27, item 7): a query is searched up to MAX_QUERY_CHARS
characters, and the answer says when it was cut. Real index, real engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from backstory.index.build import index_repository
from backstory.search.engine import Engine
from backstory.search.options import MAX_QUERY_CHARS, ModelConfig, SearchOptions, bounded_query
from gitrepo import RETRY_CODE

NO_MODELS = ModelConfig(dense=False, reranker="none")


def test_bounded_query_cuts_at_a_word_and_says_so() -> None:
    short = "retry with exponential backoff"
    assert bounded_query(short) == (short, None)
    exact = "x" * MAX_QUERY_CHARS
    assert bounded_query(exact) == (exact, None)
    long = ("fetch_with_retry delay " * 10_000)[: 164 * 1024]
    cut, warning = bounded_query(long)
    assert len(cut) <= MAX_QUERY_CHARS and long.startswith(cut) and not cut.endswith("fetch_with_re")
    assert warning is not None and f"{len(long):,}" in warning and f"{len(cut):,}" in warning
    unbroken = "y" * (MAX_QUERY_CHARS * 3)  # no word boundary: cut at the limit itself
    assert bounded_query(unbroken)[0] == "y" * MAX_QUERY_CHARS
    assert bounded_query("update \udcff module") == ("update \ufffd module", None)  # argv's non-UTF-8 byte


def test_a_query_with_a_byte_that_is_not_utf8_is_searched(sample: tuple[Path, dict[str, str]]) -> None:
    path, _shas = sample
    subprocess.run([sys.executable, "-m", "backstory", "index", str(path)], check=True, capture_output=True)
    query = os.fsdecode(b"retry \xff backoff")  # what argv gives Python for that byte
    proc = subprocess.run(
        [sys.executable, "-m", "backstory", "query", query, "--json", "--no-rerank", "-C", str(path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    result = json.loads(proc.stdout)
    assert result["results"] and "dense" in result["_meta"]["lanes"], result["_meta"]  # the tokenizer read it


def test_a_164_kb_query_is_cut_and_still_finds_the_commit(sample: tuple[Path, dict[str, str]]) -> None:
    path, shas = sample
    index_repository(path)
    query = (RETRY_CODE * 400)[: 164 * 1024]
    with Engine(path, models=NO_MODELS) as engine:
        result = engine.search(query, SearchOptions(rerank=False))
        assert any("the query was cut to its first" in w for w in result["_meta"]["warnings"])
        assert len(result["query"]) <= MAX_QUERY_CHARS
        top = [r["commit"]["sha"] for r in result["results"][:2]]
        assert shas["Add retry with exponential backoff"] in top
        plain = engine.search("retry with exponential backoff", SearchOptions(rerank=False))
        assert plain["_meta"]["warnings"] == [] and plain["query"] == "retry with exponential backoff"
