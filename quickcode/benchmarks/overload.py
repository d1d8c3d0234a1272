"""`quickcode bench overload`: our scheduler against competent baselines — FIFO with an admission cap tuned to its
best goodput, and vLLM's own priority scheduling newest first — at multiples of the sustainable rate.

One backend, one warm vLLM engine with `engine_slots` sequences (vLLM's `max_num_seqs`, and our `max_running`),
the scheduler switched between blocks through `POST /debug/scheduler`. Every arm of a load level replays the
same plan: the public trace's arrivals and lengths (quickcode/benchmarks/trace.py `plan`, time-scaled to the level's rate,
its typists' keystrokes included), the same prompt text; `cache_isolation=user` salts each session's prefix
cache, so an arm never hits the blocks an earlier arm's sessions left (a typist's own keystrokes still do).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from quickcode.backend.auth import hash_token, new_token
from quickcode.benchmarks.loadgen import (REPO, Backend, CodeCorpus, Outcome, Session, backend_from_url, bench_backend, finite,
                                          progress, scrape)
from quickcode.benchmarks.report import Report, figure, md_table, paired_bootstrap, pcts, percentile
from quickcode.benchmarks.trace import DEFAULT_TRACE, TraceRow, classify, load_trace, plan, replay, response_s

# /debug/* takes only the admin token: the backend this benchmark starts gets this one's hash; for a backend of
# yours (--url), set QUICKCODE_ADMIN_TOKEN to the token whose hash it has as admin_token_sha256
ADMIN_TOKEN = os.environ.get("QUICKCODE_ADMIN_TOKEN") or new_token()


# ── arms, the plan's rate, per-request records, figures and intervals (pure:
# tests/benchmarks/test_overload_bench.py)

@dataclass(frozen=True)
class Arm:
    name: str
    family: str          # "fifo" (capped FIFO, one per cap of the sweep) | "priority" (vLLM's) | "ours"
    patch: dict          # the body of POST /debug/scheduler that sets it up (every field another arm changes)


def arms(caps: list[int], budget_s: float) -> list[Arm]:
    """The capped FIFOs of the sweep, vLLM's priority scheduling newest first (no cap: vLLM has none), ours."""
    out = [Arm(f"fifo-cap{c}", "fifo", {"mode": "fifo", "admit_cap": c}) for c in caps]
    out.append(Arm("vllm-priority", "priority", {"mode": "priority", "admit_cap": 0}))
    out.append(Arm("ours", "ours", {"mode": "latency", "admit_cap": 0, "ttft_budget_s": budget_s}))
    return out


def block_order(all_arms: list[Arm], level_index: int) -> list[Arm]:
    """The arms rotated by the level's index: drift of this shared machine's load does not always hit one arm."""
    k = level_index % len(all_arms)
    return all_arms[k:] + all_arms[:k]


def speed_for(rows: list[TraceRow], start_s: float, duration_s: float, rps: float) -> float:
    """The trace's time scale at which its window from `start_s` sends `rps` × `duration_s` requests in
    `duration_s` of wall time (`plan`'s speed)."""
    want = max(1, round(rps * duration_s))
    after = [r.t_s for r in rows if r.t_s >= start_s]
    if len(after) <= want:
        raise ValueError(f"the trace holds {len(after)} requests after {start_s:g} s; {want} are needed")
    return (after[want] - start_s) / duration_s


@dataclass(frozen=True)
class Rec:
    """One request of a block as the user saw it."""
    user: int
    kind: str                     # classify(): served | shed | superseded | cancelled | error | unfinished
    response_s: float | None      # to the first chunk (empty answer: to done); None if it never ended
    keystroke: bool               # a typing burst's next keystroke (it supersedes the user's previous one)
    until_next_s: float | None = None   # until the same user's next request (None: their last)


