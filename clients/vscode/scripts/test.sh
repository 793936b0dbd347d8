#!/usr/bin/env bash
# Everything for the VS Code client: dependencies (npm ci), lint, unit tests (type-check + node --test), and
# the end-to-end test in code-server. Exits non-zero on the first failure. Called by the repository's CI.
# Set BACKSTORY_SKIP_E2E=1 to stop after the unit tests.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE/.."

step() { printf '\n== vscode: %s\n' "$*"; }
start=$SECONDS

step "npm ci"
npm ci --no-audit --no-fund --loglevel=error

step "lint"
npm run --silent lint

step "unit tests"
npm test

if [[ "${BACKSTORY_SKIP_E2E:-}" == 1 ]]; then
  step "end-to-end test skipped (BACKSTORY_SKIP_E2E=1)"
else
  step "end-to-end test (code-server)"
  "$HERE/e2e.sh"
fi
step "done in $((SECONDS - start))s"
