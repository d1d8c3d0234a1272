"""`quickcode bench overload`: at ~3× the sustainable rate, our scheduler vs a FIFO baseline, on one warm engine."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import urllib.error
import urllib.request
from pathlib import Path

from backend.auth import hash_token, new_token
from benchmarks.loadgen import (REPO, Backend, CodeCorpus, Outcome, Session, backend_from_url, finite, progress, scrape,
                                bench_backend)
from benchmarks.report import Report, figure, md_table, pcts
from benchmarks.trace import DEFAULT_TRACE, classify, load_trace, response_s


# /debug/* takes only the admin token: the backend this benchmark starts gets this one's hash; for a backend of
# yours (--url), set QUICKCODE_ADMIN_TOKEN to the token whose hash it has as admin_token_sha256
ADMIN_TOKEN = os.environ.get("QUICKCODE_ADMIN_TOKEN") or new_token()


def set_scheduler(backend: Backend, **cfg) -> dict:
    """POST /debug/scheduler (the backend must run with debug_endpoints=true); retried while requests drain."""
    body = json.dumps(cfg).encode()
    for _ in range(200):
        req = urllib.request.Request(f"{backend.http_url}/debug/scheduler", data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {ADMIN_TOKEN}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise RuntimeError(f"/debug/scheduler: {e.code} {e.read()[:200]!r} (start the backend with "
                                   f"--set debug_endpoints=true and admin_token_sha256)") from None
        time.sleep(0.1)
    raise RuntimeError("requests never drained")


async def wait_idle(backend: Backend, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = scrape(backend.http_url)
        if not m.get("quickcode_live_requests") and not m.get("quickcode_engine_running") \
                and not m.get("quickcode_engine_waiting"):
            return
        await asyncio.sleep(0.1)
    progress("  (engine not idle after the drain; going on)")


class Workload:
    """Prompts with the trace's length mix (clipped), fresh text for every request (no prefix-cache help)."""

    def __init__(self, corpus: CodeCorpus, trace: Path, max_prompt_tokens: int, max_output_tokens: int, seed: int):
        rows = load_trace(trace)
        self.lengths = [(max(8, min(r.context_tokens, max_prompt_tokens)), max(1, min(r.generated_tokens,
                                                                                      max_output_tokens)))
                        for r in rows]
        self.corpus = corpus
        self.rng = random.Random(seed)
        self.clipped_share = sum(1 for r in rows if r.context_tokens > max_prompt_tokens) / len(rows)

    def next(self) -> tuple[str, int, int]:
        n, out = self.rng.choice(self.lengths)
        text, _ = self.corpus.prompt(n)
        return text, n, out


async def sequential(session: Session, work: Workload, n: int, timeout_s: float = 120.0) -> list[Outcome]:
    outs = []
    for _ in range(n):
        text, tokens, out = work.next()
        o = session.complete(text, max_tokens=out, prompt_tokens=tokens)
        await session.wait(o.id, timeout_s)
        outs.append(o)
    return outs


async def closed_loop(url: str, work: Workload, concurrency: int, duration_s: float) -> tuple[float, list[Outcome]]:
    """Requests/s completed by `concurrency` clients asking back to back: the engine's service rate."""
    sessions = [await Session(url, f"cap{i}").open() for i in range(concurrency)]
    outs: list[Outcome] = []
    t0 = time.perf_counter()
    end = t0 + duration_s

    async def client(s: Session):
        while time.perf_counter() < end:
            text, tokens, out = work.next()
            o = s.complete(text, max_tokens=out, prompt_tokens=tokens)
            await s.wait(o.id, 300)
            outs.append(o)

    await asyncio.gather(*(client(s) for s in sessions))
    elapsed = time.perf_counter() - t0
    for s in sessions:
        await s.close()
    return len(outs) / elapsed, outs


async def open_loop_block(backend: Backend, schedule: list[tuple[float, str, int, int]], users: int,
                          drain_s: float) -> tuple[list[Outcome], float]:
    """Send `schedule` [(at_s, text, prompt tokens, max tokens)] round-robin over `users` sessions; wait up to
    `drain_s` after the last send; then close the sessions (which aborts whatever is left)."""
    sessions = [await Session(backend.ws_url, f"ol{i}").open() for i in range(users)]
    outs: list[Outcome] = []
    t0 = time.perf_counter()
    for i, (at, text, tokens, out) in enumerate(schedule):
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        outs.append(sessions[i % users].complete(text, max_tokens=out, prompt_tokens=tokens))
    deadline = time.perf_counter() + drain_s
    while any(o.t_end is None for o in outs) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    for s in sessions:
        await s.close()
    return outs, t0


