#!/usr/bin/env bash
# End-to-end test in real VS Code (code-server 4.100.3 + headless Chromium). Installs what it needs first
# (scripts/setup-e2e.sh: fast when already installed), then runs scripts/e2e.mjs, which builds and packages
# the .vsix, and writes a screenshot, the self-test JSON lines and logs to clients/vscode/e2e-artifacts/.
# Environment: BACKSTORY_EXE (server executable, default <repo>/.venv/bin/backstory), BACKSTORY_TOOLS.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$HERE/setup-e2e.sh" >/dev/null
cd "$HERE/.."
exec node scripts/e2e.mjs "$@"
