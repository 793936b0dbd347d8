"""Thin pytest wrapper around the VS Code client's own tests (clients/vscode).

- the unit tests (`npm test`: type-check + node's test runner) run when the extension's node_modules exist
  (`cd clients/vscode && npm ci`), and are skipped otherwise;
- the end-to-end test in code-server (`clients/vscode/scripts/e2e.sh`) runs only with BACKSTORY_VSCODE_E2E=1,
  since clients/vscode/scripts/test.sh already runs it in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parent.parent / "clients" / "vscode"


def _run(cmd: list[str], timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=EXT, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
@pytest.mark.skipif(not (EXT / "node_modules").is_dir(), reason="run `npm ci` in clients/vscode first")
def test_vscode_unit() -> None:
    r = _run(["npm", "test"], timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "# fail 0" in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.environ.get("BACKSTORY_VSCODE_E2E") != "1", reason="set BACKSTORY_VSCODE_E2E=1")
def test_vscode_e2e() -> None:
    r = _run(["bash", "scripts/e2e.sh"], timeout=880)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-4000:]
    assert " 0 failed" in r.stdout