_T0 = 0.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend started with --set debug_endpoints=true "
                   "(and admin_token_sha256 of QUICKCODE_ADMIN_TOKEN)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings of the backend started")
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="length mix of prompts and outputs")
    p.add_argument("--rate-multiple", type=float, default=3.0)
    p.add_argument("--sustainable-rps", type=float, default=None, help="skip measuring it")
    p.add_argument("--slo-ms", type=float, default=None, help="default: 2 × the unloaded p95 TTFT")
    p.add_argument("--budget-share", type=float, default=0.75, help="scheduler's TTFT budget = this × SLO")
    p.add_argument("--blocks", default="fifo,latency,latency,fifo", help="A/B order of the blocks")
    p.add_argument("--block-s", type=float, default=40.0)
    p.add_argument("--drain-s", type=float, default=None, help="default: max(10 s, 3 × SLO)")
    p.add_argument("--unloaded-n", type=int, default=20)
    p.add_argument("--capacity-s", type=float, default=25.0)
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--max-prompt-tokens", type=int, default=1500)
    p.add_argument("--max-output-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> dict:
    global _T0
    _T0 = time.time()
    progress("loading the code corpus and the trace's length mix")
    corpus = CodeCorpus(seed=args.seed)
    work = Workload(corpus, args.trace, args.max_prompt_tokens, args.max_output_tokens, args.seed)
    admin = f"admin_token_sha256={hash_token(ADMIN_TOKEN)}"
    backend = backend_from_url(args.url) if args.url else bench_backend("overload", ["debug_endpoints=true", admin, *args.set])
    try:
        res = asyncio.run(_run(args, backend, work))
    finally:
        backend.stop()
    return _report(args, work, res)


async def _run(args, backend: Backend, work: Workload) -> dict:
    cfg0 = set_scheduler(backend, mode="latency", ttft_budget_s=3600.0)   # calibration: nothing is shed
    max_running = cfg0["max_running"]
    s = await Session(backend.ws_url, "calibrate").open()
    progress("warm-up: 5 requests")
    await sequential(s, work, 5)
    progress(f"unloaded: {args.unloaded_n} requests one at a time")
    unloaded = await sequential(s, work, args.unloaded_n)
    await s.close()
    unloaded_ttft = [response_s(o) for o in unloaded]
    if args.sustainable_rps:
        sustainable, cap_outs = args.sustainable_rps, []
    else:
        progress(f"sustainable rate: {max_running} clients back to back for {args.capacity_s:g} s")
        sustainable, cap_outs = await closed_loop(backend.ws_url, work, max_running, args.capacity_s)
    p95_unloaded_s = pcts(unloaded_ttft)["p95"]
    slo_s = args.slo_ms / 1000 if args.slo_ms else 2 * p95_unloaded_s
    budget_s = args.budget_share * slo_s
    rate = args.rate_multiple * sustainable
    drain_s = args.drain_s or max(10.0, 3 * slo_s)
    progress(f"unloaded TTFT p95 {p95_unloaded_s * 1000:.0f} ms → SLO {slo_s * 1000:.0f} ms, budget "
             f"{budget_s * 1000:.0f} ms; sustainable {sustainable:.2f} req/s → offered {rate:.2f} req/s")
    # one arrival schedule (Poisson), the same times and lengths in every block; fresh prompt text each block
    rng = random.Random(args.seed + 1)
    times, t = [], 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= args.block_s:
            break
        times.append(t)
    shapes = [work.rng.choice(work.lengths) for _ in times]
    blocks = []
    rates = {"latency": set_scheduler(backend)["rates"]}    # as calibrated (latency mode, nothing shed)
    dump = REPO / "artifacts" / "bench" / "overload_requests.jsonl"   # every request, for analysis
    dump.unlink(missing_ok=True)
    for b, mode in enumerate(args.blocks.split(",")):
        await wait_idle(backend)
        # each mode starts from the rates it measured itself (a FIFO block teaches the rate model an overloaded
        # engine; a real deployment runs one mode)
        cfg = set_scheduler(backend, mode=mode, ttft_budget_s=budget_s, **({"rates": rates[mode]} if mode in rates else {}))
        progress(f"  rates at the start of the block: {cfg['rates']}")
        schedule = [(at, corpus_text(work, n), n, out) for at, (n, out) in zip(times, shapes)]
        progress(f"block {b + 1}: {mode}, {len(schedule)} requests in {args.block_s:g} s")
        outs, t0 = await open_loop_block(backend, schedule, args.users, drain_s)
        blocks.append({"mode": mode, "outcomes": outs, "t0": t0})
        await wait_idle(backend)
        rates[mode] = set_scheduler(backend)["rates"]
        dump.parent.mkdir(parents=True, exist_ok=True)
        with open(dump, "a") as f:
            for o in outs:
                f.write(json.dumps({"block": b, "mode": mode, "t_send_s": o.t_send - t0, "prompt_tokens": o.prompt_tokens,
                                    "ttft_s": response_s(o), "finish": o.finish, "timing": o.timing}) + "\n")
        kinds = [classify(o) for o in outs]
        good = sum(1 for o, k in zip(outs, kinds) if k == "served" and response_s(o) <= slo_s)
        progress(f"  served {kinds.count('served')}, shed {kinds.count('shed')}, unfinished "
                 f"{kinds.count('unfinished')}, within SLO {good}")
    await wait_idle(backend)
    set_scheduler(backend, mode=cfg0["mode"], ttft_budget_s=cfg0["ttft_budget_s"])
    return {"unloaded": unloaded, "capacity": cap_outs, "sustainable": sustainable, "slo_s": slo_s,
            "budget_s": budget_s, "rate": rate, "blocks": blocks, "drain_s": drain_s, "max_running": max_running}


def corpus_text(work: Workload, n: int) -> str:
    return work.corpus.prompt(n)[0]


def _mode_stats(blocks: list[dict], mode: str, slo_s: float, block_s: float) -> dict:
    outs = [o for b in blocks if b["mode"] == mode for o in b["outcomes"]]
    n_blocks = sum(1 for b in blocks if b["mode"] == mode)
    kinds = [classify(o) for o in outs]
    served = [response_s(o) for o, k in zip(outs, kinds) if k == "served"]
    good = sum(1 for x in served if x <= slo_s)
    return {"requests": len(outs), "served": len(served), "shed": kinds.count("shed"),
            "unfinished": kinds.count("unfinished"), "errors": kinds.count("error"),
            "superseded": kinds.count("superseded"), "good": good,
            "goodput_rps": good / (n_blocks * block_s) if n_blocks else 0.0,
            "goodput_share": good / len(outs) if outs else 0.0,
            "served_ttft_ms": {k: v * 1000 for k, v in pcts(served).items()},
            "shed_answer_ms": {k: v * 1000 for k, v in pcts([response_s(o) for o, k in zip(outs, kinds)
                                                               if k == "shed"]).items()}}


def _report(args, work: Workload, r: dict) -> dict:
    import numpy as np

    slo_s = r["slo_s"]
    unl = {k: v * 1000 for k, v in pcts([response_s(o) for o in r["unloaded"]]).items()}
    fifo = _mode_stats(r["blocks"], "fifo", slo_s, args.block_s)
    ours = _mode_stats(r["blocks"], "latency", slo_s, args.block_s)
    ratio = ours["goodput_rps"] / fifo["goodput_rps"] if fifo["goodput_rps"] else float("inf")
    p95_ok = ours["served_ttft_ms"]["p95"] <= 2 * unl["p95"]
    report = Report("overload", "Overload A/B: latency-aware scheduler vs FIFO at ~3× the sustainable rate", started=_T0)
    report.add(f"""
One backend (one warm vLLM engine), its scheduler switched between blocks through `POST /debug/scheduler`
(`debug_endpoints=true`): **fifo** = the baseline, every request passed to vLLM as it arrives (vLLM batches up
to `max_num_seqs`); **latency** = ours (newest-first per user, at most {r['max_running']} requests in the engine,
shedding by predicted TTFT with a budget of {r['budget_s'] * 1000:.0f} ms = {args.budget_share:g} × SLO). Blocks
in the order `{args.blocks}` (ABBA, so drift in this shared machine's load hits both), each {args.block_s:g} s of
Poisson arrivals at the same times with the same length mix, fresh prompt text per request (no prefix-cache
help); after each block the client waits up to {r['drain_s']:.0f} s for stragglers, then disconnects (which
aborts what is left — counted as unfinished, i.e. not within the SLO).

* Prompts: real Python source with the trace's `ContextTokens` mix **clipped to {args.max_prompt_tokens} tokens**
  ({work.clipped_share * 100:.0f} % of the trace's requests are longer; the models' context is 2,048); outputs
  `GeneratedTokens` clipped to 1..{args.max_output_tokens}.
* **Unloaded** (one request at a time, {len(r['unloaded'])} requests): TTFT p50 {unl['p50']:.0f} ms, p95
  {unl['p95']:.0f} ms. **SLO** = {'given' if args.slo_ms else '2 × unloaded p95'} = {slo_s * 1000:.0f} ms.
* **Sustainable rate** = {r['sustainable']:.2f} req/s ({'given' if args.sustainable_rps else f"completions/s of {r['max_running']} clients asking back to back for {args.capacity_s:g} s"}).
  **Offered** = {args.rate_multiple:g} × that = {r['rate']:.2f} req/s.
* TTFT is client-measured (send → first chunk; empty completion: → done). **Goodput** = requests served with
  TTFT ≤ SLO per second of block (and as a share of all requests).
""")
    rows = []
    for name, st in (("fifo (baseline)", fifo), ("latency (ours)", ours)):
        rows.append([name, st["requests"], st["served"], st["shed"], st["unfinished"], st["errors"],
                     round(st["goodput_rps"], 3), round(st["goodput_share"], 3), st["served_ttft_ms"]["p50"],
                     st["served_ttft_ms"]["p95"], st["shed_answer_ms"]["p50"]])
    report.add(md_table(["mode", "requests", "served", "shed", "unfinished", "errors", "goodput req/s",
                         "goodput share", "served TTFT p50 ms", "served p95 ms", "shed answered p50 ms"], rows))
    report.add(f"""
**Targets**
* goodput ≥ 2 × baseline: {ours['goodput_rps']:.3f} vs {fifo['goodput_rps']:.3f} req/s = **{ratio:.1f}×** →
  {'met' if ratio >= 2 else 'NOT met'}.
* p95 TTFT of served requests ≤ 2 × unloaded p95 ({2 * unl['p95']:.0f} ms): ours {ours['served_ttft_ms']['p95']:.0f} ms
  → {'met' if p95_ok else 'NOT met'} (baseline: {fifo['served_ttft_ms']['p95']:.0f} ms).
""")
    fig, axes = figure(1, 2, figsize=(13, 4.5))
    ax = axes[0]
    offset = 0.0
    for b in r["blocks"]:
        color = "tab:red" if b["mode"] == "fifo" else "tab:green"
        pts = [(o.t_send - b["t0"] + offset, response_s(o) * 1000) for o in b["outcomes"]
               if classify(o) == "served"]
        shed = [(o.t_send - b["t0"] + offset, response_s(o) * 1000) for o in b["outcomes"] if classify(o) == "shed"]
        if pts:
            ax.scatter(*zip(*pts), s=8, c=color, alpha=0.7)
        if shed:
            ax.scatter(*zip(*shed), s=8, c="tab:gray", marker="x", alpha=0.5)
        ax.text(offset + 1, slo_s * 1000 * 1.3, b["mode"], fontsize=8)
        offset += args.block_s + 5
    ax.axhline(slo_s * 1000, color="tab:orange", ls="--", label=f"SLO {slo_s * 1000:.0f} ms")
    ax.set_yscale("log")
    ax.set_xlabel("time within the blocks (s); red fifo, green ours, grey x shed")
    ax.set_ylabel("TTFT (ms)")
    ax.legend(loc="upper right")
    ax = axes[1]
    for name, mode, color in (("fifo", "fifo", "tab:red"), ("ours", "latency", "tab:green")):
        xs = np.sort([response_s(o) * 1000 for b in r["blocks"] if b["mode"] == mode for o in b["outcomes"]
                      if classify(o) == "served"])
        n_all = sum(len(b["outcomes"]) for b in r["blocks"] if b["mode"] == mode)
        if len(xs):
            ax.plot(xs, np.arange(1, len(xs) + 1) / n_all, color=color, label=f"{name} (share of all requests)")
    ax.axvline(slo_s * 1000, color="tab:orange", ls="--", label="SLO")
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (ms)")
    ax.set_ylabel("share of requests served within x")
    ax.legend()
    report.add_figure(fig, "ttft", "TTFT per block and CDF")
    headline = {"bench": "overload", "sustainable_rps": round(r["sustainable"], 3), "offered_rps": round(r["rate"], 3),
                "unloaded_ttft_p95_ms": round(unl["p95"], 1), "slo_ms": round(slo_s * 1000, 1),
                "goodput_rps": {"fifo": round(fifo["goodput_rps"], 3), "latency": round(ours["goodput_rps"], 3)},
                "goodput_ratio": round(ratio, 2) if ratio != float("inf") else None,
                "served_ttft_p95_ms": {"fifo": round(fifo["served_ttft_ms"]["p95"], 1),
                                       "latency": round(ours["served_ttft_ms"]["p95"], 1)},
                "shed_share_latency": round(ours["shed"] / ours["requests"], 3) if ours["requests"] else None,
                "target_goodput_2x_met": ratio >= 2, "target_p95_2x_unloaded_met": p95_ok}
    return report.finish(finite(headline))
