from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from gitrepo import GitRepo, build_sample


@pytest.fixture(scope="session", autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep model caches out of the user's home and make runs independent of the caller's environment.

    Session-wide, so that servers started by module-scoped fixtures (tests/lsp/) see it too."""
    cache = tmp_path_factory.getbasetemp() / "backstory-cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BACKSTORY_CACHE_DIR", os.environ.get("BACKSTORY_TEST_CACHE", str(cache)))
        mp.delenv("BACKSTORY_INDEX_DIR", raising=False)
        yield


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "sample"
    return path, build_sample(path)
