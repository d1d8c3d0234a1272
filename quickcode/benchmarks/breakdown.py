"""`quickcode report`: where a completion's time goes — component, p50, p95, share — from requests it drives."""
from __future__ import annotations

import argparse
import time
import asyncio
import statistics

from quickcode.benchmarks.loadgen import (CodeCorpus, Session, backend_from_url, finite, histogram, histogram_quantile, progress,
                                          scrape, bench_backend)
from quickcode.benchmarks.report import Report, md_table, pcts

# (label, how to get it in ms from (server Timing dict, client total ms))
COMPONENTS = [
    ("queue (admission)", lambda t, c: t["queue_ms"]),
    ("tokenize", lambda t, c: t["tokenize_ms"]),
    ("prefill (engine TTFT)", lambda t, c: t["ttft_ms"]),
    ("first decode step", lambda t, c: t["first_decode_ms"]),
    ("rest of generation", lambda t, c: max(0.0, t["generate_ms"] - t["first_decode_ms"])),
    ("server other", lambda t, c: max(0.0, t["total_ms"] - t["queue_ms"] - t["tokenize_ms"] - t["ttft_ms"]
                                      - t["generate_ms"])),
    ("network + client", lambda t, c: max(0.0, c - t["total_ms"])),
]


_T0 = 0.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="ws://127.0.0.1:8765/v1/ws", help="the backend to measure")
    p.add_argument("--start", action="store_true", help="start a backend of its own instead of using --url")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings of the backend started")
    p.add_argument("-n", "--requests", type=int, default=40)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> dict:
    global _T0
    _T0 = time.time()
    corpus = CodeCorpus(seed=args.seed)
    backend = bench_backend("breakdown", list(args.set)) if args.start else backend_from_url(args.url)
    try:
        before = scrape(backend.http_url)
        outs = asyncio.run(_drive(backend.ws_url, corpus, args))
        after = scrape(backend.http_url)
    finally:
        backend.stop()
    served = [o for o in outs if o.finish in ("stop", "length") and o.timing]
    if not served:
        raise SystemExit(f"no request was served ({[o.finish for o in outs]})")
    table, values = [], {}
    client_ms = [o.total_s * 1000 for o in served]
    mean_total = statistics.fmean(client_ms)
    for label, get in COMPONENTS:
        xs = [get(o.timing, o.total_s * 1000) for o in served]
        values[label] = xs
        p = pcts(xs, (50, 95))
        table.append([label, round(p["p50"], 2), round(p["p95"], 2), f"{100 * statistics.fmean(xs) / mean_total:.1f} %"])
    pt = pcts(client_ms, (50, 95))
    table.append(["**total (client)**", round(pt["p50"], 2), round(pt["p95"], 2), "100 %"])
    ttft = pcts([(o.ttft_s if o.t_first else o.total_s) * 1000 for o in served], (50, 95))
    tps = [o.timing["tokens_per_s"] for o in served if o.timing.get("tokens_per_s")]
    spec_p = sum(o.timing.get("spec_proposed", 0) for o in served)
    spec_a = sum(o.timing.get("spec_accepted", 0) for o in served)
    cached = sum(o.timing.get("cached_tokens", 0) for o in served) / max(1, sum(o.timing["prompt_tokens"] for o in served))
    print(md_table(["component", "p50 ms", "p95 ms", "share"], table), flush=True)
    report = Report("breakdown", "Latency breakdown of a completion (the seed-style table)", started=_T0)
    report.add(f"""
{len(served)} of {len(outs)} requests served by `{backend.ws_url}` ({args.concurrency} at a time), prompts of
{args.prompt_tokens} tokens of real Python source (fresh text each: no prefix-cache help), `max_tokens`
{args.max_tokens}, greedy. Server components come from the `timing` of each `done` frame; **network + client** is
the client-measured time (send → `done`) minus the server's `total_ms`. Share = mean of the component / mean
client total.
""")
    report.add(md_table(["component", "p50 ms", "p95 ms", "share"], table))
    spec = f"{spec_a}/{spec_p} = {spec_a / spec_p:.2f}" if spec_p else "none proposed (speculation off)"
    report.add(f"""
Client-measured TTFT p50 {ttft['p50']:.1f} ms, p95 {ttft['p95']:.1f} ms; decode {statistics.median(tps) if tps else 0:.1f}
tokens/s per request (median); speculative tokens accepted/proposed {spec}; prompt tokens from the prefix cache
{cached * 100:.1f} %.
""")
    hist_rows = []
    for name, label in (("quickcode_queue_seconds", "queue"), ("quickcode_engine_ttft_seconds", "prefill"),
                        ("quickcode_ttft_seconds", "TTFT (server: frame in → first chunk out)"),
                        ("quickcode_e2e_seconds", "end to end (server)")):
        h = histogram(after, name, before)
        hist_rows.append([label, int(h[-1][1]) if h else 0, round(histogram_quantile(h, 0.5) * 1000, 1),
                          round(histogram_quantile(h, 0.95) * 1000, 1)])
    report.add("The same run seen by the backend's Prometheus histograms (bucket-interpolated):\n\n"
               + md_table(["histogram", "count", "p50 ms", "p95 ms"], hist_rows))
    headline = {"bench": "breakdown", "requests": len(served), "total_p50_ms": round(pt["p50"], 2),
                "ttft_p50_ms": round(ttft["p50"], 2), "ttft_p95_ms": round(ttft["p95"], 2)}
    for label, xs in values.items():
        headline[label.split(" (")[0].replace(" ", "_").replace("+", "and") + "_p50_ms"] = round(pcts(xs, (50,))["p50"], 2)
    return report.finish(finite(headline))


async def _drive(url: str, corpus: CodeCorpus, args) -> list:
    sessions = [await Session(url, f"report{i}").open() for i in range(args.concurrency)]
    outs = []
    per = [args.requests // args.concurrency + (1 if i < args.requests % args.concurrency else 0)
           for i in range(args.concurrency)]

    async def client(s: Session, n: int):
        for _ in range(n):
            text, _ = corpus.prompt(args.prompt_tokens)
            o = s.complete(text, max_tokens=args.max_tokens, prompt_tokens=args.prompt_tokens)
            await s.wait(o.id, 300)
            outs.append(o)
            if len(outs) % 10 == 0:
                progress(f"  {len(outs)}/{args.requests}")

    await asyncio.gather(*(client(s, n) for s, n in zip(sessions, per)))
    for s in sessions:
        await s.close()
    return outs
