"""The student-speed benchmark's graph cuts, on the real fine-tuned model: a cut after every layer is the whole
graph, a shorter cut runs and gives the model's width, and the command prints a row per cut."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from backstory.evaluation import student_speed
from backstory.models import Embedder, resolve_model
from backstory.models._runtime import make_session

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cache = tmp_path_factory.mktemp("models")
    embedder = Embedder(resolve_model(None, cache_dir=cache), cache_dir=cache)
    embedder.embed_query("warm up")
    return embedder._load().files.onnx_path, cache


def _run(path: Path) -> np.ndarray:
    session = make_session(path, 1)
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    names = {i.name for i in session.get_inputs()}
    return np.asarray(session.run(None, {k: v for k, v in feeds.items() if k in names})[0])


def test_a_cut_after_the_last_layer_is_the_whole_model(graph, tmp_path) -> None:
    source, _cache = graph
    layers = len(student_speed.layer_outputs(onnx.load(str(source)).graph))
    assert layers == 6
    whole = _run(source)
    assert np.array_equal(_run(student_speed.cut(source, layers, tmp_path / "all.onnx")), whole)
    two = _run(student_speed.cut(source, 2, tmp_path / "two.onnx"))
    assert two.shape == whole.shape and not np.allclose(two, whole)
    with pytest.raises(ValueError, match="has 6 layers"):
        student_speed.cut(source, 7, tmp_path / "seven.onnx")


def test_the_command_prints_a_row_per_cut(graph, capsys) -> None:
    _source, cache = graph
    args = ["--layers", "2", "--texts", "4", "--rounds", "1", "--cache-dir", str(cache)]
    assert student_speed.main(args) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["6", "2"] and float(rows[0][2]) == 1.0
