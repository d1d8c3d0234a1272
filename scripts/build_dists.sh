#!/usr/bin/env bash
# `make dist`: the installable artefacts, built from the checkout's tracked (and new, not ignored) files into dist/:
#   quickcode_lsp-VERSION-py3-none-any.whl  the language server and `quickcode doctor` (packaging/lsp/pyproject.toml):
#                                           no torch, vLLM, FastAPI or models — what an editor machine installs
#   quickcode-VERSION-py3-none-any.whl      the full package (pyproject.toml): backend, model pipeline, benchmarks,
#                                           the committed models and configs; its extras bring vLLM etc.
#   quickcode-VERSION.vsix                  the VS Code extension (scripts/setup_editors.sh vscode: npm ci + vsce)
# Each wheel is built by pip from a copy in a temporary directory (no build/ or *.egg-info in the checkout); pip's
# build isolation takes setuptools from the machine's pip configuration (the registry, local wheels, its cache).
#   PYTHON  the interpreter whose pip builds the wheels (default: python3, 3.11 or newer)
# Usage: scripts/build_dists.sh [all|lsp|full|vsix]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/dist
PYTHON=${PYTHON:-python3}
log() { printf '\033[1m[dist]\033[0m %s\n' "$*" >&2; }

git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { log "not a git checkout: clone the repository"; exit 1; }
"$PYTHON" -m pip --version >/dev/null 2>&1 || { log "$PYTHON has no pip (set PYTHON=...)"; exit 1; }
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$OUT"

copy_tracked() {  # copy_tracked DEST PATHSPEC...: the tracked and new files under PATHSPEC, as a checkout has them
  local dest=$1; shift
  mkdir -p "$dest"
  git ls-files -z --cached --others --exclude-standard -- "$@" \
    | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf - | tar -xf - -C "$dest"
}

wheel() {  # wheel DIR: build DIR's wheel into dist/
  "$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$OUT" "$1" > "$STAGE/pip.log" 2>&1 \
    || { tail -30 "$STAGE/pip.log" >&2; exit 1; }
}

build_lsp() {
  log "quickcode-lsp wheel (quickcode.lsp_client, quickcode.protocol, the quickcode command)"
  local dir=$STAGE/lsp
  copy_tracked "$dir" quickcode/lsp_client quickcode/protocol quickcode/__init__.py quickcode/__main__.py \
    quickcode/cli.py
  cp packaging/lsp/pyproject.toml packaging/lsp/README.md "$dir/"
  rm -f "$OUT"/quickcode_lsp-*.whl
  wheel "$dir"
}

build_full() {
  log "quickcode wheel (the full package: backend, model pipeline, benchmarks, models, configs)"
  local dir=$STAGE/full
  copy_tracked "$dir" pyproject.toml README.md quickcode models configs
  rm -f "$OUT"/quickcode-[0-9]*.whl
  wheel "$dir"
}

build_vsix() {
  log "VS Code extension (.vsix)"
  scripts/setup_editors.sh vscode
  local version
  version=$(node -p "require('./editors/vscode/package.json').version")
  rm -f "$OUT"/quickcode-*.vsix
  cp editors/vscode/dist/quickcode.vsix "$OUT/quickcode-$version.vsix"
}

case "${1:-all}" in
  lsp) build_lsp ;;
  full) build_full ;;
  vsix) build_vsix ;;
  all) build_lsp; build_full; build_vsix ;;
  *) echo "usage: scripts/build_dists.sh [all|lsp|full|vsix]" >&2; exit 2 ;;
esac
log "in dist/:"
(cd "$OUT" && ls -1s --block-size=K quickcode*.whl quickcode*.vsix 2>/dev/null) >&2
