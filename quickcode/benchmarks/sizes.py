"""`quickcode bench sizes`: which model size fits the typing latency budget on this machine, and what each
size buys per unit of training compute — a small scaling sweep in one run.

Per size (quickcode/draft_model/configs.py presets):
- **latency in vLLM** (the backend's own engine arguments, no speculation, prefix caching on): a model of that
  shape (weights do not change the cost) served at `--context` tokens; *cold*: distinct `--cold-tokens`-token
  prompts of held-out code, nothing cached; *typing*: a prompt, then the same prompt grown by 1–3 tokens at a
  time (each keystroke's prompt finds all but its last block in the prefix cache). Time to the first token,
  p50/p95 (what a first chunk waits for in the engine; the backend adds ~1 ms).
- **loss vs compute**: `--steps` training steps of the fast path from scratch on the same batches, held-out loss
  every `--eval-every` steps against the matmul FLOPs spent so far (compute, not wall time: comparable on a
  shared machine).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

from quickcode.benchmarks.report import Report, figure, md_table, pcts

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SIZES = ["cpu-target", "cpu-8m", "cpu-12m", "cpu-17m"]
TYPING_P95_MS, COLD_MS = 150.0, 600.0          # issue 14's budget


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", action="append", default=None, help=f"presets (default {' '.join(DEFAULT_SIZES)})")
    p.add_argument("--data", type=Path, default=None, help="prepared data (default runs/data, else runs/data-model-small)")
    p.add_argument("--context", type=int, default=1024, help="served context (max_model_len) of the latency runs")
    p.add_argument("--cold-tokens", type=int, default=1000)
    p.add_argument("--cold-prompts", type=int, default=8)
    p.add_argument("--typing-files", type=int, default=4, help="prompts grown keystroke by keystroke")
    p.add_argument("--typing-keys", type=int, default=12, help="keystrokes per typed prompt")
    p.add_argument("--steps", type=int, default=60, help="training steps per size (0: latency only)")
    p.add_argument("--pflop", type=float, default=0.0,
                   help="equal training compute per size instead of equal steps: each size takes the steps this "
                        "many matmul PFLOPs buy (an isoFLOP sweep; overrides --steps)")
    p.add_argument("--skip-latency", action="store_true", help="loss vs compute only (latency from an earlier run)")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work", type=Path, default=REPO / "artifacts" / "bench-sizes")
    p.add_argument("--out", type=Path, default=None, help="report folder (default benchmarks/reports)")


def _export_shape(size, tok_dir: Path, context: int, out: Path) -> int:
    """A random-weight folder of this shape that vLLM serves (its latency is the trained model's)."""
    from dataclasses import replace as dc_replace

    from quickcode.draft_model.train import build_model, export

    model = build_model(dc_replace(size, max_position_embeddings=max(context, size.max_position_embeddings)),
                        tok_dir, seed=0)
    export(model, tok_dir, out, {"kind": "latency-probe", "size": size.name, "trained_context_tokens": context})
    return sum(q.numel() for q in model.parameters())


def _prompts(data: Path, args) -> tuple[list[list[int]], list[list[int]]]:
    from quickcode.draft_model.pack import load_bin

    toks = load_bin(data / "heldout.bin")
    step = max(1, (len(toks) - args.cold_tokens - 64) // (args.cold_prompts + args.typing_files + 1))
    cold = [toks[i * step: i * step + args.cold_tokens].astype(int).tolist() for i in range(args.cold_prompts)]
    typing = []
    for j in range(args.typing_files):
        start = (args.cold_prompts + j) * step
        n = args.cold_tokens - 2 * args.typing_keys
        for k in range(args.typing_keys + 1):       # k = 0: the file's first (cold) prompt, untimed as typing
            n += (1 + k % 3) if k else 0            # keystrokes add 1, 2, 3, 1, ... tokens
            typing.append(toks[start: start + n].astype(int).tolist())
    return cold, typing


def latency(sizes, data: Path, args) -> dict:
    from quickcode.draft_model.vllm_runner import run_subprocesses

    cold, typing = _prompts(data, args)
    out = {}
    for size in sizes:
        folder = args.work / "models" / size.name
        params = _export_shape(size, data / "tokenizer", args.context, folder)
        settings = {"model": str(folder), "spec_method": "off", "max_model_len": args.context,
                    "max_prompt_tokens": args.context}
        spec = {"runs": [{"name": size.name, "settings": settings}], "prompts": cold + typing, "max_tokens": 2,
                "warmup": 0}
        r = run_subprocesses(spec, args.work / "vllm")[size.name]
        reqs = r["requests"]
        ttft_cold = [q["ttft_s"] * 1000 for q in reqs[1:len(cold)]]        # the first request warms the engine
        ttft_typing = [q["ttft_s"] * 1000 for i, q in enumerate(reqs[len(cold):]) if i % (args.typing_keys + 1)]
        out[size.name] = {"params": params, "cold_ms": pcts(ttft_cold, (50, 95)),
                          "typing_ms": pcts(ttft_typing, (50, 95)), "start_s": r["start_s"],
                          "bf16_mb": round(params * 2 / 1e6, 1)}
        print(f"[bench sizes] {size.name}: cold p50 {out[size.name]['cold_ms']['p50']:.0f} ms, typing p95 "
              f"{out[size.name]['typing_ms']['p95']:.0f} ms", file=sys.stderr, flush=True)
    return out


def steps_for(flops_per_step: float, steps: int, pflop: float) -> int:
    """Training steps of one size: `steps`, or with an equal-compute budget the steps `pflop` PFLOPs buy."""
    return max(1, round(pflop * 1e15 / flops_per_step)) if pflop > 0 else steps


def loss_vs_compute(sizes, data: Path, args) -> dict:
    import torch

    from quickcode.backend.cpu_features import cpu_flags
    from quickcode.draft_model.configs import cpu_step, profile
    from quickcode.draft_model.fastllama import param_count, train_flops_per_token
    from quickcode.draft_model.train import Trainer, Windows, build_model, evaluate, lr_at

    torch.set_num_threads(args.threads)
    step_kind = {"impl": "fast", "fused_adamw": True, "compile": False, **cpu_step(cpu_flags())}
    eval_w = Windows(data / "heldout.bin", args.seq_len, 0).fixed(16, args.batch_size)
    out = {}
    for size in sizes:
        model = build_model(size, data / "tokenizer", seed=0)
        flops = train_flops_per_token(model.config, args.seq_len) * args.batch_size * args.seq_len
        steps = steps_for(flops, args.steps, args.pflop)
        every = max(1, steps // 8) if args.pflop > 0 else args.eval_every
        p = profile("cpu", seq_len=args.seq_len, batch_size=args.batch_size, threads=args.threads,
                    warmup_steps=max(1, steps // 10), **step_kind)
        trainer = Trainer(model, p)
        windows = Windows(data / "train.bin", p.seq_len, seed=0)
        curve, t0 = [], time.perf_counter()
        for step in tqdm(range(1, steps + 1), desc=f"train {size.name}", unit="step", file=sys.stderr):
            trainer.step(windows.batch(p.batch_size), lr_at(step - 1, steps, p))
            if step % every == 0 or step == steps:
                ev = evaluate(model, eval_w)
                curve.append({"step": step, "pflop": step * flops / 1e15, "loss": ev["loss"], "top1": ev["top1"]})
                print(f"[bench sizes] {size.name} step {step}/{steps}: held-out {ev['loss']:.3f}", file=sys.stderr,
                      flush=True)
        out[size.name] = {"curve": curve, "wall_s": time.perf_counter() - t0, "gflop_per_step": flops / 1e9,
                          "steps": steps, "tokens": steps * p.batch_size * p.seq_len,
                          "params": param_count(model),
                          "step": {k: getattr(p, k) for k in ("impl", "bf16", "compile", "fused_adamw")}}
    return out


def _plot(train: dict):
    """Held-out loss against training compute, one line a size: the figure."""
    fig, ax = figure(figsize=(7, 4.2))
    for name, t in train.items():
        ax.plot([c["pflop"] for c in t["curve"]], [c["loss"] for c in t["curve"]], "o-",
                label=f"{name} ({t['params'] / 1e6:.1f}M)")
    ax.set_xscale("log")
    ax.set_xlabel("training compute, matmul PFLOP")
    ax.set_ylabel("held-out loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def best_at_equal_compute(train: dict) -> str | None:
    """The size with the lowest final held-out loss when every size spent the same compute."""
    return min(train, key=lambda k: train[k]["curve"][-1]["loss"]) if train else None


def run(args: argparse.Namespace) -> dict:
    from quickcode.benchmarks.train import _data_dir
    from quickcode.draft_model.configs import MODEL_SIZES

    report = Report("sizes", "Model size vs the typing latency budget, and loss vs training compute", out=args.out)
    data = _data_dir(args.data)
    sizes = [MODEL_SIZES[n] for n in (args.size or DEFAULT_SIZES)]
    lat = {} if args.skip_latency else latency(sizes, data, args)
    train = loss_vs_compute(sizes, data, args) if args.steps or args.pflop else {}
    fits = [s.name for s in sizes if s.name in lat and lat[s.name]["typing_ms"]["p95"] <= TYPING_P95_MS
            and lat[s.name]["cold_ms"]["p95"] <= COLD_MS]
    if lat:
        report.add(f"""
Latency: each size served by vLLM (`quickcode.backend.vllm_engine.engine_args`, speculation off, prefix caching on,
block 32) at a {args.context}-token context; random weights of the size's shape. *Cold*: {args.cold_prompts - 1}
distinct {args.cold_tokens}-token prompts of held-out code (a first one warms the engine up, untimed).
*Typing*: {args.typing_files} prompts grown {args.typing_keys} times by 1–3 tokens (all but the last block in
the prefix cache). Time to the first token in the engine, ms. Budget (issue 14): typing p95 ≤ {TYPING_P95_MS:.0f}
ms, cold ≤ {COLD_MS:.0f} ms.
""")
        rows = [[s.name, f"{lat[s.name]['params'] / 1e6:.1f}M", lat[s.name]["bf16_mb"], lat[s.name]["cold_ms"]["p50"],
                 lat[s.name]["cold_ms"]["p95"], lat[s.name]["typing_ms"]["p50"], lat[s.name]["typing_ms"]["p95"],
                 "yes" if s.name in fits else "no"] for s in sizes]
        report.add(md_table(["size", "params", "bf16 MB", "cold p50 ms", "cold p95 ms", "typing p50 ms",
                             "typing p95 ms", "fits the budget"], rows))
    if train:
        first = next(iter(train.values()))["step"]
        budget = (f"the same compute for every size ({args.pflop:g} matmul PFLOP: an isoFLOP sweep, each size "
                  f"taking the steps it buys)" if args.pflop else f"{args.steps} steps per size")
        report.add(f"""
Loss vs compute: each size trained from scratch with {budget}, batch {args.batch_size} × {args.seq_len}, the
same batches in the same order, the learning-rate schedule (warm-up a tenth, cosine) over its own steps; the
step `quickcode model train` takes on this CPU ({", ".join(f"{k} {v}" for k, v in first.items())}). Held-out
loss on 16 fixed windows of held-out modules, against the matmul PFLOPs spent (compute, not wall time:
comparable on a shared machine). Short runs: they rank sizes at this compute, not at convergence.
""")
        rows = []
        for name, t in train.items():
            last = t["curve"][-1]
            rows.append([name, f"{t['params'] / 1e6:.1f}M", round(t["gflop_per_step"], 1), t["steps"],
                         f"{t['tokens'] / 1e6:.2f}M", round(t["wall_s"]), round(last["loss"], 3),
                         round(last["top1"], 3),
                         " · ".join(f"{c['pflop']:.3f}: {c['loss']:.2f}" for c in t["curve"])])
        report.add(md_table(["size", "params", "GFLOP per step", "steps", "tokens", "wall s", "final loss",
                             "final top-1", "PFLOP: held-out loss"], rows))
        report.add_figure(_plot(train), "loss_vs_compute", "held-out loss vs training compute")
    (args.work).mkdir(parents=True, exist_ok=True)
    (args.work / "sizes.json").write_text(json.dumps({"latency": lat, "train": train}, indent=1) + "\n")
    headline = {"fits": fits, "largest_fitting": fits[-1] if fits else None,
                "latency": {k: {"cold_p95_ms": v["cold_ms"]["p95"], "typing_p95_ms": v["typing_ms"]["p95"]}
                            for k, v in lat.items()},
                "final_loss": {k: round(v["curve"][-1]["loss"], 3) for k, v in train.items()},
                "best_at_equal_compute": best_at_equal_compute(train) if args.pflop else None}
    return report.finish(headline)
