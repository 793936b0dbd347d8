"""Typed server options with defaults; invalid values are reported once and replaced by the default.

Clients send options as ``initializationOptions`` and answer ``workspace/configuration`` for section
``backstory``. Both flat keys (``k``, ``hoverMax``) and nested ones (``results.count``, ``hover.enabled``) are
accepted, so VS Code settings and Neovim tables map without glue code.
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs

ALIASES = {
    "results.count": "k",
    "resultCount": "k",
    "result_count": "k",
    "hover.enabled": "hover",
    "hover.max": "hoverMax",
    "hover.prewarm": "hoverPrewarm",
    "hover_prewarm": "hoverPrewarm",
    "hover_max": "hoverMax",
    "hover.links": "hoverLinks",
    "hover_links": "hoverLinks",
    "index_dir": "indexDir",
    "index.dir": "indexDir",
    "model_path": "modelPath",
    "model.path": "modelPath",
    "recency_weight": "recencyWeight",
    "recency.weight": "recencyWeight",
    "cross_encoder_dir": "crossEncoderDir",
    "rerank.enabled": "rerank",
    "second_stage": "secondStage",
    "all_branches": "allBranches",
}


def _positive(_inst: Any, attr: attrs.Attribute[Any], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attr.name} must be >= 1")


def _weight(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"{attr.name} must be between 0 and 1")


@attrs.define(frozen=True)
class Options:
    k: int = attrs.field(default=10, validator=_positive)
    rerank: bool = True
    reranker: str = attrs.field(default="maxsim", validator=attrs.validators.in_(["maxsim", "cross-encoder", "none"]))
    crossEncoderDir: str | None = None
    # how the reranked candidates are ordered: the learned model, or rerank + 0.5 x fused (SearchOptions)
    secondStage: str = attrs.field(default="learned", validator=attrs.validators.in_(["learned", "blend"]))
    hover: bool = True
    hoverMax: int = attrs.field(default=3, validator=_positive)
    hoverPrewarm: bool = True  # compute opened documents' hovers in the background
    hoverLinks: bool = False  # command links (command: URIs) in hovers: for clients that run them (VS Code)
    indexDir: str | None = None
    modelPath: str | None = None
    exclude: list[str] = attrs.field(factory=list)
    recencyWeight: float = attrs.field(default=0.05, validator=_weight)
    dense: bool = True
    # branch scope: index every local branch too, and search them all (a request's "branch" / "allBranches" wins)
    allBranches: bool = False


attrs.resolve_types(Options)
_FIELDS = {f.name: f for f in attrs.fields(Options)}
_converter = cattrs.Converter(forbid_extra_keys=False)


def _strict(kind: type, accept: tuple[type, ...]) -> None:
    """cattrs coerces ("yes" -> True, "3" -> 3); a typo in a setting should be reported instead."""

    def hook(value: Any, _t: Any) -> Any:
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, accept):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return kind(value)

    _converter.register_structure_hook(kind, hook)


_strict(bool, (bool,))
_strict(int, (int,))
_strict(float, (int, float))
_strict(str, (str,))


def _flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[ALIASES.get(name, name)] = value
    return out


def parse_options(raw: Any) -> tuple[Options, list[str]]:
    """Options from a client payload, plus one message per ignored (invalid or unknown) value."""
    problems: list[str] = []
    if raw is None:
        return Options(), problems
    if not isinstance(raw, dict):
        return Options(), [f"Backstory options must be an object, got {type(raw).__name__}; using defaults"]
    flat = _flatten(raw.get("backstory", raw) if isinstance(raw.get("backstory"), dict) else raw)
    good: dict[str, Any] = {}
    for key, value in flat.items():
        field = _FIELDS.get(key)
        if field is None:
            continue  # unknown keys belong to the client (e.g. trace, server path)
        try:
            typed = _converter.structure(value, field.type)  # type: ignore[arg-type]
            Options(**{key: typed})  # run the field's validator
            good[key] = typed
        except Exception as e:
            problems.append(f"Backstory option {key}={value!r} is invalid ({e}); using {field.default!r}")
    return Options(**good), problems
