"""Damage inside the catalogue and the Tantivy files (issue #27, items 9 and 10): every command says what is
wrong and how to fix it, in one line, never a traceback or a Rust panic, and `status` no longer says healthy.
Real index files, damaged on disk the way the probe did it, read by the real CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backstory.cli import EXIT_ERROR, EXIT_NO_RESULTS, EXIT_OK
from backstory.index import integrity
from backstory.index.store import SCHEMA_VERSION
from gitrepo import fast_history
from trials import overwrite

pytestmark = pytest.mark.timeout(300)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backstory", *args], capture_output=True, text=True, input=stdin, timeout=120
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "r"
    fast_history(path, 600, files=30)
    proc = cli("index", str(path), "--no-dense")
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.fixture
def repo(built: Path, tmp_path: Path) -> Path:
    path = tmp_path / "r"
    shutil.copytree(built, path, symlinks=True)
    return path


def _store(path: Path) -> Path:
    return path / ".git" / "backstory"


def _largest(path: Path, ext: str) -> Path:
    return max((_store(path) / "tantivy").glob(f"*.{ext}"), key=lambda p: p.stat().st_size)


def _said_cleanly(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    assert line.startswith("backstory: ") and "\n" not in line, line
    for w in words:
        assert w in line, line


def _status_says(path: Path, *words: str) -> None:
    proc = cli("status", "--json", "-C", str(path))
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == EXIT_ERROR:  # the damage was met while reading what status shows: said in one line
        _said_cleanly(proc, *words)
        return
    status = json.loads(proc.stdout)
    assert status["integrity"]["ok"] is False, status
    for w in words:
        assert w in status["hint"], status["hint"]


def test_damage_in_the_middle_of_the_catalogue(repo: Path) -> None:
    db = _store(repo) / "catalog.sqlite"
    wal = _store(repo) / "catalog.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # everything is in the main file: damage lands in data
    assert db.stat().st_size > 256 * 1024
    overwrite(db, db.stat().st_size // 2, 64 * 1024)
    _status_says(repo, "catalogue is damaged", "--rebuild")
    _said_cleanly(cli("index", str(repo), "--no-dense"), "catalogue is damaged", "`backstory index --rebuild`")
    for args in (("query", "update module 7", "--no-dense", "--json"), ("history", "pkg/mod_3.py:2")):
        proc = cli(*args, "-C", str(repo))
        assert "Traceback" not in proc.stderr, proc.stderr
        if proc.returncode not in (EXIT_OK, EXIT_NO_RESULTS):
            _said_cleanly(proc, "--rebuild")
    proc = cli("query", "--batch", "-", "--json", "--no-dense", "-C", str(repo), stdin="update module 7\nchange 12\n")
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode not in (EXIT_OK, EXIT_NO_RESULTS):
        _said_cleanly(proc, "catalogue is damaged", "--rebuild")
    proc = cli("index", str(repo), "--no-dense", "--rebuild")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(cli("status", "--json", "-C", str(repo)).stdout)["integrity"] == {"ok": True, "problems": []}


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("garble idx", "fails its checksum"),
        ("garble store", "fails its checksum"),
        ("garble term", "fails its checksum"),
        ("delete pos", "is missing"),
    ],
)
def test_damage_inside_the_tantivy_files(repo: Path, damage: str, said: str) -> None:
    verb, ext = damage.split()
    target = _largest(repo, ext)
    if verb == "delete":
        target.unlink()
    else:
        overwrite(target, target.stat().st_size // 3, min(4096, target.stat().st_size // 4))
    _status_says(repo, "Tantivy index is damaged", said, "--rebuild")
    proc = cli("query", "update module 7", "--no-dense", "--json", "-C", str(repo))
    _said_cleanly(proc, "Tantivy index is damaged", said)
    _said_cleanly(cli("index", str(repo), "--no-dense"), "Tantivy index is damaged", "`backstory index --rebuild`")
    assert cli("index", str(repo), "--no-dense", "--rebuild").returncode == 0
    proc = cli("query", "update module 7", "--no-dense", "--json", "-C", str(repo))
    assert proc.returncode == 0 and json.loads(proc.stdout)["results"], proc.stderr


def test_verified_files_are_read_once_and_a_later_change_is_still_found(repo: Path) -> None:
    """The checksum pass reads each Tantivy file once; what it remembers is (name, size, mtime), so a file
    changed afterwards (in place, same size) is read again and caught."""
    assert cli("query", "update module 7", "--no-dense", "--json", "-C", str(repo)).returncode == 0
    verified = json.loads((_store(repo) / integrity.VERIFIED).read_text())["tantivy"]
    files = integrity.tantivy_files(_store(repo) / "tantivy")
    assert sorted(verified) == sorted(files)
    target = _largest(repo, "idx")
    overwrite(target, 100, 16)
    _said_cleanly(cli("query", "update module 7", "--no-dense", "--json", "-C", str(repo)), "fails its checksum")


PREVIOUS = SCHEMA_VERSION - 1  # the layout an upgrade meets: it must be rebuilt, not read with this one's queries


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('"11"', "schema_version is '11', not a number"),
        ("3", "schema 3"),
        (str(PREVIOUS), f"schema {PREVIOUS}, not {SCHEMA_VERSION}"),
    ],
)
def test_manifest_schema_that_is_not_this_versions(repo: Path, value: str, said: str) -> None:
    manifest = _store(repo) / "manifest.json"
    data = json.loads(manifest.read_text())
    data["schema_version"] = json.loads(value)
    manifest.write_text(json.dumps(data))
    _said_cleanly(cli("index", str(repo), "--no-dense"), said, "--rebuild")
    _said_cleanly(cli("query", "update module 7", "--no-dense", "--json", "-C", str(repo)), said, "--rebuild")
    assert "11 != 11" not in cli("index", str(repo), "--no-dense").stderr
