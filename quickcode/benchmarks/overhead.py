"""`quickcode bench overhead`: latency our layers (WebSocket, session, scheduler, tokenizer) add over raw AsyncLLM
(`--engine openai`: over an OpenAI-compatible vLLM server called directly,
quickcode/benchmarks/overhead_remote.py)."""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from quickcode.benchmarks.loadgen import CodeCorpus, Session, finite, progress
from quickcode.benchmarks.report import Report, figure, md_table, pcts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings of the in-process backend")
    p.add_argument("--pairs", type=int, default=120, help="direct/WebSocket pairs per prompt length")
    p.add_argument("--lengths", default="128,1500", help="prompt lengths in tokens")
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--tokenize-n", type=int, default=2000, help="build_prompt calls on 2,048-token contexts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engine", choices=("embedded", "openai"), default="embedded",
                   help="openai: quickcode in front of an OpenAI-compatible vLLM server vs that server called "
                        "directly (quickcode/benchmarks/overhead_remote.py)")
    p.add_argument("--engine-url", default="", help="with --engine openai: the server's base URL (default: start "
                                                    "vLLM's own server on the target model)")


def run(args: argparse.Namespace) -> dict:
    import os

    from quickcode.backend.launch import free_port
    from quickcode.backend.settings import Settings

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

    overrides = dict(kv.split("=", 1) for kv in args.set)
    if args.engine == "openai":
        from quickcode.benchmarks import overhead_remote

        return overhead_remote.run(args, overrides)
    settings = Settings(port=free_port(), **overrides)
    progress("loading the code corpus")
    corpus = CodeCorpus(seed=args.seed)
    t0 = time.time()
    res = asyncio.run(_main(args, settings, corpus))
    res["t0"] = t0
    return _report(args, settings, res)


