from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from gitrepo import GitRepo, build_sample


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep model caches out of the user's home and make runs independent of the caller's environment."""
    cache = tmp_path_factory.getbasetemp() / "backstory-cache"
    monkeypatch.setenv("BACKSTORY_CACHE_DIR", os.environ.get("BACKSTORY_TEST_CACHE", str(cache)))
    monkeypatch.delenv("BACKSTORY_INDEX_DIR", raising=False)


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "sample"
    return path, build_sample(path)
