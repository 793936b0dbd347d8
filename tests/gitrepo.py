"""Build real git repositories with known histories for tests (the git CLI; fixed dates and authors)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

BASE_TIME = 1_700_000_000  # 2023-11-14


class GitRepo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.n = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Test")
        self.git("config", "user.email", "test@example.com")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        full_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path), **(env or {})}
        out = subprocess.run(["git", *args], cwd=self.path, env=full_env, check=check, capture_output=True)
        return out.stdout.decode("utf-8", "replace")

    def write(self, rel: str, content: str | bytes | None) -> None:
        p = self.path / rel
        if content is None:
            if p.exists():
                p.unlink()
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            p.write_text(content, encoding="utf-8")
        else:
            p.write_bytes(content)

    def commit(
        self,
        message: str,
        files: dict[str, str | bytes | None] | None = None,
        *,
        author: str = "Ada Lovelace <ada@example.com>",
        days: float | None = None,
    ) -> str:
        """Write ``files`` (None deletes), commit everything; dates advance one day per commit unless given."""
        for rel, content in (files or {}).items():
            self.write(rel, content)
        self.git("add", "-A")
        self.n += 1
        when = BASE_TIME + int((days if days is not None else self.n) * 86400)
        name, _, email = author.partition(" <")
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email.rstrip(">"),
            "GIT_AUTHOR_DATE": f"{when} +0000",
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email.rstrip(">"),
            "GIT_COMMITTER_DATE": f"{when} +0000",
        }
        self.git("commit", "-q", "--allow-empty", "-m", message, env=env)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()


RETRY_CODE = '''import time


def fetch_with_retry(url, attempts=5):
    """Fetch a URL, retrying failures with exponential backoff."""
    delay = 0.5
    for attempt in range(attempts):
        try:
            return http_get(url)
        except ConnectionError:
            time.sleep(delay)
            delay *= 2
    raise RuntimeError("giving up on " + url)
'''

DATES_CODE = """import datetime


def format_timestamp(ts):
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def parse_day(text):
    return datetime.datetime.strptime(text, "%Y-%m-%d")
"""

LOG_CODE = """import logging


def configure_logging(level="INFO"):
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s")
    return logging.getLogger("app")
"""

CACHE_CODE = """class LruCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = {}

    def get(self, key):
        value = self.items.pop(key)
        self.items[key] = value
        return value
"""


def build_sample(path: Path) -> dict[str, str]:
    """A small project with one retry-with-backoff commit among decoys; returns subject -> sha."""
    repo = GitRepo(path)
    shas: dict[str, str] = {}
    shas["Initial project layout"] = repo.commit(
        "Initial project layout", {"README.md": "# demo\n", "src/app/__init__.py": ""}
    )
    shas["Add date formatting helpers"] = repo.commit(
        "Add date formatting helpers", {"src/app/dates.py": DATES_CODE}, author="Bob Builder <bob@example.com>"
    )
    shas["Configure logging"] = repo.commit("Configure logging", {"src/app/log.py": LOG_CODE})
    shas["Add retry with exponential backoff"] = repo.commit(
        "Add retry with exponential backoff",
        {"src/app/net.py": RETRY_CODE},
        author="Grace Hopper <grace@example.com>",
    )
    shas["Add an LRU cache"] = repo.commit(
        "Add an LRU cache", {"src/app/cache.py": CACHE_CODE}, author="Bob Builder <bob@example.com>"
    )
    shas["Log the retry attempts"] = repo.commit(
        "Log the retry attempts",
        {
            "src/app/net.py": RETRY_CODE.replace(
                "            time.sleep(delay)\n",
                "            log.warning('retrying %s', url)\n            time.sleep(delay)\n",
            )
        },
    )
    return shas


def fast_import(path: Path, commits: Iterable[tuple[str, str, bytes, str]]) -> None:
    """A linear history on ``main`` from (author name/email key, path, file bytes, message) per commit, one commit
    per hour from BASE_TIME (git fast-import: thousands of commits per second)."""
    repo = GitRepo(path)
    lines = []
    for i, (who, rel, data, message) in enumerate(commits, start=1):
        when = BASE_TIME + i * 3600
        lines.append(b"commit refs/heads/main\n")
        lines.append(f"mark :{i}\n".encode())
        lines.append(f"author {who} {when} +0000\n".encode())
        lines.append(f"committer {who} {when} +0000\n".encode())
        msg = message.encode()
        lines.append(f"data {len(msg)}\n".encode() + msg)
        if i > 1:
            lines.append(f"from :{i - 1}\n".encode())
        lines.append(f"M 100644 inline {rel}\ndata {len(data)}\n".encode() + data + b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo.path, input=b"".join(lines), check=True)
    repo.git("checkout", "-q", "-f", "main")


def fast_history(path: Path, n: int, files: int = 20) -> None:
    """A repository with ``n`` commits, each editing one of ``files`` Python files (git fast-import: fast)."""
    contents = {f: [f"def func_{f}_0():\n    return 0\n"] for f in range(files)}

    def commits() -> Iterator[tuple[str, str, bytes, str]]:
        for i in range(1, n + 1):
            f = i % files
            contents[f].append(f"\n\ndef func_{f}_{i}(value):\n    return value * {i} + {f}  # change {i}\n")
            who = f"Dev {i % 7} <dev{i % 7}@example.com>"
            yield who, f"pkg/mod_{f}.py", "".join(contents[f]).encode(), f"Change {i}: update module {f}\n"

    fast_import(path, commits())


def kill_dense_phase(path: Path, after_units: int) -> int:
    """Run `backstory index` on ``path`` (history already indexed) and kill -9 it once at least ``after_units``
    file units are marked embedded; returns how many were marked when it died (the vector file is saved after
    every batch of 64, BACKSTORY_DENSE_SAVE_SECONDS=0, so the kill lands between real writes)."""
    db_path = path / ".git" / "backstory" / "catalog.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "backstory", "index", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "BACKSTORY_DENSE_SAVE_SECONDS": "0", "BACKSTORY_DENSE_BATCH": "64"},
    )  # fmt: skip
    deadline = time.monotonic() + 200
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        with sqlite3.connect(db_path, timeout=5) as db:
            done = db.execute("SELECT COUNT(*) FROM files WHERE embedded=1").fetchone()[0]
        if done >= after_units:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the dense phase finished before it could be killed"
    return int(done)


def merge_missing_a_tree(repo: GitRepo) -> tuple[str, list[str], Path, Path]:
    """A merge git cannot read: ``src/app.py`` edited on two branches and merged, then the merge's ``src`` tree
    (in no parent: it holds both edits) moved out of the object store. Returns the merge, its parents, the
    object's path and where it went (rename it back to repair the repository)."""
    code = "def a():\n    return {}\n\n\ndef b():\n    return {}\n"
    repo.commit("Add code", {"src/app.py": code.format(1, 2)})
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("Side: a returns 10", {"src/app.py": code.format(10, 2)})
    repo.git("checkout", "-q", "main")
    repo.commit("Main: b returns 20", {"src/app.py": code.format(1, 20)})
    repo.git("merge", "-q", "--no-ff", "-m", "Merge side", "side")
    merge, parents = repo.head(), repo.git("rev-parse", "HEAD^1", "HEAD^2").split()
    tree = repo.git("rev-parse", "HEAD:src").strip()
    loose = repo.path / ".git" / "objects" / tree[:2] / tree[2:]
    away = loose.with_name(loose.name + ".away")
    loose.rename(away)
    return merge, parents, loose, away