async def serve_here(settings):
    """(uvicorn server, its task, the app's backend) once the engine is ready: the app served on a task of this
    event loop, so a benchmark reads the engine's own timings beside its client's."""
    import uvicorn

    from quickcode.backend.app import create_app

    app = create_app(settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=settings.port, http="httptools", ws="websockets-sansio",
                            log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    serve_task = asyncio.create_task(server.serve())
    backend = app.state.backend
    while not backend.engine.ready:
        if serve_task.done():
            raise RuntimeError("the server stopped") from serve_task.exception()
        if backend.engine.start_error:
            raise RuntimeError(backend.engine.start_error)
        await asyncio.sleep(0.2)
    return server, serve_task, backend


async def _main(args, settings, corpus: CodeCorpus) -> dict:
    from quickcode.backend.fim import build_prompt

    progress("starting the engine in this process (uvicorn serves the app on a task of this event loop)")
    server, serve_task, backend = await serve_here(settings)
    engine = backend.engine
    url = f"ws://127.0.0.1:{settings.port}/v1/ws"
    session = await Session(url, "overhead").open()
    budget = backend.service.prompt_budget_tokens

    # Per engine request: when AsyncLLM's input processing (tokenizing a text prompt, checking an ids prompt)
    # started and ended, and when AsyncLLM yielded the first text. Everything from input processing's end to the
    # first text is the engine's own work ("core"); what a path spends outside it is what the layers above add.
    timeline: dict[str, dict[str, float]] = {}
    processor = engine.llm.input_processor
    process_inputs_async, process_inputs = processor.process_inputs_async, processor.process_inputs
    llm_generate = engine.llm.generate
    ws_rids: list[str] = []

    def processed(request_id: str, t0: float) -> None:
        timeline.setdefault(request_id, {}).update(pi_start=t0, pi_end=time.perf_counter())

    def core_s(tl: dict[str, float]) -> float:
        return tl["first_out"] - tl["pi_end"] if "first_out" in tl and "pi_end" in tl else float("nan")

    async def timed_process_inputs(request_id, *a, **kw):
        t0 = time.perf_counter()
        r = await process_inputs_async(request_id, *a, **kw)
        processed(request_id, t0)
        return r

    def timed_process_inputs_sync(request_id, *a, **kw):     # a rendered prompt (what the service sends)
        t0 = time.perf_counter()
        r = process_inputs(request_id, *a, **kw)
        processed(request_id, t0)
        return r

    async def timed_generate(prompt, params, request_id, **kw):
        if not request_id.startswith(("ovh-", "raw-", "warm-")):
            ws_rids.append(request_id)
        async for out in llm_generate(prompt, params, request_id, **kw):
            tl = timeline.setdefault(request_id, {})
            if "first_out" not in tl and out.outputs and out.outputs[0].text:
                tl["first_out"] = time.perf_counter()
            yield out

    processor.process_inputs_async = timed_process_inputs
    processor.process_inputs = timed_process_inputs_sync
    engine.llm.generate = timed_generate

    async def direct(rid: str, ids: list[int]) -> tuple[float, float]:
        t0 = time.perf_counter()
        t_first = None
        async for d in engine.generate(rid, ids, args.max_tokens, [], 0.0, 0):
            if t_first is None and d.text:
                t_first = time.perf_counter()
        t_end = time.perf_counter()
        return (t_first or t_end) - t0, t_end - t0

    async def raw_text(rid: str, text: str) -> dict:
        """The prompt's text straight into AsyncLLM, as a program using vLLM directly would send it, the way vLLM
        recommends (`AsyncLLM.generate`'s docstring): render it with AsyncLLM's renderer (tokenizing with the
        model's Hugging Face tokenizer, in this event loop — no thread-pool hop), then generate."""
        from vllm import SamplingParams
        from vllm.renderers.inputs.preprocess import parse_model_prompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, output_kind=RequestOutputKind.DELTA,
                                skip_special_tokens=True)
        t0 = time.perf_counter()
        llm = engine.llm
        (rendered,) = llm.renderer.render_cmpl([parse_model_prompt(llm.model_config, text)],
                                               llm.renderer.default_cmpl_tok_params)
        t_rendered = time.perf_counter()
        t_first = None
        async for out in llm.generate(rendered, params, rid):
            if t_first is None and out.outputs[0].text:
                t_first = time.perf_counter()
        tl = timeline.pop(rid, {})
        t_first = t_first or time.perf_counter()
        core = core_s(tl)
        return {"ttft": t_first - t0, "outside": (t_first - t0) - core, "core": core,
                "prompt_tokens": len(rendered["prompt_token_ids"]), "tokenize": t_rendered - t0,
                "process_inputs": tl.get("pi_end", t0) - tl.get("pi_start", t0)}

    async def via_ws(text: str) -> tuple[float, float, dict, dict]:
        ws_rids.clear()
        o = session.complete(text, max_tokens=args.max_tokens)
        await session.wait(o.id, 120)
        tl = timeline.pop(ws_rids[0], {}) if ws_rids else {}
        ttft = o.ttft_s if o.t_first is not None else o.total_s
        core = core_s(tl)
        return ttft, o.total_s, o.timing, {"outside": ttft - core, "core": core,
                                           "process_inputs": tl.get("pi_end", 0.0) - tl.get("pi_start", 0.0)}

    # warm both paths
    for i in range(4):
        text, _ = corpus.prompt(256)
        ids = build_prompt(engine.tokenizer, engine.template, text, "", budget, fim_policy=settings.fim_policy)
        await direct(f"warm-{i}", ids)
        await raw_text(f"warm-raw-{i}", engine.tokenizer.decode(ids))
        await via_ws(corpus.prompt(256)[0])
    results = {}
    for n_tokens in [int(x) for x in args.lengths.split(",")]:
        rows = []
        progress(f"{args.pairs} triples at {n_tokens} prompt tokens (rotating which path goes first)")
        for i in range(args.pairs):
            a_text, _ = corpus.prompt(n_tokens)     # a fresh prompt for each path: no prefix-cache help
            b_text, _ = corpus.prompt(n_tokens)
            c_text, _ = corpus.prompt(n_tokens)
            ids = build_prompt(engine.tokenizer, engine.template, a_text, "", budget, fim_policy=settings.fim_policy)
            c_ids = build_prompt(engine.tokenizer, engine.template, c_text, "", budget, fim_policy=settings.fim_policy)
            c_prompt = engine.tokenizer.decode(c_ids)  # the same text the ws path's prompt is cut to, as one string
            row = {}
            for arm in ("direct", "ws", "raw")[i % 3:] + ("direct", "ws", "raw")[:i % 3]:
                if arm == "direct":
                    row["direct_ttft"], row["direct_total"] = await direct(f"ovh-{n_tokens}-{i}", ids)
                    timeline.pop(f"ovh-{n_tokens}-{i}", None)
                elif arm == "ws":
                    row["ws_ttft"], row["ws_total"], row["timing"], row["ws"] = await via_ws(b_text)
                else:
                    row["raw"] = await raw_text(f"raw-{n_tokens}-{i}", c_prompt)
            rows.append(row)
        results[n_tokens] = rows
    await session.close()
    # tokenization: build_prompt on 2,048-token contexts (prefix ~1,800 + suffix ~250 tokens; cut to the budget)
    from quickcode.backend.segments import segment_cache

    cache = segment_cache(engine.tokenizer)
    contexts = []
    for _ in range(50):
        text, start = corpus.prompt(2048)
        cut = corpus.offsets[start + 1800] - corpus.offsets[start]
        contexts.append((text[:cut], text[cut:]))
    progress(f"tokenization: {args.tokenize_n} build_prompt calls on 2,048-token contexts, cold and while typing")
    cold_s, typing_s, enc_s, cold_cpu_s, typing_cpu_s = [], [], [], [], []
    for i in range(args.tokenize_n):
        pre, suf = contexts[i % len(contexts)]
        if cache is not None:
            cache.ids.clear()                        # cold: nothing of this context seen before
        t0, c0 = time.perf_counter(), time.thread_time()
        ids = build_prompt(engine.tokenizer, engine.template, pre, suf, settings.max_prompt_tokens)
        cold_s.append(time.perf_counter() - t0)
        cold_cpu_s.append(time.thread_time() - c0)
        t0 = time.perf_counter()
        engine.tokenizer.encode(pre + suf)
        enc_s.append(time.perf_counter() - t0)
    typed = "    result = compute(value, other)  # typed\n"
    for i in range(args.tokenize_n):                 # typing: each call's prefix is the previous one + a char
        pre, suf = contexts[(i // len(typed)) % len(contexts)]
        if i % len(typed) == 0:                      # a new file: its previous keystroke was seen (untimed)
            build_prompt(engine.tokenizer, engine.template, pre, suf, settings.max_prompt_tokens)
        pre = pre + typed[: i % len(typed) + 1]
        t0, c0 = time.perf_counter(), time.thread_time()
        build_prompt(engine.tokenizer, engine.template, pre, suf, settings.max_prompt_tokens)
        typing_s.append(time.perf_counter() - t0)
        typing_cpu_s.append(time.thread_time() - c0)
    processor.process_inputs_async = process_inputs_async       # set in InputProcessor.__init__
    del processor.process_inputs                                # the instance attribute: back to the method
    del engine.llm.generate                          # the instance attribute: back to AsyncLLM.generate
    server.should_exit = True
    await serve_task
    return {"pairs": results, "cold_s": cold_s, "typing_s": typing_s, "encode_s": enc_s, "prompt_len": len(ids),
            "cold_cpu_s": cold_cpu_s, "typing_cpu_s": typing_cpu_s,
            "segments": cache is not None}


def _report(args, settings, r: dict) -> dict:
    import numpy as np

    report = Report("overhead", "Overhead of WebSocket + session + scheduler over raw AsyncLLM", started=r["t0"])
    report.add(f"""
One process, one event loop, one engine: the app (`create_app`) served by uvicorn on a task of the loop, and
beside it the same engine called directly. Each triple sends three fresh prompts of the same token length
(never seen before: no prefix-cache help), rotating which goes first so that drift hits all three:

- **raw AsyncLLM** — the prompt's text straight into AsyncLLM, as a program using vLLM without quickcode would,
  the way vLLM recommends (`AsyncLLM.generate`'s docstring): rendered by AsyncLLM's renderer (the model's
  Hugging Face tokenizer, in the event loop), then `AsyncLLM.generate`;
- **WebSocket** — the same kind of text through quickcode (JSON frame → session → validation → our tokenizer →
  scheduler → `AsyncLLM.generate` on token ids → chunk → JSON frame → client);
- **AsyncLLM on ids** — `engine.generate` on ids we tokenized beforehand (untimed), for reference.

The client runs in the same loop, so its own frame encoding/decoding counts as overhead (an upper bound).
Engine settings: spec_method={settings.spec_method}, max_tokens={args.max_tokens}, greedy. TTFT = until the
first non-empty text. Prefill of a 1,500-token prompt varies by tens of ms from prompt to prompt on this shared
machine, far more than what is measured here, so each request's time is split at AsyncLLM's own boundary (both
timestamps taken by wrappers installed on this engine for the run): **core** = from the end of AsyncLLM's input
processing to AsyncLLM yielding the first text (the engine's work, the same for every path); **outside** = TTFT −
core (for raw AsyncLLM: rendering, i.e. tokenizing the text, and AsyncLLM's input processing of the rendered
prompt; for the WebSocket: everything quickcode does, including its own tokenizer and rendering of the ids, plus
AsyncLLM's input processing).
""")
    rows, xrows, orows, headline_added, headline_within = [], [], [], {}, {}
    rng = np.random.default_rng(0)
    fig, axes = figure(1, len(r["pairs"]) + 1, figsize=(5 * (len(r["pairs"]) + 1), 4))
    for ax, (n_tokens, pairs) in zip(axes, r["pairs"].items()):
        d = np.array([p["direct_ttft"] * 1000 for p in pairs])
        w = np.array([p["ws_ttft"] * 1000 for p in pairs])
        eng = np.array([p["timing"].get("ttft_ms", 0.0) for p in pairs])
        added = w - eng                      # within one request: client TTFT − the engine's own TTFT
        tok = [p["timing"].get("tokenize_ms", 0.0) for p in pairs]
        q = [p["timing"].get("queue_ms", 0.0) for p in pairs]
        pa, pd, pw, pe = pcts(added), pcts(d), pcts(w), pcts(eng)
        boot = [np.percentile(w[i], 50) - np.percentile(d[i], 50)
                for i in (rng.integers(0, len(d), len(d)) for _ in range(1000))]
        lo, hi = np.percentile(boot, [2.5, 97.5])
        headline_within[n_tokens] = {"p50_ms": round(pa["p50"], 2), "p95_ms": round(pa["p95"], 2),
                                     "p99_ms": round(pa["p99"], 2)}
        def ms(arm: str, key: str, pairs=pairs) -> np.ndarray:    # one split of every request of a path, in ms
            return np.array([p[arm][key] * 1000 for p in pairs])

        raw_out, ws_out = ms("raw", "outside"), ms("ws", "outside")
        raw_pi, raw_tok, ws_pi = ms("raw", "process_inputs"), ms("raw", "tokenize"), ms("ws", "process_inputs")
        raw_core, ws_core = ms("raw", "core"), ms("ws", "core")
        raw_out, ws_out = raw_out[np.isfinite(raw_out)], ws_out[np.isfinite(ws_out)]
        pro, pwo = pcts(raw_out), pcts(ws_out)
        headline_added[n_tokens] = {"p50_ms": round(pwo["p50"] - pro["p50"], 2),
                                    "p95_ms": round(pwo["p95"] - pro["p95"], 2),
                                    "p99_ms": round(pwo["p99"] - pro["p99"], 2)}
        orows.append([n_tokens, len(raw_out), round(statistics.median(p["raw"]["prompt_tokens"] for p in pairs)),
                      round(pro["p50"], 2), round(pro["p95"], 2), round(statistics.median(raw_tok), 2),
                      round(statistics.median(raw_pi), 2),
                      round(pwo["p50"], 2), round(pwo["p95"], 2), round(statistics.median(ws_pi), 2),
                      round(pwo["p50"] - pro["p50"], 2), round(pwo["p95"] - pro["p95"], 2),
                      round(float(np.nanmedian(raw_core)), 1), round(float(np.nanmedian(ws_core)), 1)])
        rows.append([n_tokens, len(pairs), round(pa["p50"], 2), round(pa["p95"], 2), round(pa["p99"], 2),
                     round(statistics.median(tok), 3), round(statistics.median(q), 3)])
        xrows.append([n_tokens, pd["p50"], pe["p50"], pw["p50"], round(pw["p50"] - pd["p50"], 1),
                      f"[{lo:.1f}, {hi:.1f}]", pd["p95"], pw["p95"]])
        ax.plot(np.sort(d), np.linspace(0, 1, len(d)), label="AsyncLLM on ids")
        ax.plot(np.sort(w), np.linspace(0, 1, len(w)), label="WebSocket + scheduler")
        ax.plot(np.sort(added), np.linspace(0, 1, len(added)), label="ws: all but AsyncLLM on ids")
        ax.plot(np.sort(raw_out), np.linspace(0, 1, len(raw_out)), label="raw AsyncLLM: outside core")
        ax.plot(np.sort(ws_out), np.linspace(0, 1, len(ws_out)), label="ws: outside core")
        ax.set_xscale("log")
        ax.set_xlabel("ms")
        ax.set_title(f"TTFT, {n_tokens}-token prompts")
        ax.legend(fontsize=8)
    report.add("**Added latency over raw AsyncLLM** (what the issue asks: the same prompts straight into AsyncLLM vs "
               "through WebSocket + scheduler) — percentiles of each path's *outside* time, and their difference:\n\n"
               + md_table(["prompt tokens", "requests", "raw prompt tokens (vLLM's count)", "raw outside p50 ms",
                           "raw outside p95 ms", "of which rendering (tokenizing) p50 ms",
                           "of which AsyncLLM input processing p50 ms", "ws outside p50 ms",
                           "ws outside p95 ms", "of which AsyncLLM input processing (ids) p50 ms",
                           "**added p50 ms**", "**added p95 ms**", "core p50 ms raw", "core p50 ms ws"], orows))
    report.add("**Everything but AsyncLLM on ids, within each request** (stricter: our tokenizer counted as overhead, "
               "as if tokenizing were free without quickcode) — the client's TTFT (send → first chunk) minus the "
               "engine's own TTFT for that request (`timing.ttft_ms`: `engine.generate` called with ids → first "
               "token): frames, session, validation, tokenization, scheduler, the chunk's way back:\n\n"
               + md_table(["prompt tokens", "requests", "added p50 ms", "added p95 ms", "added p99 ms",
                           "of which tokenize p50 ms", "queue p50 ms"], rows))
    report.add("**Cross-check against AsyncLLM on ids** (the distributions of the two paths; the difference of medians "
               "with a bootstrap 95 % interval — wide, because every pair has two different prompts and prefill "
               "time varies a lot on this shared machine):\n\n"
               + md_table(["prompt tokens", "direct TTFT p50 ms", "engine TTFT in ws path p50 ms", "ws TTFT p50 ms",
                           "ws − direct p50 ms", "95 % interval", "direct p95 ms", "ws p95 ms"], xrows))
    cold_ms = [x * 1000 for x in r["cold_s"]]
    typing_ms = [x * 1000 for x in r["typing_s"]]
    enc_ms = [x * 1000 for x in r["encode_s"]]
    pc, pt, pe = pcts(cold_ms), pcts(typing_ms), pcts(enc_ms)
    pcc, ptc = pcts([x * 1000 for x in r["cold_cpu_s"]]), pcts([x * 1000 for x in r["typing_cpu_s"]])
    report.add(f"""
**Tokenization** (`quickcode/backend/fim.py` `build_prompt`, 2,048-token contexts = ~1,800 tokens of prefix + ~250 of
suffix, cut to `max_prompt_tokens`={settings.max_prompt_tokens} → {r['prompt_len']} ids). Prompts are tokenized
in line segments cached by content ({'on' if r['segments'] else 'OFF: this tokenizer failed the exactness check'}),
so there are two cases. Wall time is what this shared machine delivered (the process waits for a core while
other engines and trainings run); CPU time (`thread_time`) is what the code costs.

| case | calls | wall p50 ms | wall p95 ms | wall p99 ms | CPU p50 ms | CPU p99 ms |
|---|---|---|---|---|---|---|
| typing: the prefix grew by one character since the last call (every keystroke) | {len(typing_ms)} | {pt['p50']:.3f} | {pt['p95']:.3f} | **{pt['p99']:.3f}** | {ptc['p50']:.3f} | **{ptc['p99']:.3f}** |
| cold: a context never seen (cache cleared before each call) | {len(cold_ms)} | {pc['p50']:.3f} | {pc['p95']:.3f} | {pc['p99']:.3f} | {pcc['p50']:.3f} | {pcc['p99']:.3f} |
| plain `Tokenizer.encode` of the whole context, for reference | {len(enc_ms)} | {pe['p50']:.3f} | {pe['p95']:.3f} | {pe['p99']:.3f} | | |

Target p99 ≤ 1 ms — typing: CPU {'met' if ptc['p99'] <= 1 else 'NOT met'} ({ptc['p99']:.3f} ms), wall
{'met' if pt['p99'] <= 1 else 'NOT met'} ({pt['p99']:.3f} ms); cold: CPU {'met' if pcc['p99'] <= 1 else 'NOT met'}
({pcc['p99']:.3f} ms — the first request for a file pays the full encode).
""")
    ax = axes[-1]
    ax.plot(np.sort(typing_ms), np.linspace(0, 1, len(typing_ms)), label="build_prompt, typing")
    ax.plot(np.sort(cold_ms), np.linspace(0, 1, len(cold_ms)), label="build_prompt, cold")
    ax.plot(np.sort(enc_ms), np.linspace(0, 1, len(enc_ms)), label="encode whole context")
    ax.set_xscale("log")
    ax.axvline(1.0, color="tab:orange", ls="--", label="1 ms")
    ax.set_xlabel("ms")
    ax.set_title("tokenizing a 2,048-token context")
    ax.legend()
    report.add_figure(fig, "cdf", "TTFT CDFs and tokenization")
    first = headline_added[min(headline_added)]
    met = all(v["p50_ms"] <= 2 and v["p95_ms"] <= 5 for v in headline_added.values())
    met_within = all(v["p50_ms"] <= 2 and v["p95_ms"] <= 5 for v in headline_within.values())
    report.add(f"**Targets** (added over raw AsyncLLM ≤ 2 ms p50, ≤ 5 ms p95): {'met' if met else 'NOT met'} — "
               + "; ".join(f"{k} tokens: {v['p50_ms']:+} ms p50, {v['p95_ms']:+} ms p95" for k, v in headline_added.items())
               + f". The stricter figure (all but AsyncLLM on ids, our tokenizer counted): {'met' if met_within else 'NOT met'} — "
               + "; ".join(f"{k} tokens: +{v['p50_ms']} ms p50, +{v['p95_ms']} ms p95" for k, v in headline_within.items())
               + ". Against raw AsyncLLM the long prompts come out ahead: AsyncLLM tokenizes a text prompt with the "
               "model's Hugging Face tokenizer, quickcode with its own (`quickcode/backend/segments.py`: the same ids, by line "
               "segments cached by content) — the tokenize columns above.")
    headline = {"bench": "overhead", "added_ms": {str(k): v for k, v in headline_added.items()},
                "added_all_but_engine_on_ids_ms": {str(k): v for k, v in headline_within.items()},
                "target_all_but_engine_on_ids_met": met_within,
                "added_p50_ms": first["p50_ms"], "added_p95_ms": first["p95_ms"],
                "tokenize_2048_typing_p99_ms": {"wall": round(pt["p99"], 3), "cpu": round(ptc["p99"], 3)},
                "tokenize_2048_cold_p99_ms": {"wall": round(pc["p99"], 3), "cpu": round(pcc["p99"], 3)},
                "target_added_met": met, "target_tokenize_met_typing_cpu": ptc["p99"] <= 1,
                "target_tokenize_met_typing_wall": pt["p99"] <= 1, "target_tokenize_met_cold_cpu": pcc["p99"] <= 1}
    return report.finish(finite(headline))
