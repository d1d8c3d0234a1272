"""`quickcode bench overhead --engine openai`: what quickcode in front of an OpenAI-compatible vLLM server adds
over calling that server directly, in one run: the same prompts straight to the server (the official client,
streamed), through quickcode's WebSocket (engine = "openai"), and through quickcode's remote engine alone."""
from __future__ import annotations

import asyncio
import os
import random
import time

from quickcode.benchmarks.loadgen import REPO, CodeCorpus, Session, finite, progress
from quickcode.benchmarks.report import Report, md_table, pcts

ARMS = ("direct", "ws", "engine")


def run(args, overrides: dict) -> dict:
    from quickcode.backend.launch import free_port, start_vllm_server, stop_backend
    from quickcode.backend.model_info import served_max_model_len
    from quickcode.backend.settings import Settings

    server = None
    url = args.engine_url
    if not url:
        context = served_max_model_len(Settings(**overrides)) or 1024    # the context the model was trained on
        progress(f"starting vLLM's OpenAI-compatible server on the target model (context {context} tokens)")
        server = start_vllm_server(REPO / "artifacts" / "logs" / "bench-overhead-vllm.log",
                                   Settings(**overrides).target_path, served_model_name="overhead",
                                   max_model_len=context)
        url = server.base_url
    settings = Settings(**{"port": free_port(), "engine": "openai", "engine_url": url, **overrides})
    progress("loading the code corpus")
    corpus = CodeCorpus(seed=args.seed)
    t0 = time.time()
    try:
        res = asyncio.run(_main(args, settings, corpus))
    finally:
        if server is not None:
            stop_backend(server)
    res["t0"] = t0
    return _report(args, settings, res, started_server=server is not None)


async def _main(args, settings, corpus: CodeCorpus) -> dict:
    from openai import AsyncOpenAI

    from quickcode.backend.fim import build_prompt
    from quickcode.benchmarks.overhead import serve_here

    server, serve_task, backend = await serve_here(settings)
    engine = backend.engine
    client = AsyncOpenAI(base_url=settings.engine_url, api_key=settings.engine_api_key.get_secret_value() or "none",
                         max_retries=0, timeout=60.0)
    session = await Session(f"ws://127.0.0.1:{settings.port}/v1/ws", "overhead").open()
    budget = backend.service.prompt_budget_tokens

    async def direct(text: str) -> dict:
        """A program calling the server itself: the prompt's text, streamed, as the official client sends it."""
        t0 = time.perf_counter()
        t_first, prompt_tokens = None, 0
        stream = await client.completions.create(
            model=engine.model, prompt=text, max_tokens=args.max_tokens, temperature=0.0, stream=True,
            stream_options={"include_usage": True}, extra_body={"cache_salt": _salt()})
        async with stream:
            async for chunk in stream:
                if t_first is None and chunk.choices and chunk.choices[0].text:
                    t_first = time.perf_counter()
                if chunk.usage is not None:
                    prompt_tokens = chunk.usage.prompt_tokens
        return {"ttft": (t_first or time.perf_counter()) - t0, "prompt_tokens": prompt_tokens}

    async def via_ws(text: str) -> dict:
        o = session.complete(text, max_tokens=args.max_tokens)
        await session.wait(o.id, 120)
        ttft = o.ttft_s if o.t_first is not None else o.total_s
        return {"ttft": ttft, "engine_ttft": o.timing.get("ttft_ms", 0.0) / 1000,
                "prompt_tokens": o.timing.get("prompt_tokens", 0)}

    async def on_ids(rid: str, ids: list[int]) -> dict:
        """quickcode's remote engine alone, on ids tokenized beforehand (untimed)."""
        t0 = time.perf_counter()
        t_first = None
        async for d in engine.generate(rid, ids, args.max_tokens, [], 0.0, 0, cache_salt=_salt()):
            if t_first is None and d.text:
                t_first = time.perf_counter()
        return {"ttft": (t_first or time.perf_counter()) - t0, "prompt_tokens": len(ids)}

    def prompt(n_tokens: int) -> tuple[str, list[int]]:
        text, _ = corpus.prompt(n_tokens)
        ids = build_prompt(engine.tokenizer, engine.template, text, "", budget, fim_policy=settings.fim_policy)
        return text, ids

    for i in range(4):   # warm every path (connections, the server's first steps)
        text, ids = prompt(256)
        await direct(engine.tokenizer.decode(ids))
        await via_ws(text)
        await on_ids(f"warm-{i}", ids)
    results = {}
    for n_tokens in [min(int(x), budget) for x in args.lengths.split(",")]:
        rows = []
        progress(f"{args.pairs} triples at {n_tokens} prompt tokens (the same prompt on each path, each with a "
                 "cache salt of its own; rotating which goes first)")
        for i in range(args.pairs):
            text, ids = prompt(n_tokens)
            row = {}
            for arm in ARMS[i % 3:] + ARMS[:i % 3]:
                if arm == "direct":          # the text quickcode's prompt is, as one string
                    row[arm] = await direct(engine.tokenizer.decode(ids))
                elif arm == "ws":
                    row[arm] = await via_ws(text)
                else:
                    row[arm] = await on_ids(f"ovh-{n_tokens}-{i}", ids)
            rows.append(row)
        results[n_tokens] = rows
    await session.close()
    await client.close()
    server.should_exit = True
    await serve_task
    return {"pairs": results, "model": engine.model, "url": settings.engine_url}


