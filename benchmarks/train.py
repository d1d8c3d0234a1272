"""`quickcode bench train`: training throughput of `quickcode model train` on this machine, the original step
(transformers' Llama, `impl="hf"`) against the fast one (`draft_model/fastllama.py`), in one run.

Every arm trains the same model size from the same initial weights on the same batches (real windows of
`<data>/train.bin`) through `draft_model.train.Trainer.step` — the training loop's own step, data loading
included. Per arm: warm-up steps (torch.compile's compilation, allocator) untimed, then timed steps; tokens/s
from the median step; achieved FLOP/s = the model's matmul FLOPs per training token × tokens/s; the fp32
2048×2048 matmul rate measured in the same run is the ceiling to read it against.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.report import Report, md_table, pcts

REPO = Path(__file__).resolve().parent.parent

# name → overrides of the cpu profile (the first arm is the baseline: the original code path)
ARMS = {
    "hf (before)": {"impl": "hf"},
    "hf + fused AdamW": {"impl": "hf", "fused_adamw": True},
    "fast eager": {"impl": "fast", "fused_adamw": True, "compile": False},
    "fast compiled": {"impl": "fast", "fused_adamw": True, "compile": True},
}
# bf16 autocast, only on request (--arm): this CPU has no native bf16 (AVX2): a run here measured 22.9–26.3 s
# per step against 1.3 s in fp32, and compiling it took 83 s
OPTIONAL_ARMS = {"fast compiled bf16": {"impl": "fast", "fused_adamw": True, "compile": True, "bf16": True}}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None,
                   help="prepared data (train.bin, tokenizer/); default runs/data, else runs/data-model-small")
    p.add_argument("--size", default="cpu-target")
    p.add_argument("--profile", default="cpu")
    p.add_argument("--arm", action="append", default=None, choices=[*ARMS, *OPTIONAL_ARMS],
                   help=f"arms to run (default: {', '.join(ARMS)})")
    p.add_argument("--shape", action="append", default=[], metavar="BxT",
                   help="extra arms: the best-known fast path at batch B × sequence T (e.g. 16x512, 4x1024)")
    p.add_argument("--steps", type=int, default=12, help="timed steps per arm")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per arm (compilation happens here)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="report folder (default benchmarks/reports)")


def matmul_gflops(n: int = 2048, reps: int = 8) -> float:
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def _data_dir(arg: Path | None) -> Path:
    if arg is not None:
        return arg
    for d in (REPO / "runs" / "data", REPO / "runs" / "data-model-small"):
        if (d / "train.bin").exists():
            return d
    raise SystemExit("no prepared data: give --data (see docs/model-team.md, `quickcode model prepare`)")


def run_arm(name: str, p, size, data: Path, steps: int, warmup: int, init_state: dict) -> dict:
    from draft_model.fastllama import train_flops_per_token
    from draft_model.train import Trainer, Windows, build_model

    model = build_model(size, data / "tokenizer", seed=0)
    model.load_state_dict(init_state)
    trainer = Trainer(model, p)
    windows = Windows(data / "train.bin", p.seq_len, seed=0)
    times, losses = [], []
    t_start = time.perf_counter()
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        loss = trainer.step(windows.batch(p.batch_size), p.lr)
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
        losses.append(loss)
        print(f"[bench train] {name}: step {i + 1}/{warmup + steps} {dt * 1000:.0f} ms loss {loss:.3f}",
              file=sys.stderr, flush=True)
    warmup_s = time.perf_counter() - t_start - sum(times)
    tokens = p.batch_size * p.seq_len
    med = statistics.median(times)
    flops = train_flops_per_token(model.config, p.seq_len)
    return {"arm": name, "batch": p.batch_size, "seq": p.seq_len, "impl": p.impl, "compile": p.compile,
            "bf16": p.bf16, "fused_adamw": p.fused_adamw, "step_ms": pcts([t * 1000 for t in times], (5, 50, 95)),
            "tokens_per_s": tokens / med, "gflops": flops * tokens / med / 1e9, "warmup_s": warmup_s,
            "loss_first": losses[0], "loss_last": losses[-1], "flops_per_token": flops}


def run(args: argparse.Namespace) -> dict:
    import torch

    from draft_model.configs import MODEL_SIZES, profile
    from draft_model.train import build_model

    report = Report("train", "Training throughput: the original step vs the fast path, one run", out=args.out)
    torch.set_num_threads(args.threads)
    data = _data_dir(args.data)
    size = MODEL_SIZES[args.size]
    base = profile(args.profile, threads=args.threads)
    peak = matmul_gflops()
    print(f"[bench train] fp32 2048² matmul: {peak:.1f} GFLOP/s on {args.threads} threads", file=sys.stderr)
    init = build_model(size, data / "tokenizer", seed=0)
    n_params = sum(q.numel() for q in init.parameters())
    init_state = {k: v.clone() for k, v in init.state_dict().items()}
    arms = [(n, replace(base, **{**ARMS, **OPTIONAL_ARMS}[n])) for n in (args.arm or list(ARMS))]
    for shape in args.shape:
        b, t = (int(x) for x in shape.lower().split("x"))
        arms.append((f"fast compiled {b}x{t}", replace(base, **ARMS["fast compiled"], batch_size=b, seq_len=t)))
    results = []
    for name, p in arms:
        torch.manual_seed(0)
        results.append(run_arm(name, p, size, data, args.steps, args.warmup, init_state))
    peak_after = matmul_gflops()
    before = results[0]
    best = max(results[1:] or results, key=lambda r: r["tokens_per_s"])

    report.add(f"""
