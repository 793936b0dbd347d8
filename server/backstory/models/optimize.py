"""One-off conversion of the embedding model into a faster, per-channel dynamically-quantized graph.

The bundled model stores int8 weights but computes in fp32 (every MatMul first dequantizes its weights).
Letting onnxruntime fold those constants and then quantizing the folded graph dynamically with one scale
per output channel (per-tensor weight scales lose noticeably more) runs ~1.6-1.8× faster. Recipe 2 then
rewrites the activation quantizers to per-token scales (:mod:`.graph_rewrite`), so rows of a batch no
longer influence each other — the graph can be batched and run concurrently, and a text's vector is
bit-identical whatever its batch — and drops the exporter's NaN guards after each softmax. Recipe 3 also
fuses GELU and the integer matmuls' dequantization (fewer elementwise passes, ~1.3× with the session
settings of :mod:`._runtime`). Cosine to the
shipped vectors ~0.998 (recipe 1, per-tensor: ~0.993). The result is cached per source model and recipe:

    <cache>/models/optimized/<source model id>-pc<RECIPE>/model.onnx
    <cache>/models/optimized/<source model id>-pc<RECIPE>/model.json   # sha256, source, versions

Writes are atomic (temp file + ``os.replace``) and serialised between processes with a lock file; the
checksum in ``model.json`` is verified on every load, and a mismatch (corruption, partial copy, another
tool touching the file) regenerates the model. The conversion is deterministic: the same source and
onnxruntime version give the same bytes, so the model id (which hashes the result) is stable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import ModelUnavailable
from .files import (
    ONNX_NAME,
    ModelFiles,
    check_onnx,
    file_sha256,
    make_model_id,
    model_name,
)

log = logging.getLogger("backstory.models")

#: Bump when the conversion changes, so old caches are not mistaken for the new recipe.
RECIPE = 3
META_NAME = "model.json"
SUFFIX = "-pc"


def optimized_dir(source: ModelFiles, cache_dir: Path) -> Path:
    """Where the optimized variant of ``source`` lives under the cache root."""
    return cache_dir / "models" / "optimized" / f"{source.model_id}{SUFFIX}{RECIPE}"


def ensure_optimized(source: ModelFiles, cache_dir: Path) -> ModelFiles:
    """The verified optimized variant of ``source``, converting it first if the cache lacks a good copy.

    Raises whatever the conversion raises (callers fall back to ``source`` with a warning), or
    :class:`ModelUnavailable` if the fresh result does not verify.
    """
    folder = optimized_dir(source, cache_dir)
    onnx_path = ensure_cached(folder, source.model_id, RECIPE, lambda out: convert(source, out))
    _remove_older_recipes(folder)
    return _files(source, onnx_path)


def ensure_cached(folder: Path, source_id: str, recipe: int | str, build: Callable[[Path], None]) -> Path:
    """``folder/model.onnx``, made from the model ``source_id`` by ``build(path)`` unless a verified copy exists.

    Shared by every derived model in the cache (optimized, fine-tuned). Writes are atomic and serialised
    between processes; ``model.json`` records the recipe, the source and the sha256 that every load re-checks,
    so a corrupt or foreign file is rebuilt, never used.
    """
    found = verified_onnx(folder, source_id, recipe)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with _interprocess_lock(folder / ".lock"):
        found = verified_onnx(folder, source_id, recipe)  # another process may have finished while we waited
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(dir=folder, prefix=".convert-") as tmp:
            made = Path(tmp) / ONNX_NAME
            build(made)
            digest = file_sha256(made, fresh=True)
            meta: dict[str, Any] = {
                "recipe": recipe,
                "sha256": digest,
                "size": made.stat().st_size,
                "source_model_id": source_id,
                "onnx": _onnx_version(),
                "onnxruntime": _onnxruntime_version(),
            }
            meta_tmp = Path(tmp) / META_NAME
            meta_tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            # model first, then the checksum that vouches for it: a crash in between leaves a mismatch, which
            # the next load treats as "regenerate", never as a valid model.
            os.replace(made, folder / ONNX_NAME)
            os.replace(meta_tmp, folder / META_NAME)
        log.info("wrote %s (sha256 %s)", folder / ONNX_NAME, digest[:12])
        found = verified_onnx(folder, source_id, recipe)
    if found is None:
        raise ModelUnavailable(f"the model written to {folder} does not verify")
    return found


def _remove_older_recipes(folder: Path) -> None:
    """Delete this source model's conversions by older recipes (~22 MB each; nothing reads them any more).

    Newer recipes are left alone: another installed version of backstory may be using them.
    """
    prefix = folder.name[: -len(str(RECIPE))]
    for sibling in folder.parent.glob(f"{prefix}*"):
        recipe = sibling.name[len(prefix) :]
        if sibling != folder and sibling.is_dir() and recipe.isdigit() and int(recipe) < RECIPE:
            log.info("removing the optimized model of an older recipe: %s", sibling)
            shutil.rmtree(sibling, ignore_errors=True)


def verified_onnx(folder: Path, source_id: str, recipe: int | str) -> Path | None:
    """``folder/model.onnx`` if ``model.json`` matches the source and the recipe and the file's sha256 (re-read,
    not memoised) matches ``model.json``; ``None`` (logged) otherwise."""
    onnx_path = folder / ONNX_NAME
    meta_path = folder / META_NAME
    if not onnx_path.exists() and not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("not an object")
        if meta.get("recipe") != recipe or meta.get("source_model_id") != source_id:
            log.info("the model in %s was made from another source or recipe; regenerating", folder)
            return None
        if file_sha256(onnx_path, fresh=True) != meta.get("sha256"):
            log.warning("the model %s fails its checksum (corrupt?); regenerating", onnx_path)
            return None
        check_onnx(onnx_path)
    except (OSError, ValueError, ModelUnavailable) as exc:
        log.warning("the model in %s is unusable (%s); regenerating", folder, exc)
        return None
    return onnx_path


def _files(source: ModelFiles, onnx_path: Path) -> ModelFiles:
    """The optimized variant's identity: the source's name + ``-pc``, hashed over the optimized bytes."""
    digest = file_sha256(onnx_path)  # just verified (fresh) by verified_onnx, so the memo is current
    model_id = make_model_id(model_name(source.model_id) + SUFFIX, digest, file_sha256(source.tokenizer_path))
    return ModelFiles(onnx_path, source.tokenizer_path, model_id)


def convert(source: ModelFiles, target: Path) -> None:
    """Fold constants with onnxruntime, quantize per channel and rewrite (:func:`_rewrite`) into ``target``."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded = target.with_name("folded.onnx")
    options = ort.SessionOptions()
    # BASIC = constant folding + redundant-node removal, standard ops only: portable across machines,
    # unlike EXTENDED/ALL whose fused kernels may be tied to the hardware they were saved on.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    options.intra_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3
    ort.InferenceSession(str(source.onnx_path), options, providers=["CPUExecutionProvider"])
    dynamic = target.with_name("dynamic.onnx")
    with _quiet_quantizer():
        quantize_dynamic(folded, dynamic, per_channel=True, weight_type=QuantType.QInt8)
    folded.unlink()
    _rewrite(dynamic, target)
    dynamic.unlink()