def _salt() -> str:
    """A prefix-cache salt no other request has: every request of the run computes its prompt from nothing."""
    return f"bench-{os.getpid()}-{random.getrandbits(64):x}"


def _report(args, settings, r: dict, started_server: bool) -> dict:
    import numpy as np

    report = Report("overhead-remote", "Overhead of quickcode in front of an OpenAI-compatible vLLM server",
                    started=r["t0"])
    where = ("vLLM's own OpenAI-compatible server started by the benchmark on the target model "
             f"(`python -m vllm.entrypoints.openai.api_server`, model `{r['model']}`)" if started_server
             else f"the server at {r['url']} (model `{r['model']}`)")
    report.add(f"""
One process, one event loop: the app (`create_app`, `engine = "openai"`) served by uvicorn on a task of the loop,
in front of {where}, on the same machine. Each triple sends one fresh prompt three ways, each with a prefix-cache
salt of its own (so none finds another's blocks: every request prefills its whole prompt), rotating which goes
first:

- **direct** — the prompt's text straight to the server with the official `openai` client, streamed
  (`POST /v1/completions`), as a program calling the server without quickcode would; the server tokenizes it;
- **WebSocket** — the same text through quickcode (JSON frame → session → validation → our tokenizer →
  scheduler → remote engine → token ids to the server → chunk → JSON frame → client);
- **remote engine on ids** — `RemoteEngine.generate` on ids tokenized beforehand (untimed), for reference.

The client runs in the same loop as the backend, so its own frame handling counts as overhead (an upper bound).
max_tokens={args.max_tokens}, greedy; TTFT = until the first non-empty text. **added** = WebSocket − direct,
per percentile of each path's distribution, and per triple (the same prompt: the paired difference).
""")
    rows, headline = [], {}
    for n_tokens, triples in r["pairs"].items():
        ms = {arm: np.array([t[arm]["ttft"] * 1000 for t in triples]) for arm in ARMS}
        p = {arm: pcts(ms[arm]) for arm in ARMS}
        paired = pcts(ms["ws"] - ms["direct"])
        within = pcts(ms["ws"] - np.array([t["ws"]["engine_ttft"] * 1000 for t in triples]))
        added = {"p50_ms": round(p["ws"]["p50"] - p["direct"]["p50"], 2),
                 "p95_ms": round(p["ws"]["p95"] - p["direct"]["p95"], 2)}
        headline[str(n_tokens)] = {
            "added": added, "paired_added": {"p50_ms": round(paired["p50"], 2), "p95_ms": round(paired["p95"], 2)},
            "ttft_ms": {arm: {"p50": round(p[arm]["p50"], 2), "p95": round(p[arm]["p95"], 2)} for arm in ARMS}}
        tokens = {arm: int(np.median([t[arm]["prompt_tokens"] for t in triples])) for arm in ARMS}
        rows.append([n_tokens, len(triples), tokens["direct"], tokens["ws"],
                     round(p["direct"]["p50"], 2), round(p["direct"]["p95"], 2),
                     round(p["ws"]["p50"], 2), round(p["ws"]["p95"], 2),
                     round(p["engine"]["p50"], 2), round(p["engine"]["p95"], 2),
                     f"**{added['p50_ms']:+}**", f"**{added['p95_ms']:+}**",
                     round(paired["p50"], 2), round(paired["p95"], 2), round(within["p50"], 2),
                     round(within["p95"], 2)])
    report.add(md_table(["prompt tokens (asked)", "triples", "direct prompt tokens (the server's count)",
                         "ws prompt tokens (ours)", "direct TTFT p50 ms", "direct p95 ms", "ws TTFT p50 ms",
                         "ws p95 ms", "engine on ids p50 ms", "engine on ids p95 ms", "added p50 ms",
                         "added p95 ms", "paired added p50 ms", "paired added p95 ms",
                         "ws − its remote round trip p50 ms", "… p95 ms"], rows))
    report.add("The last two columns: the client's TTFT minus the request's own `timing.ttft_ms` (the remote "
               "engine's call → first token, i.e. the HTTP round trip and the server's work): frames, session, "
               "validation, tokenization, scheduler and the chunk's way back, within each request.")
    out = {"bench": "overhead", "engine": "openai", "max_tokens": args.max_tokens, "remote": headline}
    return report.finish(finite(out))
