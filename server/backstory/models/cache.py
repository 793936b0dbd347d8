"""What the model cache holds, and which of it comes from earlier versions of backstory's own model.

Each new fine-tuned patch (``models/data/minilm-bs*.npz``) writes its patched graph (~23 MB) and its optimized
variant (~22 MB) into the user cache, and nothing removes the previous patch's pair: another installed version
of backstory may still read it. ``backstory status`` reports the pair so a user can reclaim the space knowingly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .errors import ModelUnavailable
from .files import BUNDLED_NAME, bundled_model, default_cache_dir, default_model
from .finetuned import finetuned_dir
from .optimize import SUFFIX, optimized_dir

#: Folders written for backstory's own fine-tuned weights (``finetuned/<id>``, ``optimized/<id>-pc<recipe>``).
_OWN = re.compile(rf"^{re.escape(BUNDLED_NAME)}-bs\d+-[0-9a-f]{{8}}({re.escape(SUFFIX)}\d+)?$")


def cache_report(cache_dir: Path | None = None) -> dict[str, Any]:
    """Sizes of the model cache: in total, and of the folders this version no longer reads.

    A folder is *superseded* only if it holds one of backstory's own fine-tuned models and is not the current
    one; conversions of models a user configured are never judged (their directories may come back).
    """
    cache_root = cache_dir if cache_dir is not None else default_cache_dir()
    root = cache_root / "models"
    current: set[Path] = set()
    for model in (default_model, bundled_model):
        try:
            files = model()
        except ModelUnavailable:
            continue
        current |= {finetuned_dir(files, cache_root), optimized_dir(files, cache_root)}
    total = 0
    superseded: list[dict[str, Any]] = []
    for kind in ("finetuned", "optimized"):
        folder = root / kind
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not entry.is_dir():
                continue
            try:
                size = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
            except OSError:  # a folder being written or removed right now: not worth failing `status` for
                continue
            total += size
            if _OWN.match(entry.name) and entry not in current:
                superseded.append({"path": str(entry), "bytes": size})
    return {
        "dir": str(root),
        "bytes": total,
        "superseded": superseded,
        "superseded_bytes": sum(s["bytes"] for s in superseded),
    }
