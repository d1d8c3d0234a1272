"""`quickcode bench train`: training throughput of `quickcode model train` on this machine, the original step
(transformers' Llama, `impl="hf"`) against the fast one (`quickcode/draft_model/fastllama.py`), in one run.

Every arm trains the same model size from the same initial weights on the same batches (real windows of
`<data>/train.bin`) through `quickcode.draft_model.train.Trainer.step` — the training loop's own step, data
loading included. The arms take their steps in turn, round by round: warm-up rounds (torch.compile's
compilation, allocator) untimed, then timed rounds; tokens/s
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

from quickcode.benchmarks.report import Report, md_table, pcts

REPO = Path(__file__).resolve().parents[2]

# name → overrides of the cpu profile (the first arm is the baseline: the original code path)
FP32_ARMS = {
    "hf (before)": {"impl": "hf"},
    "hf + fused AdamW": {"impl": "hf", "fused_adamw": True},
    "fast eager": {"impl": "fast", "fused_adamw": True, "compile": False},
    "fast compiled": {"impl": "fast", "fused_adamw": True, "compile": True},
}
# bf16 autocast (fp32 weights and optimizer): regular arms where the CPU has native bf16
# (quickcode/backend/cpu_features.py), on request (--arm) elsewhere: bf16 is emulated there (an AVX2 machine
# measured 22.9–26.3 s per step against 1.3 s in fp32, and compiling it took 83 s)
BF16_ARMS = {
    "hf bf16": {"impl": "hf", "fused_adamw": True, "bf16": True},
    "fast eager bf16": {"impl": "fast", "fused_adamw": True, "compile": False, "bf16": True},
    "fast compiled bf16": {"impl": "fast", "fused_adamw": True, "compile": True, "bf16": True},
}
ALL_ARMS = {**FP32_ARMS, **BF16_ARMS}


def default_arms(native_bf16: bool) -> list[str]:
    return [*FP32_ARMS, *BF16_ARMS] if native_bf16 else list(FP32_ARMS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None,
                   help="prepared data (train.bin, tokenizer/); default runs/data, runs/data-model-small or runs/data-bench "
                        "(made from the standard library when none exists)")
    p.add_argument("--size", default="cpu-target")
    p.add_argument("--profile", default="cpu")
    p.add_argument("--arm", action="append", default=None, choices=list(ALL_ARMS),
                   help=f"arms to run (default: {', '.join(FP32_ARMS)}, and {', '.join(BF16_ARMS)} where the "
                        "CPU has native bf16)")
    p.add_argument("--shape", action="append", default=[], metavar="BxT",
                   help="extra arms: the fast compiled path (bf16 where native) at batch B × sequence T "
                        "(e.g. 16x256, 16x512); not counted as the same step")
    p.add_argument("--steps", type=int, default=12, help="timed steps per arm")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per arm (compilation happens here)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="report folder (default benchmarks/reports)")


def matmul_gflops(n: int = 2048, reps: int = 8, dtype=None) -> float:
    import torch

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def _data_dir(arg: Path | None) -> Path:
    """`--data`, else the first prepared data of runs/, else the standard library packed with the committed
    target's tokenizer into runs/data-bench (`quickcode model prepare --data runs/data-bench --tokenizer-from
    models/target --source stdlib`, ~12 s here): throughput needs real windows of the model's vocabulary, not a
    particular corpus."""
    if arg is not None:
        return arg
    for d in (REPO / "runs" / "data", REPO / "runs" / "data-model-small", REPO / "runs" / "data-bench"):
        if (d / "train.bin").exists():
            return d
    from quickcode.draft_model.pipeline import prepare

    d = REPO / "runs" / "data-bench"
    print(f"[bench train] no prepared data: packing the standard library into {d}", file=sys.stderr, flush=True)
    prepare(d, ["stdlib"], tokenizer_from=REPO / "models" / "target", fim_cut="cursor")
    return d


def run_arms(arms: list, size, data: Path, steps: int, warmup: int, init_state: dict) -> list[dict]:
    """Every arm's step in turn, round after round (warm-up rounds untimed): a load that comes and goes on the
    machine falls on every arm alike instead of on whichever arm was running."""
    import torch

    from quickcode.draft_model.fastllama import train_flops_per_token
    from quickcode.draft_model.train import Trainer, Windows, build_model

    runs = []
    for name, p in arms:
        torch.manual_seed(0)
        model = build_model(size, data / "tokenizer", seed=0)
        model.load_state_dict(init_state)
        runs.append({"name": name, "p": p, "model": model, "trainer": Trainer(model, p), "times": [],
                     "losses": [], "windows": Windows(data / "train.bin", p.seq_len, seed=0)})
    for i in range(warmup + steps):
        for a in runs:
            p = a["p"]
            t0 = time.perf_counter()
            loss = a["trainer"].step(a["windows"].batch(p.batch_size), p.lr)
            dt = time.perf_counter() - t0
            a["times"].append(dt)
            a["losses"].append(loss)
            print(f"[bench train] {a['name']}: step {i + 1}/{warmup + steps} {dt * 1000:.0f} ms "
                  f"loss {loss:.3f}", file=sys.stderr, flush=True)
    results = []
    for a in runs:
        p, times, losses = a["p"], a["times"][warmup:], a["losses"]
        tokens = p.batch_size * p.seq_len
        med = statistics.median(times)
        flops = train_flops_per_token(a["model"].config, p.seq_len)
        results.append({
            "arm": a["name"], "batch": p.batch_size, "seq": p.seq_len, "impl": p.impl, "compile": p.compile,
            "bf16": p.bf16, "fused_adamw": p.fused_adamw, "step_ms": pcts([t * 1000 for t in times], (5, 50, 95)),
            "tokens_per_s": tokens / med, "gflops": flops * tokens / med / 1e9,
            "warmup_s": sum(a["times"][:warmup]),
            "loss_first": losses[0], "loss_last": losses[-1], "losses": losses, "flops_per_token": flops})
    return results


def run(args: argparse.Namespace) -> dict:
    import torch

    from quickcode.backend.cpu_features import cpu_flags, native_bf16, native_bf16_flags
    from quickcode.draft_model.configs import MODEL_SIZES, profile
    from quickcode.draft_model.train import build_model

    report = Report("train", "Training throughput: the original step vs the fast path, one run", out=args.out)
    torch.set_num_threads(args.threads)
    data = _data_dir(args.data)
    size = MODEL_SIZES[args.size]
    base = profile(args.profile, threads=args.threads)
    peak = matmul_gflops()
    print(f"[bench train] fp32 2048² matmul: {peak:.1f} GFLOP/s on {args.threads} threads", file=sys.stderr)
    peak16 = matmul_gflops(dtype=torch.bfloat16)
    print(f"[bench train] bf16 2048² matmul: {peak16:.1f} GFLOP/s", file=sys.stderr)
    init = build_model(size, data / "tokenizer", seed=0)
    n_params = sum(q.numel() for q in init.parameters())
    init_state = {k: v.clone() for k, v in init.state_dict().items()}
    flags = cpu_flags()
    native = native_bf16(flags)
    arms = [(n, replace(base, **ALL_ARMS[n])) for n in (args.arm or default_arms(native))]
    shape_arm = "fast compiled bf16" if native else "fast compiled"
    for shape in args.shape:
        b, t = (int(x) for x in shape.lower().split("x"))
        arms.append((f"{shape_arm} {b}x{t}", replace(base, **ALL_ARMS[shape_arm], batch_size=b, seq_len=t)))
    results = run_arms(arms, size, data, args.steps, args.warmup, init_state)
    peak_after, peak16_after = matmul_gflops(), matmul_gflops(dtype=torch.bfloat16)
    top = {False: max(peak, peak_after), True: max(peak16, peak16_after)}     # each arm's ceiling, by dtype
    before = results[0]
    same_step = [r for r in results if (r["batch"], r["seq"]) == (base.batch_size, base.seq_len)]
    best = max(same_step[1:] or same_step, key=lambda r: r["tokens_per_s"])
    for r in results:     # the same weights and batches: how far each arm's per-step loss is from the base
        r["loss_diff"] = max(abs(a - b) for a, b in zip(r["losses"], before["losses"])) \
            if (r["batch"], r["seq"]) == (before["batch"], before["seq"]) else None
    cpu = next((ln.partition(":")[2].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?") if Path("/proc/cpuinfo").exists() else "?"

    report.add(f"""
CPU: {cpu}; native bf16: **{', '.join(native_bf16_flags(flags)) or 'no'}** (`/proc/cpuinfo` flags;
`quickcode/backend/cpu_features.py`), torch {torch.__version__}
(`{torch.backends.cpu.get_cpu_capability()}` kernels).
`{args.size}` ({n_params / 1e6:.2f}M parameters, {results[0]['flops_per_token'] / 1e6:.1f} MFLOP per training
token at {base.seq_len} tokens), profile `{args.profile}` (batch {base.batch_size} × {base.seq_len}), {args.threads}
threads, data `{data}`. Each arm: the same initial weights and batch sequence, {args.warmup} untimed steps then
{args.steps} timed steps, the arms taking their steps in turn, of `quickcode.draft_model.train.Trainer.step` (the
training loop's step: batch loading, forward, loss, backward, gradient clipping, AdamW). Achieved FLOP/s
counts the matmuls only (6 × linear parameters per token + causal attention; `quickcode/draft_model/fastllama.py
train_flops_per_token`). The ceiling: a 2048×2048 matmul on the same threads, measured at the start and the
end of this run: fp32 **{peak:.1f} and {peak_after:.1f} GFLOP/s**, bf16 **{peak16:.1f} and
{peak16_after:.1f} GFLOP/s** (each arm's "of matmul peak" against its own dtype's).
""")
    rows = []
    for r in results:
        rows.append([r["arm"], f"{r['batch']}×{r['seq']}", r["step_ms"]["p50"], r["step_ms"]["p5"],
                     r["step_ms"]["p95"], round(r["tokens_per_s"]), round(r["tokens_per_s"] / before["tokens_per_s"], 2),
                     round(r["gflops"], 1), f"{100 * r['gflops'] / top[r['bf16']]:.0f} %",
                     round(r["warmup_s"], 1), f"{r['loss_first']:.3f} → {r['loss_last']:.3f}",
                     "—" if r["loss_diff"] is None else f"{r['loss_diff']:.4f}"])
    report.add(md_table(["arm", "batch×seq", "step p50 ms", "p5", "p95", "tokens/s", "× before", "GFLOP/s",
                         "of matmul peak", "warm-up s", "loss first → last step",
                         "max Δ loss vs before"], rows))
    step_gflop = before["flops_per_token"] * base.batch_size * base.seq_len / 1e9
    target_ms = 1000 * base.batch_size * base.seq_len / (3 * before["tokens_per_s"])
    target_note = (f"3× would be {3 * before['tokens_per_s']:,.0f} tokens/s, a step of {target_ms:.0f} ms: "
                   f"the step's {step_gflop:.0f} GFLOP of matmuls alone take "
                   f"{1000 * step_gflop / top[True]:.0f} ms at the best bf16 2048² rate of this run.")
    report.add(f"""
Tokens/s per parameter at the same size: **{best['tokens_per_s'] / before['tokens_per_s']:.2f}×** ({best['arm']}
vs {before['arm']}, the same batch × sequence; per-step loss within {best['loss_diff']:.4f} of the baseline's
over all {args.warmup + args.steps} steps). {target_note} What the training loop adds on top of
these steps: held-out evaluation every {base.eval_every} steps ({base.eval_windows} windows, forward only:
≈ {base.eval_windows / base.batch_size / 3:.1f} steps' worth,
{100 * base.eval_windows / base.batch_size / 3 / base.eval_every:.1f} % of the time) and a checkpoint.
""")
    headline = {"params": n_params, "matmul_peak_gflops": round(max(peak, peak_after), 1),
                "before_tokens_per_s": round(before["tokens_per_s"]), "before_gflops": round(before["gflops"], 1),
                "best_arm": best["arm"], "best_tokens_per_s": round(best["tokens_per_s"]),
                "best_gflops": round(best["gflops"], 1), "bf16_matmul_peak_gflops": round(top[True], 1),
                "speedup": round(best["tokens_per_s"] / before["tokens_per_s"], 2),
                "best_max_loss_diff": round(best["loss_diff"], 4), "native_bf16": native_bf16_flags(flags),
                "arms": {r["arm"]: round(r["tokens_per_s"]) for r in results}}
    (report.dir / "train.json").write_text(json.dumps(results, indent=1) + "\n")
    return report.finish(headline)
