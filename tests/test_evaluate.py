"""The evaluation's configurations reach the search options they name (a dropped key silently measures the
default instead, as happened once with a query-adapter switch)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from backstory.evaluation.evaluate import CONFIGS, main, options_for, plain_bm25
from backstory.index.build import BuildOptions, index_repository
from backstory.search import learned
from backstory.search.engine import Engine
from backstory.search.options import ModelConfig, SearchOptions
from gitrepo import GitRepo

FIELDS = {f.name for f in dataclasses.fields(SearchOptions)}


def test_every_configuration_key_reaches_the_search_options() -> None:
    for name, cfg in CONFIGS.items():
        opts = options_for(cfg, rerank_top=20)
        for key, value in cfg.items():
            if key in FIELDS:
                got = getattr(opts, key)
                assert (list(got) if isinstance(value, list) else got) == value, f"{name}: {key}"


def test_plain_bm25_reference_matches_words_as_written(repo: GitRepo, tmp_path: Path) -> None:
    """The textbook reference ranks by BM25 over raw hunk text: an exact word finds its commit, while the
    stemmed or split forms backstory's own lanes would match do not (so it stays the weaker baseline)."""
    first = repo.commit("one", {"a.py": "def parse_header(raw):\n    return raw.split(':')\n"})
    second = repo.commit("two", {"b.py": "def render(page):\n    return template.render(page)\n"})
    index_repository(repo.path, options=BuildOptions(no_messages=True), index_dir=tmp_path / "idx")
    engine = Engine(repo.path, tmp_path / "idx", ModelConfig(dense=False, reranker="none"))
    search = plain_bm25(engine)
    assert search("render the template page")[0] == second
    assert search("parse_header raw") == [first]  # the default tokenizer splits on "_" as well
    assert search("rendering") == []  # no stemming
    assert search("?? !!") == []


def test_a_broken_cross_encoder_stops_the_evaluation_before_any_work(
    repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Otherwise the engine would turn the second stage off with a warning and "fused+rerank" would quietly
    measure no rerank at all."""
    repo.commit("one", {"a.py": "x = 1\n"})
    bad = tmp_path / "ce"
    bad.mkdir()
    (bad / "model.onnx").write_bytes(b"not a graph")
    for directory in (tmp_path / "missing", bad):
        code = main([str(repo.path), "--index-dir", str(tmp_path / "idx"), "--cross-encoder", str(directory)])
        assert code == 2
        assert str(directory) in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()


def test_a_given_second_stage_orders_the_searches_and_a_broken_one_stops_the_evaluation(
    repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--second-stage-model`` is how a student embedding model is measured with a second stage fitted on its
    own scores (the bundled ones apply only to the bundled model's). An unreadable file must stop the run: the
    engine would otherwise order by the blend with a warning and "fused+rerank" would measure that."""
    repo.commit("add the parser", {"a.py": "def parse_header(raw):\n    return raw.split(':')\n"})
    repo.commit("render the page template", {"b.py": "def render(page):\n    return template.render(page)\n"})
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    for path in (tmp_path / "missing.json", bad):
        code = main([str(repo.path), "--index-dir", str(tmp_path / "idx"), "--second-stage-model", str(path)])
        assert code == 2
        assert str(path) in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()
    bundled = json.loads((Path(learned.__file__).parents[1] / "models" / "data" / "second_stage.json").read_text())
    backwards = tmp_path / "backwards.json"  # every weight negated: the right commit falls where it has rivals
    backwards.write_text(json.dumps({**bundled, "weights": [-w for w in bundled["weights"]]}))
    out = tmp_path / "report.json"
    args = ["--index-dir", str(tmp_path / "idx"), "--configs", "fused+rerank", "--out", str(out)]
    assert main([str(repo.path), *args]) == 0
    assert json.loads(out.read_text())["fused+rerank"]["R@1"] == 1.0
    assert main([str(repo.path), *args, "--second-stage-model", str(backwards)]) == 0
    assert json.loads(out.read_text())["fused+rerank"]["R@1"] < 1.0
