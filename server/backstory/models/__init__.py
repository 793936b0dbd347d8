"""Local models for the dense lane and the second stage: all offline, onnxruntime + tokenizers only.

Weights come from the installed packages (all-MiniLM-L6-v2 int8) or from directories the user configures;
nothing is ever downloaded. See :func:`resolve_model` for where a model is looked for, :class:`Embedder`
for vectors, and :func:`load_reranker` for the second stage.
"""

from ._runtime import SERVING_PREPACK
from .embedder import Embedder
from .errors import ModelUnavailable
from .files import ModelFiles, default_cache_dir, resolve_model
from .rerank import CrossEncoderReranker, MaxSimReranker, Reranker, load_reranker

__all__ = [
    "SERVING_PREPACK",
    "CrossEncoderReranker",
    "Embedder",
    "MaxSimReranker",
    "ModelFiles",
    "ModelUnavailable",
    "Reranker",
    "default_cache_dir",
    "load_reranker",
    "resolve_model",
]
