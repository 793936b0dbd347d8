#!/usr/bin/env bash
# Installs everything the VS Code end-to-end test needs, from package registries only
# (npm, Debian). Idempotent: a second run with everything in place takes about a second.
#
#   - Debian packages: chromium, ripgrep, and the headers code-server's native modules need
#   - code-server 4.100.3 (VS Code 1.100.3) into ${BACKSTORY_TOOLS:-<repo>/.tools}/code-server
#   - the extension's npm dependencies (npm ci), which include playwright-core
#
# See /work/shared/notes/client-testing.md for why it is done this way.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXT_DIR="$(cd "$HERE/.." && pwd)"
REPO="$(cd "$EXT_DIR/../.." && pwd)"
TOOLS="${BACKSTORY_TOOLS:-$REPO/.tools}"
CS_VERSION="4.100.3"
CS_PREFIX="$TOOLS/code-server"
CS_MARKER="$CS_PREFIX/.installed-$CS_VERSION"

log() { printf '[setup-e2e] %s\n' "$*" >&2; }

# 1. Debian packages ---------------------------------------------------------------------------
APT_PKGS=(build-essential pkg-config libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev ripgrep chromium git)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[[ -x /usr/bin/chromium ]] || { log "chromium is missing"; exit 1; }
[[ -x /usr/bin/rg ]] || { log "ripgrep is missing"; exit 1; }

# 2. code-server -------------------------------------------------------------------------------
if [[ ! -f "$CS_MARKER" ]]; then
  log "installing code-server $CS_VERSION into $CS_PREFIX (about a minute)"
  rm -rf "$CS_PREFIX"
  mkdir -p "$CS_PREFIX"
  (cd "$CS_PREFIX" && printf '{"name":"backstory-tools","private":true}\n' > package.json)
  npm install --prefix "$CS_PREFIX" --ignore-scripts --no-audit --no-fund --loglevel=error \
    "code-server@$CS_VERSION" >&2
  (cd "$CS_PREFIX" && npm rebuild argon2 --loglevel=error >&2)

  # @vscode/ripgrep's post-install would download rg; pre-seed its cache with Debian's rg.
  CS_TMP="$CS_PREFIX/tmp"
  mkdir -p "$CS_TMP"
  stage="$(mktemp -d)"
  cp /usr/bin/rg "$stage/rg"
  for v in 1.15.11 1.15.10 1.15.9 1.17.0; do
    mkdir -p "$CS_TMP/vscode-ripgrep-cache-$v"
    for asset in ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz ripgrep-v13.0.0-13-x86_64-unknown-linux-musl.tar.gz \
                 ripgrep-v14.1.1-x86_64-unknown-linux-musl.tar.gz; do
      tar -C "$stage" -czf "$CS_TMP/vscode-ripgrep-cache-$v/$asset" rg
    done
  done
  rm -rf "$stage"

  log "running code-server's postinstall"
  (
    cd "$CS_PREFIX/node_modules/code-server"
    export TMPDIR="$CS_TMP" npm_config_yes=true npm_config_unsafe_perm=true
    export npm_config_user_agent="npm/$(npm -v) node/$(node -v) linux x64"
    sh ./postinstall.sh >&2
  )
  "$CS_PREFIX/node_modules/.bin/code-server" --version >/dev/null
  touch "$CS_MARKER"
fi

# 3. The extension's own dependencies (incl. playwright-core) -----------------------------------
if [[ ! -d "$EXT_DIR/node_modules/playwright-core" || "$EXT_DIR/package-lock.json" -nt "$EXT_DIR/node_modules/.package-lock.json" ]]; then
  log "npm ci in $EXT_DIR"
  (cd "$EXT_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

echo "$CS_PREFIX/node_modules/.bin/code-server"