def records(outcomes: list[Outcome], users: list[int], keystrokes: list[bool]) -> list[Rec]:
    nxt: dict[int, float | None] = {}
    until: list[float | None] = [None] * len(outcomes)
    for i in sorted(range(len(outcomes)), key=lambda i: outcomes[i].t_send, reverse=True):
        later = nxt.get(users[i])
        until[i] = None if later is None else later - outcomes[i].t_send
        nxt[users[i]] = outcomes[i].t_send
    return [Rec(u, classify(o), response_s(o), k, n) for o, u, k, n in zip(outcomes, users, keystrokes, until)]


def in_time(r: Rec, slo_s: float) -> bool:
    """Answered by the model (not `shed`) within the SLO."""
    return r.kind == "served" and r.response_s is not None and r.response_s <= slo_s


def current(r: Rec, slo_s: float) -> bool:
    """A suggestion the user saw in time: within the SLO and before they sent their next request (an answer
    after it is for a prefix the editor has left)."""
    return in_time(r, slo_s) and (r.until_next_s is None or r.response_s <= r.until_next_s)


GOODPUTS = {"goodput_rps": "ours_over", "current_rps": "current_over"}   # figure → prefix of ours' ratios


@dataclass
class UserAgg:
    """One user's requests in one arm, reduced to what the figures need."""
    n: int
    good: int
    current: int
    shed: int
    superseded: int
    served_s: list[float]


def aggregate(recs: list[Rec], users: list[int], slo_s: float) -> list[UserAgg]:
    """Per user of `users` (in that order)."""
    by: dict[int, UserAgg] = {u: UserAgg(0, 0, 0, 0, 0, []) for u in users}
    for r in recs:
        a = by[r.user]
        a.n += 1
        a.good += in_time(r, slo_s)
        a.current += current(r, slo_s)
        a.shed += r.kind == "shed"
        a.superseded += r.kind == "superseded"
        if r.kind == "served" and r.response_s is not None:
            a.served_s.append(r.response_s)
    return [by[u] for u in users]


def arm_figures(aggs: list[UserAgg], idx: list[int], block_s: float) -> dict[str, float]:
    """Figures of one arm over the users `idx` (indexes into `aggs`; a bootstrap draw repeats some)."""
    picked = [aggs[i] for i in idx]
    n = sum(a.n for a in picked)
    shares = [a.current / a.n for a in picked if a.n]
    return {"goodput_rps": sum(a.good for a in picked) / block_s,
            "current_rps": sum(a.current for a in picked) / block_s,
            "served_p95_s": percentile([x for a in picked for x in a.served_s], 95),
            "user_in_time": sum(shares) / len(shares) if shares else math.nan,
            "shed_share": sum(a.shed for a in picked) / n if n else math.nan,
            "superseded_share": sum(a.superseded for a in picked) / n if n else math.nan}


def level_figures(per_arm: dict[str, list[UserAgg]], families: dict[str, str], idx: list[int],
                  block_s: float) -> dict[str, float]:
    """Every arm's figures over the users `idx` ("ARM.figure"), the best capped FIFO's goodputs (the best cap
    chosen in this very draw, for each goodput: the baseline's luck counts for it) and ours as a multiple of
    them and of vLLM's ("ours_over_best_fifo", "current_over_priority", ...)."""
    out: dict[str, float] = {}
    for name, aggs in per_arm.items():
        out.update({f"{name}.{k}": v for k, v in arm_figures(aggs, idx, block_s).items()})
    for fig, prefix in GOODPUTS.items():
        fifo = [out[f"{n}.{fig}"] for n, f in families.items() if f == "fifo"]
        best = max(fifo) if fifo else math.nan
        ours = out.get(f"ours.{fig}", math.nan)
        prio = out.get(f"vllm-priority.{fig}", math.nan)
        out[f"best_fifo.{fig}"] = best
        out[f"{prefix}_best_fifo"] = ours / best if best else math.nan
        out[f"{prefix}_priority"] = ours / prio if prio else math.nan
    return out


def best_cap(point: dict[str, float], families: dict[str, str], fig: str = "goodput_rps") -> str:
    """The capped FIFO with the highest `fig` (a tie: the smaller cap, listed first)."""
    fifo = [n for n, f in families.items() if f == "fifo"]
    return max(fifo, key=lambda n: (point[f"{n}.{fig}"], -fifo.index(n)))


