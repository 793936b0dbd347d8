"""index/memory.py against the real C library: the arena cap the language server sets before its request threads
start, read back from glibc's own ``malloc_info`` report in a fresh process (arenas exist per process)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref

import pytest

from backstory.history.repo import SERVING_DELTA_CACHE
from backstory.index import memory
from backstory.search.engine import Engine
from gitrepo import GitRepo

PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, os, re, sys, tempfile, threading
    from backstory.index import memory
    if sys.argv[1] == "limit":
        assert memory.limit_arenas(2)
    def churn():
        keep = []
        for i in range(20000):
            keep.append(bytes(600 + i % 400))  # above pymalloc's 512 bytes: each is a malloc
            if len(keep) > 500:
                keep.clear()
    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.fopen.restype = ctypes.c_void_p
    path = tempfile.mktemp()
    fp = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(len(re.findall(r'<heap nr=', open(path).read())))
    os.unlink(path)
    """
)


def _heaps(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1])


@pytest.mark.skipif(memory._libc() is None or not hasattr(memory._libc(), "malloc_info"), reason="glibc only")
def test_the_arena_cap_holds_while_threads_allocate() -> None:
    limited = _heaps("limit")
    assert 1 <= limited <= 2
    assert limited <= _heaps("default")


def test_frozen_heap_leaves_the_collector_as_it_found_it() -> None:
    """Inside: what existed is out of the collector's passes and young passes are rarer; after (an exception
    included), the collector is as before, and what was frozen is still freed when its last reference goes."""
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    kept: list[object] = [[i] for i in range(1000)]
    with pytest.raises(KeyError), memory.frozen_heap():
        assert gc.get_freeze_count() >= len(kept)
        assert gc.get_threshold()[0] == max(before[0], memory.YOUNG_COLLECTION)
        raise KeyError("stop")
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    probe = weakref.ref(gc_probe := _Probe())
    with memory.frozen_heap():
        del gc_probe
    assert probe() is None
    outer = memory.frozen_heap()  # two repositories indexing at once: the first to end leaves the freeze on
    inner = memory.frozen_heap()
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)
    assert gc.get_freeze_count() > 0 and gc.get_threshold()[0] == max(before[0], memory.YOUNG_COLLECTION)
    inner.__exit__(None, None, None)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


class _Probe:
    pass


@pytest.mark.parametrize("configured", [None, "1m", "0"])
def test_the_engine_bounds_dulwichs_delta_cache_unless_the_repository_sets_one(
    repo: GitRepo, configured: str | None
) -> None:
    """A long-lived reader (the language server's engine) caps each pack's cache of resolved delta bases (dulwich
    sizes it for one command: 96 MiB a pack); a ``core.deltaBaseCacheLimit`` the repository sets is kept (0 is
    "unset" to dulwich)."""
    for i in range(3):
        repo.write("a.txt", "".join(f"line {j} of version {i}\n" for j in range(200)))
        repo.commit(f"version {i}")
    repo.git("gc", "-q")  # the objects in a pack, deltified
    if configured:
        repo.git("config", "core.deltaBaseCacheLimit", configured)
    engine = Engine(repo.path)
    store = engine.repo.object_store
    assert store.packs and all(len(pack) for pack in store.packs)
    caches = [pack.data._offset_cache for pack in store.packs]
    assert {c._max_size for c in caches} == {1 << 20 if configured == "1m" else SERVING_DELTA_CACHE}  # 0: unset
    engine.close()


def test_releasing_one_repositorys_libgit2_handle_leaves_the_others(tmp_path) -> None:
    from backstory.history import libgit, reader
    from backstory.history.repo import open_repo

    repos = []
    for name in ("one", "two"):
        repo = GitRepo(tmp_path / name)
        repo.commit("Initial", {"a.py": "x = 1\n"})
        repos.append(open_repo(repo.path))
    one, two = repos
    handle = libgit.of(one)
    assert libgit.of(one) is handle and libgit.of(two) is not handle
    state = reader.reading(one)
    libgit.release(one)
    reader.forget(one)
    assert not libgit.is_open(one) and libgit.is_open(two)  # a multi-root server's other repository keeps its own
    assert libgit.of(one) is not handle  # opened again on demand
    assert reader.reading(one) is not state
