"""``backstory status``: what is indexed, what each phase still has to do, disk use, whether every part of the
store is sound, and the one next step.

The integrity check here is the thorough one (it reads every catalogue page and counts documents); searches
run only the cheap ones (file stamps, see :mod:`backstory.index.integrity`) on every open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..index import message_index
from ..index.store import StoreError

if TYPE_CHECKING:
    from .engine import Engine


def indexer_name(pid: int) -> str:
    """Names the process writing the index, for hints."""
    return f"an indexer (process {pid})" if pid > 0 else "an indexer"


def problems(engine: Engine, thorough: bool = True) -> list[str]:
    """Everything wrong with the store, each with its fix: catalogue pages (``thorough``: every page is read,
    ~0.5 s per 100 MB), Tantivy files and their document count against the catalogue's hunks, the vector file
    against the units the catalogue says it holds."""
    found: list[str] = []
    checked = engine.catalog.quick_check() if thorough else None
    if checked is not None:
        return [str(checked)]  # nothing else read from a damaged catalogue can be trusted
    try:
        searcher = engine._text_index().searcher()
    except StoreError as e:
        found.append(str(e))
    else:
        hunks, pending = engine.catalog.indexed_hunks()
        staging = engine._staging_index()
        docs = int(searcher.num_docs) + (int(staging.searcher().num_docs) if staging is not None else 0)
        if docs < hunks or (pending == 0 and docs != hunks):
            found.append(
                f"the Tantivy index holds {docs:,} hunks, the catalogue {hunks:,} (an older or foreign copy?); "
                "run `backstory index --rebuild`"
            )
    vectors = engine.dense.problem()
    if vectors is not None:
        found.append(vectors)
    return found


def status(engine: Engine, thorough: bool = True) -> dict[str, Any]:
    """``thorough``: with SQLite's check of every catalogue page (the CLI); the language server's status,
    which editors poll, checks the stamps and counts only."""
    info, _allowed, hint = engine.freshness()
    out: dict[str, Any] = {"repo": str(engine.root), "index": info, "hint": hint}
    behind = info.get("commits_behind_head")
    if engine.store.exists():
        m = engine.manifest()
        catalog = engine.catalog
        units, pending_units = catalog.unit_count(), catalog.pending_units()
        sizes = engine.store.component_sizes()
        states = catalog.states_bytes()
        found = problems(engine, thorough)
        out.update(
            options=m.get("options", {}),
            dense=m.get("dense"),
            created_at=m.get("created_at"),
            hunks=catalog.hunk_count(),
            files=units,
            skipped_files=catalog.skipped_totals(),
            size_bytes=sum(sizes.values()),
            states_bytes=states,
            disk={**sizes, "rerank_states": states},
            # bytes per catalogue table (with its indexes): read page by page, so only with the thorough check;
            # None = not measured or this SQLite cannot tell (no dbstat)
            catalogue_tables=catalog.table_sizes() if thorough else None,
            pending={
                "history": (behind or 0) if behind is not None else None,
                "interrupted": catalog.pending_commits(),
                "merges": catalog.pending_merge_diffs(),
                "unreadable_merges": catalog.unreadable_merges(),
                "symbols": catalog.pending_symbol_files(),
                "texts": catalog.pending_commit_texts(),
                "message_index": 0 if m.get("options", {}).get("no_messages") else message_index.pending(engine.store),
                "dense": pending_units,
            },
            embedded_files=units - pending_units,
            integrity={"ok": not found, "problems": found},
        )
        if found:
            out["hint"] = found[0]
    out["next"] = next_step(out)
    return out


def next_step(status: dict[str, Any]) -> str:
    """The one thing to do next, in words, for ``status``."""
    info = status["index"]
    writer = info.get("indexer_pid")
    if info.get("head") is None:
        return "commit something: the repository has no commits yet"
    if writer is not None:
        return f"wait: {indexer_name(writer)} is updating the index (search already answers from what is indexed)"
    if "pending" not in status:
        return "run `backstory index` to build the index"
    problems_found = status.get("integrity", {}).get("problems")
    if problems_found:
        return str(problems_found[0])
    pending = status["pending"]
    todo = []
    if pending.get("history"):
        todo.append(f"add the {pending['history']:,} commit(s) behind HEAD")
    if pending.get("symbols"):
        todo.append(f"attach symbols to {pending['symbols']:,} file change(s)")
    if pending.get("message_index"):
        todo.append(f"index the messages of {pending['message_index']:,} commit(s) (the message lane)")
    if pending.get("texts"):
        todo.append(f"store or check the analysed text of {pending['texts']:,} commit(s) (faster searches)")
    unreadable = pending.get("unreadable_merges") or 0
    if (pending.get("merges") or 0) > unreadable:
        todo.append(f"diff {pending['merges'] - unreadable:,} merge(s)")
    if pending.get("dense"):
        todo.append(f"embed {pending['dense']:,} file change(s)")
    if todo:
        return "run `backstory index` to " + " and ".join(todo)
    if unreadable:
        return (
            f"repair the repository: git could not read {unreadable:,} merge(s) (a missing object: `git fsck` says"
            " which); the next `backstory index` lists them"
        )
    return "nothing: the index is up to date with HEAD"
