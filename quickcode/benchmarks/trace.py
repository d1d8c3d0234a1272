"""`quickcode bench trace`: replay an Azure-format code-completion trace over WebSockets, time-scaled."""
from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from quickcode.benchmarks.loadgen import (Backend, CodeCorpus, Outcome, Session, backend_from_url, finite, progress, scrape,
                                          bench_backend)
from quickcode.benchmarks.report import Report, figure, md_table, pcts, percentile

DEFAULT_TRACE = Path("/work/shared/traces/azure_llm_inference_code_2023.csv")


@dataclass
class TraceRow:
    t_s: float               # seconds since the trace's first request
    context_tokens: int
    generated_tokens: int


def load_trace(path: Path) -> list[TraceRow]:
    """TIMESTAMP,ContextTokens,GeneratedTokens (timestamps with up to 7 fractional digits)."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            ts = dt.datetime.strptime(r["TIMESTAMP"][:26], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            rows.append((ts, int(r["ContextTokens"]), int(r["GeneratedTokens"])))
    rows.sort()
    t0 = rows[0][0]
    return [TraceRow(ts - t0, c, g) for ts, c, g in rows]


@dataclass
class Planned:
    """One request of the replay: when (wall seconds from the start), who, what."""
    at_s: float
    user: int
    prompt: str
    prompt_tokens: int
    max_tokens: int
    typing: bool             # a keystroke continuing the same user's previous request (supersedes it)


def plan(rows: list[TraceRow], corpus: CodeCorpus, *, speed: float, start_s: float, duration_s: float,
         users: int, typist_share: float, burst_gap_s: float, max_prompt_tokens: int, max_output_tokens: int,
         seed: int) -> list[Planned]:
    """Requests of trace window [start_s, start_s + duration_s·speed), at wall time (t - start_s)/speed.
    A request that follows another within `burst_gap_s` (wall) goes, with probability 0.8, to the same user
    if that user is a typist: a keystroke that extends the previous prompt by 1-3 tokens (a real typing
    burst: it supersedes the previous request and reuses its prefix). Otherwise a random user asks with a
    fresh prompt of ContextTokens (clipped to `max_prompt_tokens`)."""
    rng = random.Random(seed)
    n_typists = max(1, round(users * typist_share))
    window = [r for r in rows if start_s <= r.t_s < start_s + duration_s * speed]
    out: list[Planned] = []
    last: dict[int, tuple[int, int]] = {}     # user → (corpus start, tokens) of their last prompt
    prev_at, prev_user = -1e9, -1
    for r in window:
        at = (r.t_s - start_s) / speed
        max_tokens = max(1, min(r.generated_tokens, max_output_tokens))
        if at - prev_at <= burst_gap_s and prev_user < n_typists and rng.random() < 0.8:
            user = prev_user
            start, n = last[user]
            n = min(n + rng.randint(1, 3), max_prompt_tokens)
            text, _ = corpus.prompt(n, start)
            out.append(Planned(at, user, text, n, max_tokens, True))
        else:
            user = rng.randrange(users)
            n = max(8, min(r.context_tokens, max_prompt_tokens))
            text, start = corpus.prompt(n)
            out.append(Planned(at, user, text, n, max_tokens, False))
        last[user] = (start, n)
        prev_at, prev_user = at, user
    return out


def classify(o: Outcome) -> str:
    if o.t_end is None:
        return "unfinished"
    if o.finish in ("stop", "length"):
        return "served"
    if o.finish.startswith("error"):
        return "error"
    return o.finish           # shed | superseded | cancelled


def response_s(o: Outcome) -> float | None:
    """Time to the first chunk; for an empty answer (shed, or the model stopped at once) time to `done`."""
    return o.ttft_s if o.t_first is not None else o.total_s


async def replay(backend: Backend, planned: list[Planned], users: int, drain_s: float,
                 ) -> tuple[list[Outcome], list[bool], float]:
    sessions = [await Session(backend.ws_url, f"user{u}").open() for u in range(users)]
    outcomes: list[Outcome] = []
    t0 = time.perf_counter()
    next_report = 10.0
    for p in planned:
        delay = t0 + p.at_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        outcomes.append(sessions[p.user].complete(p.prompt, max_tokens=p.max_tokens, prompt_tokens=p.prompt_tokens))
        if p.at_s >= next_report:
            done = sum(o.t_end is not None for o in outcomes)
            progress(f"  t={p.at_s:5.0f} s  sent {len(outcomes)}/{len(planned)}  ended {done}")
            next_report += 10.0
    sent_s = time.perf_counter() - t0
    deadline = time.perf_counter() + drain_s
    while any(o.t_end is None for o in outcomes) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    for s in sessions:
        await s.close()
    return outcomes, [p.typing for p in planned], sent_s


def summarize(outcomes: list[Outcome], slo_s: float, duration_s: float) -> dict:
    kinds = [classify(o) for o in outcomes]
    n = len(outcomes)
    served = [response_s(o) for o, k in zip(outcomes, kinds) if k == "served"]
    good = sum(1 for x in served if x is not None and x <= slo_s)
    superseded = kinds.count("superseded")
    wanted = n - superseded - kinds.count("cancelled")
    shed_resp = [response_s(o) for o, k in zip(outcomes, kinds) if k == "shed"]
    return {
        "requests": n, "served": len(served), "shed": kinds.count("shed"), "superseded": superseded,
        "errors": kinds.count("error"), "unfinished": kinds.count("unfinished"),
        "ttft_ms": {k: round(v * 1000, 1) for k, v in pcts([x for x in served if x is not None]).items()},
        "shed_answer_ms": {k: round(v * 1000, 1) for k, v in pcts([x for x in shed_resp if x is not None]).items()},
        "goodput_share": round(good / wanted, 3) if wanted else 0.0,
        "goodput_rps": round(good / duration_s, 3),
        "shed_rate": round(kinds.count("shed") / n, 3) if n else 0.0,
        "superseded_rate": round(superseded / n, 3) if n else 0.0,
        "offered_rps": round(n / duration_s, 3),
    }


def plot(report: Report, outcomes: list[Outcome], t0: float, slo_s: float) -> None:
    """TTFT over time and its CDF, into `report`."""
    import numpy as np

    colors = {"served": "tab:green", "shed": "tab:red", "superseded": "tab:gray", "cancelled": "tab:purple",
              "error": "black", "unfinished": "black"}
    fig, (ax, ax2) = figure(1, 2, figsize=(13, 4.5))
    for kind, color in colors.items():
        pts = [(o.t_send - t0, response_s(o) * 1000) for o in outcomes
               if classify(o) == kind and response_s(o) is not None]
        if pts:
            xs, ys = zip(*pts)
            ax.scatter(xs, ys, s=10, c=color, label=kind, alpha=0.7, marker="x" if kind == "shed" else "o")
    ax.axhline(slo_s * 1000, color="tab:orange", ls="--", label=f"SLO {slo_s * 1000:.0f} ms")
    ax.set_yscale("log")
    ax.set_xlabel("send time (s)")
    ax.set_ylabel("time to first chunk / to done (ms)")
    sends = np.array([o.t_send - t0 for o in outcomes])
    if len(sends):
        axr = ax.twinx()
        bins = np.arange(0, sends.max() + 2, 1.0)
        axr.step(bins[:-1], np.histogram(sends, bins)[0], where="post", color="tab:blue", alpha=0.3)
        axr.set_ylabel("offered requests/s", color="tab:blue")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("TTFT over time")
    served = np.sort([response_s(o) * 1000 for o in outcomes if classify(o) == "served" and response_s(o) is not None])
    if len(served):
        ax2.plot(served, np.arange(1, len(served) + 1) / len(served), color="tab:green", label="served")
    ax2.axvline(slo_s * 1000, color="tab:orange", ls="--", label="SLO")
    ax2.set_xscale("log")
    ax2.set_xlabel("TTFT (ms)")
    ax2.set_ylabel("share of served requests")
    ax2.set_title("CDF of TTFT (served)")
    ax2.legend()
    report.add_figure(fig, "ttft", "TTFT over time and CDF")


_T0 = 0.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="CSV: TIMESTAMP,ContextTokens,GeneratedTokens")
    p.add_argument("--speed", type=float, default=0.1, help="time scale: 2 = twice as fast as recorded")
    p.add_argument("--start-s", type=float, default=180.0, help="offset into the trace (s of trace time)")
    p.add_argument("--duration-s", type=float, default=120.0, help="wall-clock length of the replay")
    p.add_argument("--url", default=None, help="ws://host:port/v1/ws of a running backend (else start one)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings of the backend started")
    p.add_argument("--users", type=int, default=40)
    p.add_argument("--typist-share", type=float, default=0.25, help="share of users who type in bursts")
    p.add_argument("--burst-gap-ms", type=float, default=300.0)
    p.add_argument("--slo-ms", type=float, default=2000.0,
                   help="TTFT SLO for goodput (default ≈ 2 × the unloaded p95 of 1,500-token prompts on the 2-core CPU)")
    p.add_argument("--max-prompt-tokens", type=int, default=1500, help="clip: the models' context is 2048")
    p.add_argument("--max-output-tokens", type=int, default=64)
    p.add_argument("--drain-s", type=float, default=60.0, help="wait this long for stragglers after the last send")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compare-sharing", action="store_true",
                   help="replay the same plan twice: prefix cache shared by all users vs isolated per user "
                        "(cache_isolation=shared | user, quickcode/backend/tenancy.py); report both hit rates")


def cache_shares(outcomes: list[Outcome], typing: list[bool]) -> dict[str, list[float]]:
    """Per served request: the share of its prompt tokens found in the prefix cache, for the keystrokes of a
    typing burst (the same user's growing prompt) and for fresh prompts."""
    out: dict[str, list[float]] = {"keystroke": [], "fresh": []}
    for o, t in zip(outcomes, typing):
        p = o.timing.get("prompt_tokens", 0)
        if classify(o) == "served" and p:
            out["keystroke" if t else "fresh"].append(o.timing.get("cached_tokens", 0) / p)
    return out


def mean_ci(values: list[float], seed: int = 0, n_boot: int = 2000) -> tuple[float, float, float]:
    """Mean and its 95% bootstrap interval (requests resampled)."""
    if not values:
        return float("nan"), float("nan"), float("nan")
    rng = random.Random(seed)
    k = len(values)
    means = [sum(values[rng.randrange(k)] for _ in range(k)) / k for _ in range(n_boot)]
    return sum(values) / k, percentile(means, 2.5), percentile(means, 97.5)


def run_sharing(args: argparse.Namespace, planned: list[Planned], settings: list[str]) -> dict:
    """The same plan against two fresh backends: `cache_isolation=shared` (no salt) and `user` (a salt per
    session, each session being one user of this open server). Isolation must cost only the hits one user
    took from another's prompts; a user's own typing bursts keep theirs."""
    arms = {}
    for arm in ("shared", "user"):
        progress(f"arm {arm}: starting a backend with cache_isolation={arm}")
        backend = bench_backend(f"trace-{arm}", [*settings, f"cache_isolation={arm}"])
        try:
            before = scrape(backend.http_url)
            outcomes, typing, _ = asyncio.run(replay(backend, planned, args.users, args.drain_s))
            after = scrape(backend.http_url)
        finally:
            backend.stop()
        q, h = (after.get(f"quickcode_prefix_cache_{k}_tokens_total", 0) - before.get(f"quickcode_prefix_cache_{k}_tokens_total", 0)
                for k in ("queries", "hits"))
        shares = cache_shares(outcomes, typing)
        s = summarize(outcomes, args.slo_ms / 1000, args.duration_s)
        arms[arm] = {"summary": s, "engine_hit_rate": h / q if q else 0.0, "hit_tokens": int(h),
                     "keystroke": mean_ci(shares["keystroke"], args.seed), "n_keystroke": len(shares["keystroke"]),
                     "fresh": mean_ci(shares["fresh"], args.seed), "n_fresh": len(shares["fresh"])}
    report = Report("trace-sharing", "Prefix-cache sharing vs per-user isolation (trace replay)", started=_T0)
    report.add(f"""
Command: `quickcode bench trace --compare-sharing {' '.join(a for a in sys.argv[3:] if a != '--compare-sharing')}`

The same replay plan (`{args.trace.name}` from t = {args.start_s:g} s, speed ×{args.speed:g}, {args.duration_s:g} s wall,
{args.users} users, seed {args.seed}: {len(planned)} requests, {sum(p.typing for p in planned)} of them keystrokes of a
typing burst) against two fresh backends that differ only in `cache_isolation`: **shared** (no `cache_salt`: any
user can hit any user's blocks, and learn from `cached_tokens` what others sent) and **user** (each user's
requests carry their own salt: quickcode/backend/tenancy.py). Cached share = `cached_tokens / prompt_tokens` of each
served request (mean, 95% bootstrap interval over requests); engine hit rate = vLLM's hit tokens / queried tokens
over the run.
""")
    rows = []
    for arm, a in arms.items():
        s = a["summary"]
        k, f = a["keystroke"], a["fresh"]
        rows.append([arm, s["requests"], s["served"], f"{k[0]:.3f} [{k[1]:.3f}, {k[2]:.3f}] (n={a['n_keystroke']})",
                     f"{f[0]:.3f} [{f[1]:.3f}, {f[2]:.3f}] (n={a['n_fresh']})", f"{a['engine_hit_rate']:.3f}",
                     a["hit_tokens"], s["ttft_ms"]["p50"], s["ttft_ms"]["p95"]])
    report.add(md_table(["cache", "requests", "served", "cached share, keystrokes", "cached share, fresh prompts",
                         "engine hit rate", "hit tokens", "TTFT p50 ms", "p95 ms"], rows))
    ks, ku = arms["shared"]["keystroke"][0], arms["user"]["keystroke"][0]
    report.add(f"Keystrokes (hits inside one user's tenant): {ku:.3f} isolated vs {ks:.3f} shared "
               f"(ratio {ku / ks if ks else float('nan'):.2f}). What isolation removes is the fresh prompts' hits on "
               f"other users' blocks: {arms['user']['fresh'][0]:.3f} vs {arms['shared']['fresh'][0]:.3f}.")
    headline = {"bench": "trace-sharing", "requests": len(planned),
                **{f"{arm}_{k}": v for arm, a in arms.items() for k, v in (
                    ("keystroke_cached_share", round(a["keystroke"][0], 4)),
                    ("keystroke_cached_ci", [round(a["keystroke"][1], 4), round(a["keystroke"][2], 4)]),
                    ("fresh_cached_share", round(a["fresh"][0], 4)),
                    ("engine_hit_rate", round(a["engine_hit_rate"], 4)),
                    ("ttft_p50_ms", a["summary"]["ttft_ms"]["p50"]), ("ttft_p95_ms", a["summary"]["ttft_ms"]["p95"]))}}
    return report.finish(finite(headline))


def run(args: argparse.Namespace) -> dict:
    global _T0
    _T0 = time.time()
    slo_s = args.slo_ms / 1000
    progress("loading the trace and the code corpus")
    rows = load_trace(args.trace)
    corpus = CodeCorpus(seed=args.seed)
    planned = plan(rows, corpus, speed=args.speed, start_s=args.start_s, duration_s=args.duration_s,
                   users=args.users, typist_share=args.typist_share, burst_gap_s=args.burst_gap_ms / 1000,
                   max_prompt_tokens=args.max_prompt_tokens, max_output_tokens=args.max_output_tokens, seed=args.seed)
    clipped = sum(1 for r in rows if args.start_s <= r.t_s < args.start_s + args.duration_s * args.speed
                  and r.context_tokens > args.max_prompt_tokens)
    progress(f"{len(planned)} requests over {args.duration_s:.0f} s ({sum(p.typing for p in planned)} keystrokes "
             f"of typing bursts); {clipped} prompts clipped to {args.max_prompt_tokens} tokens")
    settings = [f"ttft_budget_ms={args.slo_ms * 0.75:g}", *args.set]
    if args.compare_sharing:
        if args.url:
            raise SystemExit("--compare-sharing starts its own two backends: drop --url")
        return run_sharing(args, planned, settings)
    backend = backend_from_url(args.url) if args.url else bench_backend("trace", settings)
    try:
        before = scrape(backend.http_url)
        t_start = time.perf_counter()
        outcomes, typing, sent_s = asyncio.run(replay(backend, planned, args.users, args.drain_s))
        after = scrape(backend.http_url)
    finally:
        backend.stop()
    s = summarize(outcomes, slo_s, args.duration_s)
    server_counts = {k.split('"')[1]: int(after[k] - before.get(k, 0)) for k in after
                     if k.startswith("quickcode_requests_total{")}
    report = Report("trace", "Trace replay (Azure code-completion trace over WebSockets)", started=_T0)
    report.add(f"""
Replay of `{args.trace.name}` from t = {args.start_s:g} s of trace time, **speed ×{args.speed:g}**, for
{args.duration_s:g} s of wall time: {s['requests']} requests ({s['offered_rps']} req/s offered on average; the
trace is bursty). Backend: {'`' + args.url + '`' if args.url else 'started by the benchmark with `' + ' '.join('--set ' + x for x in settings) + '`'}.

* **Prompts** are real Python source (stdlib) cut to the trace's `ContextTokens` with the target's tokenizer,
  **clipped to {args.max_prompt_tokens} tokens** (the models' context is 2,048 and the server keeps at most
  `max_prompt_tokens`=1536): {clipped} of the window's prompts were longer. `max_tokens` = `GeneratedTokens`
  clipped to 1..{args.max_output_tokens}.
* **Users**: {args.users} WebSocket sessions; {max(1, round(args.users * args.typist_share))} are typists. A request
  that follows another within {args.burst_gap_ms:g} ms (wall) goes, with probability 0.8, to the same typist as a
  keystroke extending the previous prompt by 1–3 tokens ({sum(typing)} such keystrokes): it supersedes the
  previous request and reuses its prefix in vLLM's cache.
* **TTFT** is measured by the client: send → first chunk (for an empty completion: send → `done`).
  **Goodput** = served requests with TTFT ≤ SLO ({args.slo_ms:g} ms), as a share of the requests the users still
  wanted (all − superseded) and as a rate over the replay.
""")
    report.add(md_table(
        ["requests", "served", "shed", "superseded", "errors", "unfinished", "TTFT p50 ms", "p95 ms", "p99 ms",
         "goodput share", "goodput req/s", "shed answered p50 ms"],
        [[s["requests"], s["served"], s["shed"], s["superseded"], s["errors"], s["unfinished"],
          s["ttft_ms"]["p50"], s["ttft_ms"]["p95"], s["ttft_ms"]["p99"], s["goodput_share"], s["goodput_rps"],
          s["shed_answer_ms"]["p50"]]]))
    report.add("Server-side counters over the run (`quickcode_requests_total` by finish reason): "
               + ", ".join(f"{k} {v}" for k, v in sorted(server_counts.items())) + ".")
    plot(report, outcomes, min((o.t_send for o in outcomes), default=t_start), slo_s)
    headline = {"bench": "trace", "speed": args.speed, "duration_s": args.duration_s, "slo_ms": args.slo_ms,
                "requests": s["requests"], "ttft_p50_ms": s["ttft_ms"]["p50"], "ttft_p95_ms": s["ttft_ms"]["p95"],
                "ttft_p99_ms": s["ttft_ms"]["p99"], "goodput_share": s["goodput_share"],
                "goodput_rps": s["goodput_rps"], "shed_rate": s["shed_rate"],
                "superseded_rate": s["superseded_rate"], "errors": s["errors"], "unfinished": s["unfinished"]}
    return report.finish(finite(headline))
