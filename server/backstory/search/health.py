"""``backstory status``: what is indexed, how fresh, and whether every part of the store is sound.

The integrity check here is the thorough one (it reads every catalogue page and counts documents); searches
run only the cheap ones (file stamps, see :mod:`backstory.index.integrity`) on every open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..index.store import StoreError

if TYPE_CHECKING:
    from .engine import Engine


def problems(engine: Engine) -> list[str]:
    """Everything wrong with the store, each with its fix: catalogue pages, Tantivy files and their document
    count against the catalogue's hunks, the vector file against the units the catalogue says it holds."""
    found: list[str] = []
    checked = engine.catalog.quick_check()
    if checked is not None:
        return [str(checked)]  # nothing else read from a damaged catalogue can be trusted
    try:
        searcher = engine._text_index().searcher()
    except StoreError as e:
        found.append(str(e))
    else:
        hunks, pending = engine.catalog.indexed_hunks()
        docs = int(searcher.num_docs)
        if docs < hunks or (pending == 0 and docs != hunks):
            found.append(
                f"the Tantivy index holds {docs:,} hunks, the catalogue {hunks:,} (an older or foreign copy?); "
                "run `backstory index --rebuild`"
            )
    vectors = engine.dense.problem()
    if vectors is not None:
        found.append(vectors)
    return found


def status(engine: Engine) -> dict[str, Any]:
    info, _allowed, hint = engine.freshness()
    out: dict[str, Any] = {"repo": str(engine.root), "index": info, "hint": hint}
    if engine.store.exists():
        m = engine.manifest()
        found = problems(engine)
        out.update(
            options=m.get("options", {}),
            dense=m.get("dense"),
            created_at=m.get("created_at"),
            hunks=engine.catalog.hunk_count(),
            files=engine.catalog.unit_count(),
            skipped_files=engine.catalog.skipped_totals(),
            size_bytes=engine.store.size_bytes(),
            states_bytes=engine.catalog.states_bytes(),
            integrity={"ok": not found, "problems": found},
        )
        if found:
            out["hint"] = found[0]
    return out