def summarize_level(recs_by_arm: dict[str, list[Rec]], families: dict[str, str], slo_s: float, block_s: float,
                    draws: int = 2000, seed: int = 0, level: float = 0.90) -> dict:
    """Point figures and their `level` intervals, users resampled (paired: every arm replayed the same users'
    requests). Only users with a request count."""
    users = sorted({r.user for recs in recs_by_arm.values() for r in recs})
    per_arm = {name: aggregate(recs, users, slo_s) for name, recs in recs_by_arm.items()}
    everyone = list(range(len(users)))
    point = level_figures(per_arm, families, everyone, block_s)
    ci = paired_bootstrap(len(users), lambda idx: level_figures(per_arm, families, idx, block_s), draws, seed,
                          level) if users else {}
    return {"users": len(users), "point": point, "ci": ci, "best_fifo": best_cap(point, families),
            "best_fifo_current": best_cap(point, families, "current_rps")}


def acceptance(summary: dict, unloaded_p95_s: float) -> dict:
    """The issue's targets at one level: goodput ≥ 1.5 × the best capped FIFO and ≥ vLLM's priority arm (for
    each goodput), our served p95 ≤ 2 × the unloaded p95; each on the point figure, and whether the interval's
    low end clears it."""
    p, ci = summary["point"], summary["ci"]
    out = {}
    for prefix in GOODPUTS.values():
        for vs, need in (("best_fifo", 1.5), ("priority", 1.0)):
            key = f"{prefix}_{vs}"
            out[key] = {"ratio": p[key], "ci": ci.get(key), "need": need, "met": p[key] >= need,
                        "ci_clears": ci.get(key, [math.nan])[0] >= need}
    out["served_p95"] = {"ours_ms": p["ours.served_p95_s"] * 1000, "limit_ms": 2 * unloaded_p95_s * 1000,
                         "met": p["ours.served_p95_s"] <= 2 * unloaded_p95_s}
    return out


# ── the backend: scheduler switches, idle waits, calibration ──────────────────────────────────────────────────

def served(backend: Backend) -> dict:
    """What the backend serves, from its /readyz: profile (and why), target, precision, speculation."""
    with urllib.request.urlopen(f"{backend.http_url}/readyz", timeout=10) as r:
        return json.loads(r.read())


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
    """Prompts with the trace's length mix (clipped), fresh text for every request: the calibration's."""

    def __init__(self, corpus: CodeCorpus, rows: list[TraceRow], max_prompt_tokens: int, max_output_tokens: int,
                 seed: int):
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


