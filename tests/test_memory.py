"""index/memory.py against the real C library: the arena cap the language server sets before its request threads
start, read back from glibc's own ``malloc_info`` report in a fresh process (arenas exist per process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from backstory.index import memory

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