`{args.size}` ({n_params / 1e6:.2f}M parameters, {results[0]['flops_per_token'] / 1e6:.1f} MFLOP per training
token at {base.seq_len} tokens), profile `{args.profile}` (batch {base.batch_size} × {base.seq_len}), {args.threads}
threads, data `{data}`. Each arm: the same initial weights and batch sequence, {args.warmup} untimed steps then
{args.steps} timed steps of `draft_model.train.Trainer.step` (the training loop's step: batch loading, forward,
loss, backward, gradient clipping, AdamW). Achieved FLOP/s counts the matmuls only (6 × linear parameters per
token + causal attention; `draft_model/fastllama.py train_flops_per_token`). The ceiling: fp32 2048×2048 matmul
on the same threads, measured at the start and the end of this run: **{peak:.1f} and {peak_after:.1f}
GFLOP/s**.
""")
    rows = []
    for r in results:
        rows.append([r["arm"], f"{r['batch']}×{r['seq']}", r["step_ms"]["p50"], r["step_ms"]["p5"],
                     r["step_ms"]["p95"], round(r["tokens_per_s"]), round(r["tokens_per_s"] / before["tokens_per_s"], 2),
                     round(r["gflops"], 1), f"{100 * r['gflops'] / max(peak, peak_after):.0f} %",
                     round(r["warmup_s"], 1), f"{r['loss_first']:.3f} → {r['loss_last']:.3f}"])
    report.add(md_table(["arm", "batch×seq", "step p50 ms", "p5", "p95", "tokens/s", "× before", "GFLOP/s",
                         "of matmul peak", "warm-up s", "loss first → last step"], rows))
    report.add(f"""
Tokens/s per parameter at the same size: **{best['tokens_per_s'] / before['tokens_per_s']:.2f}×** ({best['arm']}
vs {before['arm']}). What the training loop adds on top of these steps: held-out evaluation every
{base.eval_every} steps ({base.eval_windows} windows, forward only: ≈ {base.eval_windows / base.batch_size / 3:.1f}
steps' worth, {100 * base.eval_windows / base.batch_size / 3 / base.eval_every:.1f} % of the time) and a checkpoint.
""")
    headline = {"params": n_params, "matmul_peak_gflops": round(max(peak, peak_after), 1),
                "before_tokens_per_s": round(before["tokens_per_s"]), "before_gflops": round(before["gflops"], 1),
                "best_arm": best["arm"], "best_tokens_per_s": round(best["tokens_per_s"]),
                "best_gflops": round(best["gflops"], 1),
                "speedup": round(best["tokens_per_s"] / before["tokens_per_s"], 2),
                "arms": {r["arm"]: round(r["tokens_per_s"]) for r in results}}
    (report.dir / "train.json").write_text(json.dumps(results, indent=1) + "\n")
    return report.finish(headline)
