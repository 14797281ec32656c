#!/usr/bin/env bash
# Install what the local backend starts for each instance: JupyterLab (PyPI, its own virtualenv),
# an sshd (Debian's openssh-server) and code-server 4.100.3 (npm registry).
#
# Idempotent and fast when everything is in place: each step checks a stamp or a binary first.
# Usage: scripts/local-deps.sh [jupyter] [sshd] [code-server]   (default: all three)
#
# code-server: a plain `npm install code-server` fails on this kind of machine (the newest release
# wants Node 24, and every release's install script downloads ripgrep from a host we cannot reach),
# so we install 4.100.3 (the newest that accepts Node 20) with --ignore-scripts and do the steps of
# its post-install script by hand. See shared/notes/real-components.md.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEPS="${LOCAL_DEPS_DIR:-$ROOT/var/local-deps}"
PYTHON="${PYTHON:-python3}"
[ -n "$PYTHON" ] || PYTHON=python3
CODE_SERVER_VERSION="4.100.3"
mkdir -p "$DEPS"

STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(jupyter sshd code-server)

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "apt: installing ${missing[*]}"
  if [ ! -f "$DEPS/.apt-updated" ]; then apt-get update -qq && touch "$DEPS/.apt-updated"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_jupyter() {
  local venv="$DEPS/jupyter" stamp="$DEPS/jupyter/.installed"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$ROOT/requirements-local.txt" && [ -x "$venv/bin/jupyter-lab" ]; then
    return 0
  fi
  echo "JupyterLab: installing into $venv"
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$ROOT/requirements-local.txt"
  cp "$ROOT/requirements-local.txt" "$stamp"
}

install_sshd() {
  if command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; then return 0; fi
  echo "sshd: installing Debian's openssh-server"
  # Only the binary is used: each instance runs an sshd of its own on 127.0.0.1 (on a host with
  # systemd the package also enables the system's sshd, which the console never touches).
  apt_install openssh-server openssh-client
}

install_code_server() {
  local prefix="$DEPS/code-server" stamp="$DEPS/code-server/.installed-$CODE_SERVER_VERSION"
  [ -f "$stamp" ] && return 0
  echo "code-server $CODE_SERVER_VERSION: installing into $prefix (about 90 s with a warm npm cache)"
  apt_install ripgrep build-essential pkg-config python3 libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev
  mkdir -p "$prefix"
  npm install --no-audit --no-fund --ignore-scripts --prefix "$prefix" \
    "code-server@$CODE_SERVER_VERSION" >/dev/null
  local cs="$prefix/node_modules/code-server"
  local vsc="$cs/lib/vscode"
  # 1. The bundled VS Code's production dependencies and its extensions', scripts off (they would
  #    download things), as code-server's postinstall.sh does with scripts on.
  (cd "$vsc" && npm install --no-audit --no-fund --omit=dev --ignore-scripts >/dev/null)
  (cd "$vsc/extensions" && npm install --no-audit --no-fund --omit=dev --ignore-scripts >/dev/null)
  # 2. ripgrep: Debian's binary where @vscode/ripgrep expects it (its download is skipped when bin/ exists).
  local rg
  while IFS= read -r rg; do
    mkdir -p "$rg/bin" && ln -sf "$(command -v rg)" "$rg/bin/rg"
  done < <(find "$vsc" -type d -path '*node_modules/@vscode/ripgrep' 2>/dev/null)
  # 3. Native modules from source (node-pty runs `npx node-gyp`: npm_config_yes answers its prompt).
  (cd "$vsc" && npm_config_yes=true npm rebuild >/dev/null 2>&1)
  (cd "$prefix" && npm_config_yes=true npm rebuild argon2 >/dev/null 2>&1)
  # 4. The post-install's symlinks.
  ln -sfn node_modules "$vsc/node_modules.asar"
  ln -sfn code-server-linux.sh "$vsc/bin/remote-cli/code-server"
  ln -sfn browser-linux.sh "$vsc/bin/helpers/browser.sh"
  ln -sfn ../node_modules/code-server/out/node/entry.js "$prefix/bin-code-server" 2>/dev/null || true
  node "$cs/out/node/entry.js" --version >/dev/null
  touch "$stamp"
}

for step in "${STEPS[@]}"; do
  case "$step" in
    jupyter) install_jupyter ;;
    sshd) install_sshd ;;
    code-server) install_code_server ;;
    *) echo "unknown step: $step (jupyter, sshd, code-server)" >&2; exit 2 ;;
  esac
done
