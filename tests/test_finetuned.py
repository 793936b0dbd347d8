"""The fine-tuned default model: built from the installed base graph + the shipped weight patch, cached and
verified like the optimized model; a damaged or foreign patch is a clear ModelUnavailable, never the base."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from backstory.models import Embedder, ModelFiles, ModelUnavailable, resolve_model
from backstory.models.files import FINETUNED_NAME, FINETUNED_PATCH, bundled_model
from backstory.models.finetuned import BASE_KEY, ensure_patched, load_patch

QUERY = "retry the request with exponential backoff"
RETRY = "net/http.py\n+    for attempt in range(5):\n+        time.sleep(delay)\n+        delay *= 2"
TEXTS = ["fix typo", QUERY, RETRY, "docs: changelog for 2.1"]


def _with_patch(patch: Path) -> ModelFiles:
    files = resolve_model(cache_dir=Path("/nonexistent-backstory-cache"))
    return ModelFiles(files.onnx_path, files.tokenizer_path, files.model_id + "x", patch=patch)


def _write_patch(path: Path, base: str, tensors: dict[str, np.ndarray]) -> Path:
    np.savez(path, **{BASE_KEY: np.array(base)}, **tensors)
    return path


def test_default_model_is_the_fine_tuned_variant(tmp_path: Path) -> None:
    files = resolve_model(cache_dir=tmp_path)
    assert files.model_id.startswith(FINETUNED_NAME + "-") and files.patch == FINETUNED_PATCH
    assert files.onnx_path == bundled_model().onnx_path  # the graph is written on first use, not at resolve
    tuned = Embedder(files, optimize=False, cache_dir=tmp_path)
    base = Embedder(bundled_model(), optimize=False, cache_dir=tmp_path)
    a, b = tuned.embed(TEXTS), base.embed(TEXTS)
    cos = np.sum(a * b, axis=1)
    assert np.all(cos < 0.999) and np.all(cos > 0.3), cos  # other weights, same family of vectors
    assert tuned.model_id == f"{files.model_id}-t128" and tuned.model_id != base.model_id
    folder = tmp_path / "models" / "finetuned" / files.model_id
    made = folder / "model.onnx"
    assert made.is_file() and (folder / "model.json").is_file()
    stamp = made.stat().st_mtime_ns
    again = Embedder(files, optimize=False, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.embed(TEXTS), a)
    assert made.stat().st_mtime_ns == stamp  # verified and reused, not rebuilt


def test_fine_tuned_model_keeps_the_paraphrase_sense(tmp_path: Path) -> None:
    tuned = Embedder(cache_dir=tmp_path)
    q = tuned.embed_query(QUERY)
    retry, unrelated = tuned.embed([RETRY, "docs/changes.rst\n+Version 2.1\n+-----------\n+Released 2020"])
    assert float(q @ retry) > float(q @ unrelated) + 0.2


def test_corrupt_cached_fine_tuned_model_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    files = resolve_model(cache_dir=tmp_path)
    made = ensure_patched(files, tmp_path).onnx_path
    good = made.read_bytes()
    with open(made, "r+b") as handle:
        handle.seek(len(good) // 2)
        handle.write(b"\x00" * 64)
    os.utime(made, ns=(1, 1))  # a new stat key, as a real edit would give
    with caplog.at_level(logging.WARNING, logger="backstory.models"):
        again = ensure_patched(files, tmp_path)
    assert "fails its checksum" in caplog.text
    assert again.onnx_path.read_bytes() == good  # deterministic: the same bytes again


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncated", "damaged"),
        ("missing", "missing"),
        ("other-base", "made for another base model"),
        ("wrong-shape", "the base model's is"),
        ("unknown-name", "names tensors the base model lacks"),
        ("no-base-key", "not a backstory weight patch"),
    ],
)
def test_bad_patch_is_a_clear_error(tmp_path: Path, damage: str, message: str) -> None:
    base_sha, tensors = load_patch(FINETUNED_PATCH)
    name = sorted(tensors)[0]
    bad = tmp_path / "patch.npz"
    if damage == "truncated":
        bad.write_bytes(FINETUNED_PATCH.read_bytes()[:5000])
    elif damage == "other-base":
        _write_patch(bad, "0" * 64, {name: tensors[name]})
    elif damage == "wrong-shape":
        _write_patch(bad, base_sha, {name: tensors[name].reshape(-1)[:3]})
    elif damage == "unknown-name":
        _write_patch(bad, base_sha, {"no.such.tensor": tensors[name]})
    elif damage == "no-base-key":
        np.savez(bad, **{name: tensors[name]})
    embedder = Embedder(_with_patch(bad), cache_dir=tmp_path / "cache")
    with pytest.raises(ModelUnavailable, match=message):
        embedder.embed(["a"])
    assert not any((tmp_path / "cache").rglob("model.onnx"))  # nothing half-made is left to be trusted


def test_unwritable_cache_builds_the_model_for_this_process(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    not_a_dir = tmp_path / "cache-is-a-file"
    not_a_dir.write_text("x")
    reference = Embedder(optimize=False, cache_dir=tmp_path / "ok").embed(TEXTS[:2])
    with caplog.at_level(logging.WARNING, logger="backstory.models"):
        embedder = Embedder(optimize=False, cache_dir=not_a_dir)
        np.testing.assert_array_equal(embedder.embed(TEXTS[:2]), reference)
    assert "for this process only" in caplog.text
