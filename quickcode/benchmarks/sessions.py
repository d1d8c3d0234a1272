"""`quickcode bench sessions`: 10,000 concurrent WebSocket sessions on one backend: memory, loop lag, no leaks."""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import sysconfig
import time
from pathlib import Path

from quickcode.benchmarks.loadgen import (Backend, Session, backend_from_url, finite, histogram, histogram_quantile, progress,
                                          raise_nofile, scrape, share_within, bench_backend)
from quickcode.benchmarks.report import Report, figure, md_table

LAG = "quickcode_event_loop_lag_seconds"
LAG_CPU = "quickcode_event_loop_lag_cpu_seconds"


def _typing_text() -> str:
    return (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()


async def _worker_main(url: str, n: int, typists: int, conn, go_type, stop_type, done, seed: int) -> None:
    """Hold `n` sessions; while `go_type` is set and `stop_type` is not, `typists` of them type in bursts."""
    rng = random.Random(seed)
    sem = asyncio.Semaphore(64)                      # concurrent handshakes per worker
    sessions: list[Session] = []
    failed = 0

    async def open_one(i: int):
        nonlocal failed
        async with sem:
            for attempt in range(3):
                try:
                    sessions.append(await Session(url, f"s{seed}-{i}").open(open_timeout_s=60))
                    return
                except Exception:
                    await asyncio.sleep(0.5 * (attempt + 1))
            failed += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(open_one(i) for i in range(n)))
    conn.send(("connected", len(sessions), failed, time.perf_counter() - t0))
    while not go_type.is_set():
        await asyncio.sleep(0.05)
    text = _typing_text()
    sent = 0

    async def typist(s: Session):
        nonlocal sent
        pos = rng.randrange(2000, len(text) - 4000)
        await asyncio.sleep(rng.uniform(0, 3))
        while not stop_type.is_set():
            for _ in range(rng.randint(3, 8)):       # a burst of keystrokes, ~8/s
                if stop_type.is_set():
                    break
                pos += 1
                s.complete(text[pos - 1500:pos], max_tokens=8)
                sent += 1
                await asyncio.sleep(rng.uniform(0.08, 0.2))
            await asyncio.sleep(rng.uniform(1.5, 4.0))  # reading, thinking

    tasks = [asyncio.create_task(typist(s)) for s in sessions[:typists]]
    while not stop_type.is_set():
        await asyncio.sleep(0.05)
    await asyncio.gather(*tasks)
    deadline = time.perf_counter() + 60
    while any(s.pending for s in sessions[:typists]) and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    finishes: dict[str, int] = {}
    for s in sessions:
        for o in s.outcomes.values():
            key = o.finish or "unfinished"
            finishes[key] = finishes.get(key, 0) + 1
    conn.send(("typed", sent, finishes))
    while not done.is_set():
        await asyncio.sleep(0.05)
    await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
    conn.send(("closed",))


def _worker(url, n, typists, conn, go_type, stop_type, done, seed):
    raise_nofile()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(_worker_main(url, n, typists, conn, go_type, stop_type, done, seed))


def _rss_bytes(pid: int) -> int:
    import psutil

    return psutil.Process(pid).memory_info().rss


def _lag(before: dict, after: dict) -> dict:
    h = histogram(after, LAG, before)
    hc = histogram(after, LAG_CPU, before)
    n = h[-1][1] if h else 0
    return {"samples": int(n), "p50_ms": histogram_quantile(h, 0.5) * 1000, "p99_ms": histogram_quantile(h, 0.99) * 1000,
            "within_10ms": share_within(h, 0.01), "cpu_p99_ms": histogram_quantile(hc, 0.99) * 1000,
            "cpu_within_10ms": share_within(hc, 0.01)}


_T0 = 0.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend (then give --pid for its memory)")
    p.add_argument("--pid", type=int, default=None, help="pid of the backend process at --url")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings of the backend started")
    p.add_argument("--sessions", type=int, default=10_000)
    p.add_argument("--typing-share", type=float, default=0.01, help="share of the sessions that type")
    p.add_argument("--workers", type=int, default=4, help="client processes holding the sockets")
    p.add_argument("--hold-s", type=float, default=45.0, help="how long the typists type")


def run(args: argparse.Namespace) -> dict:
    global _T0
    _T0 = time.time()
    raise_nofile()
    backend = backend_from_url(args.url) if args.url else bench_backend("sessions", list(args.set))
    pid = args.pid or backend.pid
    try:
        res = _run(args, backend, pid)
    finally:
        backend.stop()
    return _report(args, res)


