"""Builders for the reliability trials: branched histories, odd commits, interrupted runs and damaged files.

Everything here makes real things (git objects through git itself, real index files overwritten on disk, real
processes killed), so a test built on it fails the way a user's repository would.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gitrepo import BASE_TIME, GitRepo


def _commit_stream(
    ref: str, mark: int, parent: str | None, who: str, when: int, rel: str, data: bytes, msg: str
) -> bytes:
    out = [f"commit {ref}\n", f"mark :{mark}\n", f"author {who} {when} +0000\n", f"committer {who} {when} +0000\n"]
    body = msg.encode()
    head = "".join(out).encode() + f"data {len(body)}\n".encode() + body
    if parent is not None:
        head += f"from {parent}\n".encode()
    return head + f"M 100644 inline {rel}\ndata {len(data)}\n".encode() + data + b"\n"


def branched_history(path: Path, main: int = 300, branch: int = 400, fork_back: int = 150) -> GitRepo:
    """``main`` with ``main`` commits and branch ``B`` with ``branch`` commits forked at ``main~fork_back``.

    Main's commits talk about ``alpha<i>`` in ``core/m<i % 25>.py``; B's about ``bravo<i>`` in
    ``side/b<i % 25>.py`` (the words are unique per commit, so a search for one finds exactly its commit).
    One commit per hour; B's are newer than main's. Checked out on ``main``.
    """
    repo = GitRepo(path)
    files: dict[str, list[str]] = {}
    chunks: list[bytes] = []

    def edit(rel: str, word: str, i: int) -> bytes:
        lines = files.setdefault(rel, [])
        lines.append(f"def handle_{word}(value):\n    return value + {i}  # {word} handling\n")
        return "\n\n".join(lines).encode()

    for i in range(1, main + 1):
        rel = f"core/m{i % 25}.py"
        parent = f":{i - 1}" if i > 1 else None
        msg = f"Main change {i}: alpha{i}\n"
        who = "Ada <ada@example.com>"
        chunks.append(
            _commit_stream("refs/heads/main", i, parent, who, BASE_TIME + i * 3600, rel, edit(rel, f"alpha{i}", i), msg)
        )
    fork = main - fork_back  # B's files live in side/, which main never touches
    for j in range(1, branch + 1):
        rel = f"side/b{j % 25}.py"
        parent = f":{fork}" if j == 1 else f":{main + j - 1}"
        msg = f"Branch change {j}: bravo{j}\n"
        when = BASE_TIME + (main + j) * 3600
        who = "Bob <bob@example.com>"
        chunks.append(_commit_stream("refs/heads/B", main + j, parent, who, when, rel, edit(rel, f"bravo{j}", j), msg))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=b"".join(chunks), check=True)
    repo.git("checkout", "-q", "-f", "main")
    return repo


def rev_list(repo: GitRepo, *args: str) -> list[str]:
    return repo.git("rev-list", *args, "--").split()


def _stopped(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True  # gone
    return fields[0] in ("T", "t", "Z", "X")


def kill_when(
    args: list[str], condition: Callable[[sqlite3.Connection], bool], db_path: Path, env: dict[str, str]
) -> None:
    """Run ``python -m backstory *args`` and kill -9 it at the first moment ``condition`` holds on its catalogue.

    The writer is frozen (SIGSTOP) while the catalogue is examined and killed frozen, so the kill lands exactly
    in a state the condition saw, not a few writes later; otherwise it continues (SIGCONT).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "backstory", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
    )  # fmt: skip
    deadline = time.monotonic() + 200
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            os.kill(proc.pid, signal.SIGSTOP)
            while not _stopped(proc.pid):
                time.sleep(0.001)
            try:
                with sqlite3.connect(db_path, timeout=1) as db:
                    hit = condition(db)
            except sqlite3.OperationalError:
                hit = False
            if hit:
                os.kill(proc.pid, signal.SIGKILL)
                break
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.01)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"


def overwrite(path: Path, offset: int, size: int, byte: int = 0xA5) -> None:
    """Overwrite ``size`` bytes of ``path`` at ``offset`` in place (the file keeps its length)."""
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(bytes([byte]) * size)


def raw_commit(repo: GitRepo, files: dict[str, str], message: str, author: str, committer: str | None = None) -> str:
    """Commit ``files`` on the current branch with identity lines written verbatim (``Name <mail> TIME ±HHMM``):
    git accepts offsets of ±24 h and more and times past year 9999 in objects (``git log`` shows them) that
    ``git commit`` would not write, so the commit object is written as is (``hash-object --literally``)."""
    for rel, text in files.items():
        repo.write(rel, text)
    repo.git("add", "-A")
    tree = repo.git("write-tree").strip()
    parent = repo.git("rev-parse", "-q", "--verify", "HEAD", check=False).strip()
    lines = [f"tree {tree}"] + ([f"parent {parent}"] if parent else [])
    lines += [f"author {author}", f"committer {committer or author}", "", message, ""]
    proc = subprocess.run(
        ["git", "hash-object", "-t", "commit", "--literally", "-w", "--stdin"], cwd=repo.path,
        input="\n".join(lines).encode(), capture_output=True, check=True,
    )  # fmt: skip
    sha = proc.stdout.decode().strip()
    repo.git("update-ref", "HEAD", sha)
    return sha


WORDS = [
    "request",
    "response",
    "session",
    "cookie",
    "header",
    "token",
    "parse",
    "render",
    "template",
    "route",
    "handler",
    "config",
    "loader",
    "signal",
    "context",
    "stream",
    "buffer",
    "encode",
    "decode",
    "retry",
    "timeout",
    "cache",
    "expire",
    "secret",
    "sign",
    "verify",
    "json",
    "form",
    "upload",
    "field",
    "error",
    "debug",
    "logger",
    "path",
    "blueprint",
    "static",
    "redirect",
    "abort",
    "status",
    "method",
    "query",
    "argument",
    "default",
    "value",
]


def wordy_history(path: Path, n: int) -> None:
    """``n`` commits, each adding a Python file whose docstring has 30 distinct words (git fast-import): units
    with some fifty content tokens each, so a codec's fit spans several embedding batches."""
    from gitrepo import fast_import

    def commit(i: int) -> tuple[str, str, bytes, str]:
        doc = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(30))
        data = f'def func_{i}(value):\n    """{doc}"""\n    return value * {i}\n'.encode()
        return "Dev <dev@example.com>", f"pkg/mod_{i}.py", data, f"Change {i}\n"

    fast_import(path, (commit(i) for i in range(1, n + 1)))
