"""`quickcode bench typing`: what the language server's intelligence buys, on real typing.

A simulated developer (quickcode/editor_sim.py) types real source files the models never trained on
(held-out standard-library modules) keystroke by keystroke, with human timing (bursts, pauses, typos,
accepting right suggestions), through the real language server and the real backend, the way VS Code asks
(every keystroke, cancelling the previous request). Two language-server configurations run the same
sessions in one run, interleaved so the machine's noise hits both:
  ours      adaptive debounce, cache + hot streak, in-flight reuse, cancellation, prefetch, predictor
  baseline  fixed debounce, no cache, no reuse, no cancellation (nor prefetch, predictor, warm-up)
Reported: backend requests per 100 keystrokes, share of shown completions served from the cache, engine
tokens generated for completions never shown (wasted), perceived latency from pause to ghost text.
"""
from __future__ import annotations

import argparse
import asyncio
import math
import sys
import sysconfig
from pathlib import Path

from benchmarks.report import Report, md_table, pcts, percentile

BASELINE = {"adaptive_debounce": False, "debounce_ms": 75.0, "cache": False, "inflight_reuse": False,
            "cancel_stale": False, "prefetch": False, "predictor": False, "warmup": False}
ARMS = {"ours": {}, "baseline": BASELINE, "no_predictor": {"predictor": False}}
DEFAULT_FILES = ["textwrap.py", "shlex.py", "plistlib.py", "webbrowser.py", "codecs.py", "pdb.py", "types.py"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend (ws://.../v1/ws); default: start one")
    p.add_argument("--files", nargs="*", default=None, help="source files to type (default: held-out stdlib modules)")
    p.add_argument("--sessions", type=int, default=4, help="typing sessions per configuration")
    p.add_argument("--chars", type=int, default=350, help="characters typed per session")
    p.add_argument("--speed", type=float, default=1.0, help="typing speed multiple (1 ≈ 55 words per minute)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default="ours,baseline,no_predictor",
                   help="configurations to run: ours and baseline always; no_predictor = ours without the acceptance "
                        "predictor (its effect)")


def _files(args) -> list[Path]:
    if args.files:
        return [Path(f) for f in args.files]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [stdlib / f for f in DEFAULT_FILES if (stdlib / f).is_file()]


def _segments(files: list[Path], n: int, chars: int, seed: int) -> list[tuple[Path, str, str]]:
    """(file, text already there, text to type): segments that start at a line inside function bodies."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        path = files[i % len(files)]
        lines = path.read_text().splitlines(keepends=True)
        starts = [k for k in range(30, max(31, len(lines) - 40)) if lines[k].startswith("    ") and lines[k].strip()]
        k = rng.choice(starts) if starts else min(30, len(lines) - 1)
        out.append((path, "".join(lines[:k]), "".join(lines[k:])[:chars]))
    return out


async def _session(url: str, cfg: dict, seg, seed: int, speed: float, state_dir: str) -> dict:
    from quickcode.editor_sim import SimEditor, TypingModel, lsp_command

    path, before, target = seg
    init = {"endpoints": [url], "state_dir": state_dir, **cfg}   # the predictor learns across an arm's sessions
    ed = SimEditor(lsp_command(), style="vscode", init_options=init, seed=seed)
    await ed.start()
    ed.open(path.resolve().as_uri(), before)
    for _ in range(200):
        st = await ed.command("quickcode.status")
        if st.get("connected"):
            break
        await asyncio.sleep(0.05)
    res = await ed.type_text(target, TypingModel(speed=speed))
    await asyncio.sleep(1.0)                 # let the last requests end, so their tokens are counted
    stats = await ed.command("quickcode.stats")
    await ed.stop()
    g = (lambda k: stats.get(k, 0))
    return {"keystrokes": res.keystrokes, "shown": res.shown, "accepted": res.accepted,
            "accepted_chars": res.accepted_chars, "pause_to_ghost_ms": res.pause_to_ghost_ms, "pauses": res.pauses,
            "backend_requests": g("backend_requests"), "served_cache": g("served_cache"),
            "served_inflight": g("served_inflight"), "served_network": g("served_network"),
            "tokens_generated": g("tokens_generated"), "tokens_never_shown": g("tokens_never_shown"),
            "cancelled": g("cancelled"), "stopped_early": g("stopped_early"), "skipped": g("skipped_predictor"),
            "prefetches": g("prefetches"), "wasted_by": stats.get("wasted_by", {})}


def _summary(rows: list[dict]) -> dict:
    s = {k: sum(r[k] for r in rows) for k in rows[0] if k not in ("pause_to_ghost_ms", "wasted_by")}
    wasted_by: dict[str, int] = {}
    for r in rows:
        for why, n in r["wasted_by"].items():
            wasted_by[why] = wasted_by.get(why, 0) + n
    lat = [x for r in rows for x in r["pause_to_ghost_ms"]]
    suggestions = s["served_cache"] + s["served_inflight"] + s["served_network"]
    return {
        "keystrokes": s["keystrokes"], "backend_requests": s["backend_requests"],
        "requests_per_100_keys": round(100 * s["backend_requests"] / max(1, s["keystrokes"]), 1),
        "shown": s["shown"], "accepted": s["accepted"], "accepted_chars": s["accepted_chars"],
        "from_cache_share": round(s["served_cache"] / max(1, suggestions), 3),
        "inflight_share": round(s["served_inflight"] / max(1, suggestions), 3),
        "tokens_generated": s["tokens_generated"], "tokens_wasted": s["tokens_never_shown"],
        "wasted_share": round(s["tokens_never_shown"] / max(1, s["tokens_generated"]), 3),
        "pause_to_ghost_ms": pcts(lat, (50, 95)), "ghost_in_pauses": round(len(lat) / max(1, s["pauses"]), 3),
        "cancelled": s["cancelled"], "stopped_early": s["stopped_early"], "skipped_by_predictor": s["skipped"],
        "prefetches": s["prefetches"], "_lat": lat,
        "wasted_by": {k: v for k, v in sorted(wasted_by.items(), key=lambda kv: -kv[1]) if v},
    }


def _intervals(ours: list[dict], base: list[dict], draws: int = 2000, seed: int = 0) -> dict:
    """90% intervals of the headline figures by resampling whole sessions with replacement, paired (both arms
    typed the same segments): how much of a difference between runs is the sessions drawn, not the code."""
    import random

    rng = random.Random(seed)
    k = len(ours)
    d95, cache, waste = [], [], []
    for _ in range(draws):
        idx = [rng.randrange(k) for _ in range(k)]
        o, b = _summary([ours[i] for i in idx]), _summary([base[i] for i in idx])
        if o["_lat"] and b["_lat"]:
            d95.append(percentile(o["_lat"], 95) - percentile(b["_lat"], 95))
        cache.append(o["from_cache_share"])
        waste.append(o["wasted_share"])
    return {name: [round(percentile(xs, 5), 3), round(percentile(xs, 95), 3)]
            for name, xs in (("p95_minus_baseline_ms", d95), ("from_cache_share", cache), ("wasted_share", waste))}


def _waste_cell(rows: list[dict]) -> str:
    s = _summary(rows)
    return f"{s['tokens_generated']} / {s['tokens_wasted']} ({s['wasted_share']:.0%}), {s['backend_requests']} req"


def run(args: argparse.Namespace) -> dict:
    from quickcode.demo import start_backend, _free_port
    import os
    import signal

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not {"ours", "baseline"} <= set(arms) or not set(arms) <= set(ARMS):
        raise SystemExit(f"--arms: 'ours' and 'baseline' are compared, 'no_predictor' is optional (got {args.arms!r})")
    rep = Report("typing", "Typing benchmark: the language server's intelligence vs a naive baseline")
    segs = _segments(_files(args), args.sessions, args.chars, args.seed)
    proc, url = None, args.url
    if url is None:
        port = _free_port()
        proc = start_backend(port, Path("artifacts/logs/bench-typing-backend.log").resolve())
        url = f"ws://127.0.0.1:{port}/v1/ws"
    import tempfile

    results: dict[str, list[dict]] = {a: [] for a in arms}
    state = {a: tempfile.mkdtemp(prefix=f"qc-typing-{a}-") for a in arms}
    try:
        for i, seg in enumerate(segs):
            order = arms[i % len(arms):] + arms[: i % len(arms)]      # rotate: the machine's noise hits every arm
            for name in order:
                print(f"[typing] session {i + 1}/{len(segs)} {name}: {seg[0].name}, {len(seg[2])} chars",
                      file=sys.stderr, flush=True)
                results[name].append(asyncio.run(_session(url, ARMS[name], seg, args.seed + i, args.speed, state[name])))
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    ours, base = _summary(results["ours"]), _summary(results["baseline"])
    fewer = 1 - ours["backend_requests"] / max(1, base["backend_requests"])
    rows = [[k, ours[k] if not isinstance(ours[k], dict) else ours[k].get("p50"),
             base[k] if not isinstance(base[k], dict) else base[k].get("p50")]
            for k in ("keystrokes", "backend_requests", "requests_per_100_keys", "shown", "accepted", "accepted_chars",
                      "from_cache_share", "inflight_share", "tokens_generated", "tokens_wasted", "wasted_share",
                      "ghost_in_pauses", "cancelled", "stopped_early", "skipped_by_predictor", "prefetches")]
    rows.insert(12, ["pause → ghost text p50 ms", ours["pause_to_ghost_ms"]["p50"], base["pause_to_ghost_ms"]["p50"]])
    rows.insert(13, ["pause → ghost text p95 ms", ours["pause_to_ghost_ms"]["p95"], base["pause_to_ghost_ms"]["p95"]])
    nop = _summary(results["no_predictor"]) if results.get("no_predictor") else None
    if nop is not None:
        for r in rows:
            key = r[0]
            r.append(nop.get(key, nop["pause_to_ghost_ms"]["p50" if "p50" in key else "p95"] if "ghost text" in key else ""))
    rep.add(f"{len(segs)} sessions per configuration, {args.chars} characters each, typing speed ×{args.speed}, "
            f"files: {', '.join(sorted({s[0].name for s in segs}))} (held out of the models' training). "
            "Both configurations type the same segments with the same seeds, interleaved.\n\n"
            + md_table(["figure", "ours", "baseline"] + (["ours without predictor"] if nop else []), rows))
    if nop is not None:
        saved = 1 - ours["backend_requests"] / max(1, nop["backend_requests"])
        rep.add(f"**The acceptance predictor** skipped {ours['skipped_by_predictor']} requests; against the same "
                f"server without it: {saved:.0%} fewer backend requests, accepted {ours['accepted']} vs "
                f"{nop['accepted']} completions ({ours['accepted_chars']} vs {nop['accepted_chars']} characters).")
    p95_o, p95_b = ours["pause_to_ghost_ms"]["p95"], base["pause_to_ghost_ms"]["p95"]
    targets = {
        "fewer_requests_ge_40pct": fewer >= 0.40,
        "cache_share_ge_30pct": ours["from_cache_share"] >= 0.30,
        "wasted_le_5pct": ours["wasted_share"] <= 0.05,
        "p95_lower_than_baseline": (not math.isnan(p95_o)) and (math.isnan(p95_b) or p95_o < p95_b),
    }
    rep.add("## Targets\n\n" + md_table(["target", "met"], [
        ["≥ 40 % fewer backend requests", f"{fewer:.0%} fewer — {'yes' if targets['fewer_requests_ge_40pct'] else 'no'}"],
        ["≥ 30 % of shown completions from the cache", f"{ours['from_cache_share']:.0%} — {'yes' if targets['cache_share_ge_30pct'] else 'no'}"],
        ["wasted tokens ≤ 5 % of generated", f"{ours['wasted_share']:.1%} — {'yes' if targets['wasted_le_5pct'] else 'no'}"],
        ["lower p95 pause → ghost text", f"{p95_o} vs {p95_b} ms — {'yes' if targets['p95_lower_than_baseline'] else 'no'}"],
    ]))
    ci = _intervals(results["ours"], results["baseline"]) if len(segs) > 1 else None
    if ci:
        rep.add(f"**How sure** (90% intervals, resampling whole sessions with replacement, paired across arms, 2,000 "
                f"draws): ours' p95 pause → ghost text minus the baseline's {p95_o - p95_b:+.0f} ms, interval "
                f"[{ci['p95_minus_baseline_ms'][0]:+.0f}, {ci['p95_minus_baseline_ms'][1]:+.0f}] ms; shown from the "
                f"cache {ours['from_cache_share']:.1%} [{ci['from_cache_share'][0]:.1%}, {ci['from_cache_share'][1]:.1%}]; "
                f"wasted {ours['wasted_share']:.1%} [{ci['wasted_share'][0]:.1%}, {ci['wasted_share'][1]:.1%}]. "
                f"The p95 rests on each arm's slowest 5% of pauses with ghost text: {len(ours['_lat']) // 20} of "
                f"{len(ours['_lat'])} (ours), {len(base['_lat']) // 20} of {len(base['_lat'])} (baseline).")
    rep.add("**From the cache**: suggestions served at once from the client's prefix cache — text of earlier "
            "requests kept for the positions ahead, and suggestions shown final (put there when shown, while their "
            "generation may still stream on), typed through. **In flight**: served from a generation still running "
            "whose text was not final when the user typed on (item 4). Neither asks the backend.")
    rep.add("**Where the wasted tokens went** (ours; how each request none of whose text was shown ended): "
            + ", ".join(f"{why} {n}" for why, n in ours["wasted_by"].items())
            + ". typed_away: the user typed something else before the text could be shown; superseded: a newer "
            "request replaced it; stopped_early: stopped once its text was final, never shown; empty: its text "
            "post-processed to nothing.")
    rep.add("**Session by session** (an arm's client state — the predictor's weights, the learnt pauses — carries "
            "from one session to the next, as it does across a user's editor restarts; the first session starts "
            "with nothing learnt). Tokens generated / never shown (share) and backend requests:\n\n"
            + md_table(["session", *arms], [
                [str(i + 1), *(_waste_cell(results[a][i:i + 1]) for a in arms)] for i in range(len(segs))]
                + ([["2.." + str(len(segs)), *(_waste_cell(results[a][1:]) for a in arms)]] if len(segs) > 1 else [])))
    _plot(rep, ours["_lat"], base["_lat"])
    headline = {"requests_per_100_keys": ours["requests_per_100_keys"],
                "baseline_requests_per_100_keys": base["requests_per_100_keys"], "fewer_requests": round(fewer, 3),
                "from_cache_share": ours["from_cache_share"], "wasted_share": ours["wasted_share"],
                "baseline_wasted_share": base["wasted_share"], "pause_to_ghost_p50_ms": ours["pause_to_ghost_ms"]["p50"],
                "pause_to_ghost_p95_ms": p95_o, "baseline_pause_to_ghost_p95_ms": p95_b,
                "accepted": ours["accepted"], "baseline_accepted": base["accepted"],
                "predictor_skipped": ours["skipped_by_predictor"],
                "no_predictor_requests_per_100_keys": nop["requests_per_100_keys"] if nop else None,
                "no_predictor_accepted": nop["accepted"] if nop else None, "wasted_by": ours["wasted_by"],
                "wasted_share_after_first_session": _summary(results["ours"][1:])["wasted_share"] if len(segs) > 1 else None,
                "intervals_90": ci, "targets_met": targets}
    return rep.finish(headline)


def _plot(rep: Report, ours: list[float], base: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for xs, label in ((ours, "ours"), (base, "baseline")):
        if xs:
            xs = sorted(xs)
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{label} (n={len(xs)})")
    ax.set_xlabel("pause → ghost text (ms)")
    ax.set_ylabel("share of pauses with ghost text")
    ax.set_title("Perceived latency, cumulative")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = rep.plot_path("latency_cdf")
    fig.savefig(path, dpi=110)
    rep.add(f"![pause to ghost text]({path.name})")