def _run(args, backend: Backend, pid: int | None) -> dict:
    async def warm():                       # import and allocate what the first sessions need, then measure
        ss = [await Session(backend.ws_url, f"warm{i}").open() for i in range(50)]
        o = ss[0].complete("def f(x):\n    return", max_tokens=4)
        await ss[0].wait(o.id, 120)
        for s in ss:
            await s.close()
    asyncio.run(warm())
    time.sleep(2)
    m0 = scrape(backend.http_url)
    rss0 = _rss_bytes(pid) if pid else None
    ctx = mp.get_context("spawn")
    go_type, stop_type, done = ctx.Event(), ctx.Event(), ctx.Event()
    per = [args.sessions // args.workers + (1 if i < args.sessions % args.workers else 0) for i in range(args.workers)]
    n_typists = round(args.sessions * args.typing_share)
    typists = [n_typists // args.workers + (1 if i < n_typists % args.workers else 0) for i in range(args.workers)]
    pipes, procs = [], []
    t0 = time.perf_counter()
    for i in range(args.workers):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(backend.ws_url, per[i], typists[i], child, go_type, stop_type, done, i),
                        daemon=True)
        p.start()
        pipes.append(parent)
        procs.append(p)
    progress(f"opening {args.sessions} sessions from {args.workers} client processes")
    connected = [pp.recv() for pp in pipes]
    connect_s = time.perf_counter() - t0
    n_open = sum(c[1] for c in connected)
    n_failed = sum(c[2] for c in connected)
    progress(f"  {n_open} open, {n_failed} failed, in {connect_s:.1f} s")
    time.sleep(5)                               # settle: idle sessions only
    m_idle = scrape(backend.http_url)
    rss_idle = _rss_bytes(pid) if pid else None
    progress(f"idle: server sees {m_idle.get('quickcode_sessions', 0):.0f} sessions; typing for {args.hold_s:g} s "
             f"({n_typists} typists)")
    time.sleep(5)
    m_idle2 = scrape(backend.http_url)
    go_type.set()
    time.sleep(args.hold_s)
    stop_type.set()
    typed = [pp.recv() for pp in pipes]
    m_hold = scrape(backend.http_url)
    rss_hold = _rss_bytes(pid) if pid else None
    sent = sum(t[1] for t in typed)
    finishes: dict[str, int] = {}
    for t in typed:
        for k, v in t[2].items():
            finishes[k] = finishes.get(k, 0) + v
    done.set()
    for pp in pipes:
        pp.recv()
    for p in procs:
        p.join(30)
    time.sleep(3)
    m_end = scrape(backend.http_url)
    return {"loadavg": " / ".join(f"{x:.1f}" for x in os.getloadavg()), "connected": n_open, "failed": n_failed, "connect_s": connect_s, "rss0": rss0, "rss_idle": rss_idle,
            "rss_hold": rss_hold, "m0": m0, "m_idle": m_idle, "m_idle2": m_idle2, "m_hold": m_hold, "m_end": m_end,
            "sent": sent, "finishes": finishes, "typists": n_typists}


def _report(args, r: dict) -> dict:
    n = r["connected"]
    per_session_kb = ((r["rss_idle"] - r["rss0"]) / n / 1024) if r["rss0"] and n else float("nan")
    lag_connect = _lag(r["m0"], r["m_idle"])
    lag_idle = _lag(r["m_idle"], r["m_idle2"])
    lag_hold = _lag(r["m_idle2"], r["m_hold"])
    ended = sum(v for k, v in r["finishes"].items() if k != "unfinished")
    unfinished = r["finishes"].get("unfinished", 0)
    live_end = r["m_end"].get("quickcode_live_requests", float("nan"))
    sessions_end = r["m_end"].get("quickcode_sessions", float("nan"))
    server_ended = sum(r["m_end"].get(k, 0) - r["m_idle2"].get(k, 0) for k in r["m_end"]
                       if k.startswith("quickcode_requests_total{"))
    report = Report("sessions", f"{args.sessions:,} concurrent WebSocket sessions on one backend process", started=_T0)
    report.add(f"""
One `quickcode serve` process (uvicorn, `ws="websockets-sansio"`, uvloop; the vLLM engine runs in its own
processes) on loopback; {args.workers} client processes (asyncio + `websockets`) open the sessions (hello →
welcome) and hold them. Then {r['typists']} sessions ({args.typing_share * 100:g} %) type for {args.hold_s:g} s:
bursts of 3–8 keystrokes 80–200 ms apart, then 1.5–4 s of pause; every keystroke is a completion request
(1,500-character prefix, 8 tokens) that supersedes the previous one of that session. The engine cannot serve
that rate on this CPU, so most are superseded or shed — what matters here is that each ends exactly once.

* **Memory per idle session** = (RSS of the backend process with all sessions open and idle − RSS after a
  warm-up of 50 sessions) / sessions. **Event-loop lag**: a probe task in the backend sleeps 10 ms in a loop
  and records how late it wakes (`{LAG}`); percentiles are interpolated inside the histogram's buckets
  (0.5, 1, 2, 3, 5, 7.5, 10, 15, 20 ms…), so "share ≤ 10 ms" is exact and p99 is ±½ bucket. The **on-CPU part**
  (`{LAG_CPU}`) is the share of each late wake-up that the loop's thread spent running (`thread_time`):
  our own work blocking the loop. The rest is time the process waited for a core — on this shared 2-core
  machine, other engineers' engines and trainings compete for them (1/5/15-min load average at the end:
  {r['loadavg']}).
""")
    report.add(md_table(
        ["sessions open", "failed", "connect time s", "RSS before MB", "RSS idle MB", "RSS typing MB",
         "per idle session KB"],
        [[n, r["failed"], round(r["connect_s"], 1), round((r["rss0"] or 0) / 2**20, 1),
          round((r["rss_idle"] or 0) / 2**20, 1), round((r["rss_hold"] or 0) / 2**20, 1), round(per_session_kb, 1)]]))
    report.add(md_table(["phase", "probe samples", "lag p50 ms", "lag p99 ms", "share ≤ 10 ms",
                         "on-CPU part p99 ms", "on-CPU ≤ 10 ms"],
                        [[name, x["samples"], round(x["p50_ms"], 2), round(x["p99_ms"], 2), round(x["within_10ms"], 4),
                          round(x["cpu_p99_ms"], 2), round(x["cpu_within_10ms"], 4)]
                         for name, x in (("connecting", lag_connect), ("all idle", lag_idle), ("typing", lag_hold))]))
    gc_rows = []
    for name, (a, b) in (("connecting", ("m0", "m_idle")), ("all idle", ("m_idle", "m_idle2")),
                         ("typing", ("m_idle2", "m_hold"))):
        row = [name]
        for gen in ("0", "1", "2"):
            count = r[b].get(f'quickcode_gc_pause_seconds_count{{generation="{gen}"}}', 0) - r[a].get(
                f'quickcode_gc_pause_seconds_count{{generation="{gen}"}}', 0)
            total = r[b].get(f'quickcode_gc_pause_seconds_sum{{generation="{gen}"}}', 0) - r[a].get(
                f'quickcode_gc_pause_seconds_sum{{generation="{gen}"}}', 0)
            row.append(f"{count:.0f} × {1000 * total / count:.1f} ms" if count else "0")
        gc_rows.append(row)
    report.add("Garbage-collector pauses in the backend (`quickcode_gc_pause_seconds`: count × mean pause, by "
               "generation; the objects that live as long as the process — torch, vLLM — are frozen out of the "
               "collector once the engine is up):\n\n" + md_table(["phase", "gen 0", "gen 1", "gen 2"], gc_rows))
    report.add(f"""
**Requests**: {r['sent']} sent by the typists; the clients saw a terminal frame for {ended}
({', '.join(f'{k} {v}' for k, v in sorted(r['finishes'].items()))}); unfinished {unfinished}. The server's
`quickcode_requests_total` grew by {server_ended:.0f}; after the sessions closed it holds {live_end:.0f} live
requests and {sessions_end:.0f} sessions (the gauge before: {r['m0'].get('quickcode_sessions', 0):.0f}).

**Targets**: memory per idle session ≤ 50 KB → {per_session_kb:.1f} KB, {'met' if per_session_kb <= 50 else 'NOT met'};
event-loop lag p99 ≤ 10 ms while typing → {lag_hold['p99_ms']:.2f} ms, {'met' if lag_hold['p99_ms'] <= 10 else 'NOT met'};
every request ended → {'yes' if unfinished == 0 and live_end == 0 else 'NO'}.
""")
    fig, ax = figure(figsize=(7, 4))
    for name, (a, b), color in (("connecting", ("m0", "m_idle"), "tab:blue"), ("idle", ("m_idle", "m_idle2"), "tab:gray"),
                                ("typing", ("m_idle2", "m_hold"), "tab:green")):
        h = histogram(r[b], LAG, r[a])
        if h and h[-1][1] > 0:
            xs = [le * 1000 for le, _ in h if le != float("inf")]
            ys = [c / h[-1][1] for le, c in h if le != float("inf")]
            ax.step(xs, ys, where="post", label=name, color=color)
    ax.axvline(10, color="tab:orange", ls="--", label="10 ms target")
    ax.set_xscale("log")
    ax.set_xlabel("event-loop lag (ms, bucket bounds)")
    ax.set_ylabel("share of probe wake-ups ≤ x")
    ax.set_title(f"event-loop lag with {n:,} sessions")
    ax.legend()
    report.add_figure(fig, "lag", "event-loop lag CDF")
    headline = {"bench": "sessions", "sessions": n, "failed": r["failed"], "connect_s": round(r["connect_s"], 1),
                "kb_per_idle_session": round(per_session_kb, 1), "loop_lag_p99_ms_typing": round(lag_hold["p99_ms"], 2),
                "loop_lag_p99_ms_idle": round(lag_idle["p99_ms"], 2),
                "loop_lag_on_cpu_p99_ms_typing": round(lag_hold["cpu_p99_ms"], 2),
                "loop_lag_p99_ms_connecting": round(lag_connect["p99_ms"], 2),
                "requests_sent": r["sent"], "requests_unfinished": unfinished, "server_live_after": live_end,
                "target_memory_met": per_session_kb <= 50, "target_lag_met": lag_hold["p99_ms"] <= 10,
                "all_requests_ended": unfinished == 0 and live_end == 0}
    return report.finish(finite(headline))