_T0 = 0.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend started with --set debug_endpoints=true, "
                   "admin_token_sha256 of QUICKCODE_ADMIN_TOKEN, cache_isolation=user and max_num_seqs = "
                   "max_running (what the benchmark sets on the backend it starts)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings of the backend started")
    p.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="arrivals and length mix")
    p.add_argument("--start-s", type=float, default=180.0, help="offset into the trace (s of trace time)")
    p.add_argument("--levels", default="1,2,3,5", help="multiples of the sustainable rate")
    p.add_argument("--accept-level", type=float, default=3.0, help="the level the acceptance targets are read at")
    p.add_argument("--caps", default="2,3,4,6,8,12", help="the capped FIFO's admission caps swept")
    p.add_argument("--engine-slots", type=int, default=4, help="vLLM's max_num_seqs and our max_running")
    p.add_argument("--sustainable-rps", type=float, default=None, help="skip measuring it")
    p.add_argument("--slo-ms", type=float, default=None, help="default: 2 × the unloaded p95 TTFT")
    p.add_argument("--budget-share", type=float, default=0.75, help="our TTFT budget = this × SLO")
    p.add_argument("--block-s", type=float, default=40.0)
    p.add_argument("--drain-s", type=float, default=None, help="default: max(10 s, 3 × SLO)")
    p.add_argument("--unloaded-n", type=int, default=20)
    p.add_argument("--capacity-s", type=float, default=25.0)
    p.add_argument("--users", type=int, default=60)
    p.add_argument("--typist-share", type=float, default=0.25, help="share of users who type in bursts")
    p.add_argument("--burst-gap-ms", type=float, default=300.0)
    p.add_argument("--max-prompt-tokens", type=int, default=1500)
    p.add_argument("--max-output-tokens", type=int, default=64)
    p.add_argument("--draws", type=int, default=2000, help="bootstrap draws (users resampled)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="folder for the report (default benchmarks/reports/)")


def run(args: argparse.Namespace) -> dict:
    global _T0
    _T0 = time.time()
    progress("loading the trace and the code corpus")
    rows = load_trace(args.trace)
    corpus = CodeCorpus(seed=args.seed)
    work = Workload(corpus, rows, args.max_prompt_tokens, args.max_output_tokens, args.seed)
    admin = f"admin_token_sha256={hash_token(ADMIN_TOKEN)}"
    settings = ["debug_endpoints=true", admin, "cache_isolation=user", f"max_num_seqs={args.engine_slots}",
                f"max_running={args.engine_slots}", *args.set]
    backend = backend_from_url(args.url) if args.url else bench_backend("overload", settings)
    try:
        res = asyncio.run(_run(args, backend, rows, corpus, work))
        res["served"] = served(backend)
    finally:
        backend.stop()
    return _report(args, work, res)


async def _run(args, backend: Backend, rows: list[TraceRow], corpus: CodeCorpus, work: Workload) -> dict:
    cfg0 = set_scheduler(backend)                                  # as configured: restored at the end
    set_scheduler(backend, mode="latency", admit_cap=0, ttft_budget_s=3600.0)        # calibration: no shedding
    s = await Session(backend.ws_url, "calibrate").open()
    progress("warm-up: 5 requests")
    await sequential(s, work, 5)
    progress(f"unloaded: {args.unloaded_n} requests one at a time")
    unloaded = await sequential(s, work, args.unloaded_n)
    await s.close()
    if args.sustainable_rps:
        sustainable = args.sustainable_rps
    else:
        progress(f"sustainable rate: {cfg0['max_running']} clients back to back for {args.capacity_s:g} s")
        sustainable, _ = await closed_loop(backend.ws_url, work, cfg0["max_running"], args.capacity_s)
    p95_unloaded_s = pcts([response_s(o) for o in unloaded])["p95"]
    slo_s = args.slo_ms / 1000 if args.slo_ms else 2 * p95_unloaded_s
    budget_s = args.budget_share * slo_s
    drain_s = args.drain_s or max(10.0, 3 * slo_s)
    all_arms = arms([int(c) for c in args.caps.split(",")], budget_s)
    levels = [float(x) for x in args.levels.split(",")]
    progress(f"unloaded TTFT p95 {p95_unloaded_s * 1000:.0f} ms → SLO {slo_s * 1000:.0f} ms, our budget "
             f"{budget_s * 1000:.0f} ms; sustainable {sustainable:.2f} req/s; {len(levels)} levels × "
             f"{len(all_arms)} arms, about {len(levels) * len(all_arms) * (args.block_s + drain_s + 5) / 60:.0f} min")
    rates = set_scheduler(backend)["rates"]        # as calibrated (latency mode, nothing shed): ours starts there
    dump = REPO / "artifacts" / "bench" / "overload_requests.jsonl"   # every request, for analysis
    dump.parent.mkdir(parents=True, exist_ok=True)
    dump.unlink(missing_ok=True)
    out_levels = []
    for li, level in enumerate(levels):
        rps = level * sustainable
        speed = speed_for(rows, args.start_s, args.block_s, rps)
        planned = plan(rows, corpus, speed=speed, start_s=args.start_s, duration_s=args.block_s, users=args.users,
                       typist_share=args.typist_share, burst_gap_s=args.burst_gap_ms / 1000,
                       max_prompt_tokens=args.max_prompt_tokens, max_output_tokens=args.max_output_tokens,
                       seed=args.seed + li)
        users = [p.user for p in planned]
        keys = [p.typing for p in planned]
        progress(f"level {level:g}×: {len(planned)} requests in {args.block_s:g} s ({rps:.2f} req/s, trace speed "
                 f"×{speed:.2f}), {sum(keys)} of them keystrokes of a typing burst")
        recs_by_arm: dict[str, list[Rec]] = {}
        for arm in block_order(all_arms, li):
            await wait_idle(backend)
            set_scheduler(backend, **arm.patch, **({"rates": rates} if arm.family == "ours" else {}))
            progress(f"  {arm.name}")
            outs, _, _ = await replay(backend, planned, args.users, drain_s)
            await wait_idle(backend)
            if arm.family == "ours":
                rates = set_scheduler(backend)["rates"]
            recs = records(outs, users, keys)
            recs_by_arm[arm.name] = recs
            t0 = min((o.t_send for o in outs), default=0.0)
            with open(dump, "a") as f:
                for o, r in zip(outs, recs):
                    f.write(json.dumps({"level": level, "arm": arm.name, "user": r.user, "keystroke": r.keystroke,
                                        "t_send_s": o.t_send - t0, "response_s": r.response_s, "kind": r.kind,
                                        "timing": o.timing}) + "\n")
            kinds = [r.kind for r in recs]
            progress(f"    served {kinds.count('served')}, shed {kinds.count('shed')}, superseded "
                     f"{kinds.count('superseded')}, unfinished {kinds.count('unfinished')}, in time "
                     f"{sum(in_time(r, slo_s) for r in recs)}, current {sum(current(r, slo_s) for r in recs)}")
        out_levels.append({"level": level, "rps": rps, "speed": speed, "requests": len(planned),
                           "keystrokes": sum(keys), "recs": recs_by_arm})
    await wait_idle(backend)
    set_scheduler(backend, mode=cfg0["mode"], ttft_budget_s=cfg0["ttft_budget_s"], admit_cap=cfg0["admit_cap"])
    return {"unloaded": unloaded, "sustainable": sustainable, "slo_s": slo_s, "budget_s": budget_s,
            "drain_s": drain_s, "max_running": cfg0["max_running"], "arms": all_arms, "levels": out_levels}


# ── the report ───────────────────────────────────────────────────────────────────────────────────────────────

def _ci(ci: dict | list | None, key: str = "", scale: float = 1.0, digits: int = 2) -> str:
    """An interval as text: `ci[key]` of a dict of intervals, or the interval itself."""
    pair = ci if isinstance(ci, list) else (ci or {}).get(key) or [math.nan, math.nan]
    lo, hi = pair
    return f"[{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"


def _report(args, work: Workload, r: dict) -> dict:
    slo_s = r["slo_s"]
    families = {a.name: a.family for a in r["arms"]}
    unl_s = pcts([response_s(o) for o in r["unloaded"]])
    for lv in r["levels"]:
        lv["summary"] = summarize_level(lv["recs"], families, slo_s, args.block_s, args.draws, args.seed)
    accept_lv = next((lv for lv in r["levels"] if lv["level"] == args.accept_level), None)
    acc = acceptance(accept_lv["summary"], unl_s["p95"]) if accept_lv else None
    report = Report("overload", "Overload: our scheduler vs a tuned capped FIFO and vLLM's priority scheduling",
                    started=_T0, out=args.out)
    caps = ", ".join(a.name.removeprefix("fifo-cap") for a in r["arms"] if a.family == "fifo")
    sv = r.get("served", {})
    report.add(f"""
Command: `quickcode bench overload {' '.join(sys.argv[3:])}` (options: `quickcode bench overload --help`).

Served: profile **{sv.get('profile')}** ({sv.get('profile_why')}): target `{sv.get('target')}`,
{sv.get('precision')}, speculation `{sv.get('spec_method')}`.

One backend, one warm vLLM engine with **{args.engine_slots} sequences** (`max_num_seqs`, and our
`max_running`: every arm gets the same slots), its scheduler switched between blocks (`POST /debug/scheduler`).
Arms, each block the same plan:

* **fifo-capC** — every request goes to vLLM as it arrives, in arrival order (one priority), unless C are
  already live: then it is answered `shed` at once (a bounded queue that says "busy"). C swept over {caps};
  **best FIFO** = the cap with the highest goodput at that level (for each goodput), chosen again in every
  bootstrap draw (the baseline keeps its luck: this favours it).
* **vllm-priority** — every request goes to vLLM at once with `priority = -arrival` (vLLM's
  `scheduling_policy="priority"`: its waiting queue serves the newest request first); no cap (vLLM has none).
* **ours** — the latency scheduler: newest first per user (a keystroke supersedes the user's previous request),
  at most {r['max_running']} in the engine, shedding by predicted TTFT with a budget of
  {r['budget_s'] * 1000:.0f} ms = {args.budget_share:g} × SLO.

Arrivals: `{args.trace.name}` from t = {args.start_s:g} s, time-scaled so that a {args.block_s:g} s block sends
the level's multiple of the sustainable rate; {args.users} users, {args.typist_share:g} of them typists (a request
within {args.burst_gap_ms:g} ms of the previous goes, with probability 0.8, to the same typist as a keystroke
extending the prompt by 1–3 tokens: `quickcode/benchmarks/trace.py` `plan`). Prompts: real Python source of the trace's
`ContextTokens`, clipped to {args.max_prompt_tokens} tokens ({work.clipped_share * 100:.0f} % of the trace is
longer), `max_tokens` = `GeneratedTokens` clipped to 1..{args.max_output_tokens}. Clients never cancel; after a
block they wait up to {r['drain_s']:.0f} s for stragglers, then disconnect (what is left is `unfinished`).
`cache_isolation=user`: each session's prefix cache is its own, so no arm reuses another arm's blocks.

* **Unloaded** (one at a time, {len(r['unloaded'])} requests): TTFT p50 {unl_s['p50'] * 1000:.0f} ms, p95
  {unl_s['p95'] * 1000:.0f} ms. **SLO** = {'given' if args.slo_ms else '2 × unloaded p95'} =
  {slo_s * 1000:.0f} ms.
* **Sustainable rate** = {r['sustainable']:.2f} req/s ({'given' if args.sustainable_rps else
  f"completions/s of {r['max_running']} clients asking back to back for {args.capacity_s:g} s, fresh prompts"}).
* **Goodput** = requests answered by the model (`stop`/`length`) within the SLO (client-measured: send → first
  chunk; an empty answer: → `done`), per second of block — the server's view. **Current goodput** = of those,
  the answers that came before the same user's next request — the user's view: an answer after it is for a
  prefix the editor has left (ours supersedes such a request; the baselines answer it). **Served p95** = of
  the requests answered, in time or not. **Shed** = answered `shed` (busy / predicted late). **Users in
  time** = a user's share of their keystrokes (requests) that got a current suggestion in time, averaged over
  users. Intervals: 90 %, bootstrap over users ({args.draws} draws, paired: every arm replayed the same users'
  requests).
""")
    for lv in r["levels"]:
        sm = lv["summary"]
        p, ci = sm["point"], sm["ci"]
        rows = []
        for a in r["arms"]:
            n = a.name
            best = " (best FIFO)" if n == sm["best_fifo"] else ""
            best += " (best FIFO, current)" if n == sm["best_fifo_current"] and n != sm["best_fifo"] else ""
            rows.append([n + best,
                         f"{p[n + '.goodput_rps']:.2f} {_ci(ci, n + '.goodput_rps')}",
                         f"{p[n + '.current_rps']:.2f} {_ci(ci, n + '.current_rps')}",
                         f"{p[n + '.served_p95_s'] * 1000:.0f} {_ci(ci, n + '.served_p95_s', 1000, 0)}",
                         f"{p[n + '.user_in_time']:.3f} {_ci(ci, n + '.user_in_time', 1, 3)}",
                         round(p[n + ".shed_share"], 3), round(p[n + ".superseded_share"], 3),
                         sum(1 for x in lv["recs"][n] if x.kind == "unfinished")])
        report.add(f"### {lv['level']:g}× the sustainable rate: {lv['rps']:.2f} req/s, {lv['requests']} requests "
                   f"({lv['keystrokes']} keystrokes), {sm['users']} users")
        report.add(md_table(["arm", "goodput req/s [90 %]", "current goodput req/s [90 %]",
                             "served p95 ms [90 %]", "users in time [90 %]", "shed share", "superseded share",
                             "unfinished"], rows))
        report.add(f"Ours ÷ best FIFO: goodput **{p['ours_over_best_fifo']:.2f}×** {_ci(ci, 'ours_over_best_fifo')}, "
                   f"current **{p['current_over_best_fifo']:.2f}×** {_ci(ci, 'current_over_best_fifo')}; ours ÷ "
                   f"vllm-priority: goodput **{p['ours_over_priority']:.2f}×** {_ci(ci, 'ours_over_priority')}, "
                   f"current **{p['current_over_priority']:.2f}×** {_ci(ci, 'current_over_priority')}.")
    fifo_arms = [a for a in r["arms"] if a.family == "fifo"]
    sweep = [[f"{lv['level']:g}×"] + [f"{lv['summary']['point'][a.name + '.goodput_rps']:.3f} / "
                                      f"{lv['summary']['point'][a.name + '.current_rps']:.3f}" for a in fifo_arms]
             for lv in r["levels"]]
    report.add("### The capped FIFO's sweep: goodput / current goodput (req/s) by admission cap")
    report.add(md_table(["level"] + [a.name.removeprefix("fifo-") for a in fifo_arms], sweep))
    if acc:
        def verdict(x):
            return ("met" if x["met"] else "**NOT met**") + (
                "" if "ci_clears" not in x else (", the interval clears it" if x["ci_clears"]
                                                 else ", the interval does not clear it"))
        lines = [f"* {what} ≥ {x['need']:g} × {vs}: {x['ratio']:.2f}× {_ci(x['ci'])} → {verdict(x)}."
                 for what, prefix in (("goodput", "ours_over"), ("current goodput", "current_over"))
                 for vs, x in (("the best capped FIFO", acc[f"{prefix}_best_fifo"]),
                               ("vllm-priority", acc[f"{prefix}_priority"]))]
        s95 = acc["served_p95"]
        lines.append(f"* our served p95 ≤ 2 × unloaded p95 ({s95['limit_ms']:.0f} ms): {s95['ours_ms']:.0f} ms → "
                     f"{verdict(s95)}.")
        report.add(f"**Acceptance at {args.accept_level:g}×**\n" + "\n".join(lines))
    _plot(report, r, families)
    headline = {"bench": "overload", "sustainable_rps": round(r["sustainable"], 3),
                "unloaded_ttft_p95_ms": round(unl_s["p95"] * 1000, 1), "slo_ms": round(slo_s * 1000, 1),
                "engine_slots": args.engine_slots, "profile": r.get("served", {}).get("profile"), "levels": {}}
    for lv in r["levels"]:
        p, ci, best = lv["summary"]["point"], lv["summary"]["ci"], lv["summary"]["best_fifo"]
        arms3 = (("best_fifo", best), ("vllm_priority", "vllm-priority"), ("ours", "ours"))
        headline["levels"][f"{lv['level']:g}x"] = {
            "offered_rps": round(lv["rps"], 3), "best_fifo": best,
            "goodput_rps": {k: round(p[f"{n}.goodput_rps"], 3) for k, n in arms3},
            "current_rps": {k: round(p[f"best_fifo.current_rps" if k == "best_fifo" else f"{n}.current_rps"], 3)
                            for k, n in arms3},
            "served_p95_ms": {k: round(p[f"{n}.served_p95_s"] * 1000, 1) for k, n in arms3},
            **{k: [round(p[k], 2)] + [round(x, 2) for x in ci.get(k, [])] for k in
               ("ours_over_best_fifo", "ours_over_priority", "current_over_best_fifo", "current_over_priority")},
            "users_in_time_ours": round(p["ours.user_in_time"], 3), "shed_share_ours": round(p["ours.shed_share"], 3)}
    if acc:
        headline["accept_level"] = args.accept_level
        headline["target_goodput_1_5x_best_fifo_met"] = acc["ours_over_best_fifo"]["met"]
        headline["target_goodput_ge_priority_met"] = acc["ours_over_priority"]["met"]
        headline["target_current_goodput_1_5x_best_fifo_met"] = acc["current_over_best_fifo"]["met"]
        headline["target_current_goodput_ge_priority_met"] = acc["current_over_priority"]["met"]
        headline["target_p95_2x_unloaded_met"] = acc["served_p95"]["met"]
    return report.finish(finite(headline))


def _plot(report: Report, r: dict, families: dict[str, str]) -> None:
    """Each figure by load for best FIFO, vLLM's priority and ours (the sweep thin), and the sweep by cap."""
    xs = [lv["level"] for lv in r["levels"]]
    fig, axes = figure(2, 3, figsize=(16, 8))
    panels = (("goodput_rps", "goodput within the SLO (req/s)", 1.0),
              ("current_rps", "current goodput (before the next request, req/s)", 1.0),
              ("served_p95_s", "served p95 (ms)", 1000.0),
              ("user_in_time", "users' share of keystrokes in time", 1.0),
              ("shed_share", "shed share", 1.0))
    lines = [("best FIFO", None, "tab:red"), ("vllm-priority", "vllm-priority", "tab:blue"),
             ("ours", "ours", "tab:green")]
    for ax, (key, label, scale) in zip(axes.flat, panels):
        for a, fam in families.items():          # the sweep, thin
            if fam == "fifo":
                ax.plot(xs, [lv["summary"]["point"][f"{a}.{key}"] * scale for lv in r["levels"]],
                        color="tab:red", alpha=0.2, lw=0.8)
        for (name, arm, color), dx in zip(lines, (-0.04, 0.0, 0.04)):   # side by side: the bars do not overlap
            # a goodput's best FIFO is the best cap for it (in each draw); the other figures are its best cap's
            names = [f"{arm}.{key}" if arm else f"best_fifo.{key}" if key in GOODPUTS
                     else f"{lv['summary']['best_fifo']}.{key}" for lv in r["levels"]]
            ys = [lv["summary"]["point"][n] * scale for n, lv in zip(names, r["levels"])]
            cis = [lv["summary"]["ci"].get(n, [math.nan, math.nan]) for n, lv in zip(names, r["levels"])]
            err = [[max(0.0, y - lo * scale) for y, (lo, _) in zip(ys, cis)],
                   [max(0.0, hi * scale - y) for y, (_, hi) in zip(ys, cis)]]
            ax.errorbar([x + dx * max(xs) for x in xs], ys, yerr=err, color=color, marker="o", capsize=3, label=name)
        if key == "served_p95_s":
            unl = pcts([response_s(o) for o in r["unloaded"]])["p95"]
            ax.axhline(2 * unl * 1000, color="tab:orange", ls="--", label="2 × unloaded p95")
            ax.set_yscale("log")
        ax.set_xlabel("offered load (× sustainable rate)")
        ax.set_ylabel(label, fontsize=9)
        ax.set_xticks(xs)
        ax.legend(fontsize=8)
    ax = axes.flat[5]
    caps = [a for a, f in families.items() if f == "fifo"]
    for lv in r["levels"]:
        ax.plot([int(a.removeprefix("fifo-cap")) for a in caps],
                [lv["summary"]["point"][f"{a}.goodput_rps"] for a in caps], marker="o", label=f"{lv['level']:g}×")
    ax.set_xlabel("capped FIFO's admission cap")
    ax.set_ylabel("goodput (req/s)", fontsize=9)
    ax.legend(fontsize=8, title="load")
    fig.suptitle("thin red: each cap of the FIFO sweep; bars: 90 % intervals (users resampled)", fontsize=10)
    report.add_figure(fig, "load", "goodputs, served p95, users in time and shed share by load; the cap sweep")