def _rewrite(source: Path, target: Path) -> None:
    """Per-token activation scales, no NaN guards, fused GELU and dequantization (see :mod:`.graph_rewrite`);
    checked, then saved."""
    import onnx

    from .graph_rewrite import drop_nan_guards, fuse_gelu, integer_matmuls_to_float, per_token_activations

    model = onnx.load(str(source))
    if per_token_activations(model) == 0:
        raise ValueError("the quantized graph has no DynamicQuantizeLinear to rewrite")
    drop_nan_guards(model)
    # speed only: a graph without these patterns converts fine, just slower
    fuse_gelu(model)
    integer_matmuls_to_float(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


def _onnx_version() -> str:
    try:
        import onnx

        return str(onnx.__version__)
    except Exception:
        return "unknown"


def _onnxruntime_version() -> str:
    import onnxruntime as ort

    return str(ort.__version__)


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """The quantizer logs through the *root* logger, whose first use installs a stderr handler
    (``logging.basicConfig``) behind the application's back; a temporary NullHandler prevents that and a
    filter drops its generic "consider pre-processing" advice."""
    root = logging.getLogger()
    null = logging.NullHandler()
    hint_filter = _DropPreprocessHint()
    added_null = not root.handlers
    if added_null:
        root.addHandler(null)
    root.addFilter(hint_filter)
    try:
        yield
    finally:
        root.removeFilter(hint_filter)
        if added_null:
            root.removeHandler(null)


@contextlib.contextmanager
def _interprocess_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` so two processes do not convert the same model at once (POSIX only; elsewhere
    the atomic renames still keep the cache consistent, at worst converting twice)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
