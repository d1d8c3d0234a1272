"""Run prompts through real vLLM engines (plain, draft, ngram, INT8) and record tokens, timings and spec stats.

A subprocess entry point (vLLM spawns processes, and each engine should start from a clean environment):

    python -m quickcode.draft_model.vllm_runner SPEC.json OUT.json

SPEC = {"runs": [{"name": str, "settings": {Settings field: value}}, ...], "prompts": [[token id, ...], ...],
        "max_tokens": int, "warmup": int, "loss_windows": [[token id, ...], ...] (optional, scored by runs
        with "loss": true)}
The engine arguments come from `quickcode.backend.vllm_engine.engine_args(Settings(...))` — the backend's own
— with per-request speculative metrics switched to "detailed" (the ordered accepted count of every verify
step, which attributes each output token to accepted / rejected / bonus). One engine per process: vLLM
preloads an OpenMP runtime into the environment of the first engine, and a second engine of the same process
then refuses to start (Intel OpenMP is preloaded for speculative runs exactly as the backend does it).
`run_subprocesses` starts one process per run.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from pathlib import Path


def _request_params(max_tokens: int, logprobs: int | None = None):
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(max_tokens=max_tokens, temperature=0.0, output_kind=RequestOutputKind.DELTA,
                          skip_special_tokens=True, logprobs=logprobs)


async def _generate(llm, rid: str, prompt: list[int], max_tokens: int, logprobs: int | None = None) -> dict:
    """One greedy request. `logprobs`: also record, per generated token, the `logprobs` most likely
    alternatives as [[token_id, logprob], ...] best first (to tell a numerical near-tie from a real difference)."""
    from vllm.inputs import TokensPrompt

    t_submit = time.perf_counter()
    t_first = t_last = None
    ids: list[int] = []
    text: list[str] = []
    steps_seen: list[int] = []   # tokens per streamed output (one engine step each unless the consumer lagged)
    step_s: list[float] = []     # when each of those outputs arrived, seconds after submission
    top: list[list[list]] = []
    sd = None
    finish = None
    async for out in llm.generate(TokensPrompt(prompt_token_ids=prompt), _request_params(max_tokens, logprobs), rid):
        now = time.perf_counter()
        c = out.outputs[0]
        if c.token_ids:
            if t_first is None:
                t_first = now
            t_last = now
            steps_seen.append(len(c.token_ids))
            step_s.append(now - t_submit)
        ids += list(c.token_ids)
        text.append(c.text)
        for alternatives in (c.logprobs or []) if logprobs else []:
            top.append(sorted(([t, lp.logprob] for t, lp in alternatives.items()), key=lambda a: -a[1]))
        sd = c.spec_decode_metrics or sd
        finish = c.finish_reason or finish
    rec = {"token_ids": ids, "text": "".join(text), "finish_reason": finish, "streamed_steps": steps_seen,
           "step_s": step_s,
           "ttft_s": (t_first or t_submit) - t_submit, "decode_s": (t_last or t_submit) - (t_first or t_submit),
           "e2e_s": (t_last or time.perf_counter()) - t_submit}
    if logprobs:
        rec["top_logprobs"] = top
    if sd is not None:
        rec["spec"] = {"histogram": list(sd.histogram), "num_draft_tokens": sd.num_draft_tokens,
                       "per_step_accepted": list(sd.per_step_accepted), "per_step_drafted": list(sd.per_step_drafted)}
    return rec


async def _loss(llm, windows: list[list[int]]) -> dict:
    """Held-out next-token loss and top-1 from vLLM's own prompt log-probabilities (what it serves)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    nll, correct, n = 0.0, 0, 0
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
    for i, w in enumerate(windows):
        final = None
        async for out in llm.generate(TokensPrompt(prompt_token_ids=w), params, f"loss-{i}"):
            final = out
        for tok, lp in zip(w[1:], final.prompt_logprobs[1:]):
            entry = lp[tok]
            nll -= entry.logprob
            correct += entry.rank == 1
            n += 1
    loss = nll / max(1, n)
    return {"loss": loss, "ppl": math.exp(min(loss, 50)), "top1": correct / max(1, n), "tokens": n}


async def run_one(run: dict, spec: dict) -> dict:
    from quickcode.backend.engine import EngineStats
    from quickcode.backend.vllm_engine import engine_args, preload_iomp
    from quickcode.backend.vllm_stats import stat_logger_factory
    from quickcode.backend.settings import Settings
    from vllm.v1.engine.async_llm import AsyncLLM

    s = Settings(**run["settings"])
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(round(s.kv_cache_gib)))))
    if s.preload_iomp and s.spec_method != "off":
        preload_iomp()
    args = engine_args(s)
    if args.speculative_config:
        args.per_request_spec_decode_metrics = "detailed"
    stats = EngineStats()
    t0 = time.perf_counter()
    llm = AsyncLLM.from_engine_args(args, stat_loggers=[stat_logger_factory(stats)])
    out: dict = {"name": run["name"], "settings": run["settings"], "start_s": time.perf_counter() - t0,
                 "ld_preload": os.environ.get("LD_PRELOAD", "")}
    try:
        prompts, max_tokens = spec["prompts"], spec["max_tokens"]
        for i in range(min(spec.get("warmup", 2), len(prompts))):
            await _generate(llm, f"warmup-{i}", prompts[i], max_tokens)
        logprobs = spec.get("logprobs")
        await asyncio.sleep(0.2)  # let the stat logger record the warm-up steps before the snapshot
        before = (stats.spec_drafts, stats.spec_draft_tokens, stats.spec_accepted_tokens, list(stats.spec_accepted_per_pos))
        t0 = time.perf_counter()
        out["requests"] = [await _generate(llm, f"req-{i}", p, max_tokens, logprobs) for i, p in enumerate(prompts)]
        out["wall_s"] = time.perf_counter() - t0
        await asyncio.sleep(0.5)
        per_pos = [a - (before[3][i] if i < len(before[3]) else 0) for i, a in enumerate(stats.spec_accepted_per_pos)]
        out["engine_spec"] = {"drafts": stats.spec_drafts - before[0], "draft_tokens": stats.spec_draft_tokens - before[1],
                              "accepted_tokens": stats.spec_accepted_tokens - before[2], "accepted_per_pos": per_pos}
        if run.get("loss") and spec.get("loss_windows"):
            t0 = time.perf_counter()
            out["heldout"] = await _loss(llm, spec["loss_windows"])
            out["heldout"]["s"] = time.perf_counter() - t0
    finally:
        llm.shutdown()
    return out


def run_subprocesses(spec: dict, work_dir: Path, timeout_s: float = 1800.0, reuse: bool = False) -> dict:
    """Run each of `spec["runs"]` in a fresh Python process (this module's main), one after another.
    vLLM's output goes to `work_dir/<name>.log`; returns {name: result}. `reuse`: keep a finished run whose
    spec file is byte-identical to this one's (same models, settings, prompts) instead of running it again."""
    import subprocess

    work_dir.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"), "TQDM_DISABLE": "1"}
    env.pop("LD_PRELOAD", None)  # each engine gets the environment the backend would give it
    results = {}
    for run in spec["runs"]:
        name = run["name"]
        spec_path, out_path, log_path = (work_dir / f"{name}.spec.json", work_dir / f"{name}.out.json",
                                         work_dir / f"{name}.log")
        text = json.dumps({**spec, "runs": [run]})
        if reuse and out_path.exists() and spec_path.exists() and spec_path.read_text() == text:
            results[name] = json.loads(out_path.read_text())
            print(f"[vllm] {name}: reusing {out_path}", file=sys.stderr, flush=True)
            continue
        spec_path.write_text(text)
        out_path.unlink(missing_ok=True)
        print(f"[vllm] {name}: starting an engine (log {log_path})", file=sys.stderr, flush=True)
        with open(log_path, "w") as log:
            proc = subprocess.run([sys.executable, "-m", "quickcode.draft_model.vllm_runner", str(spec_path), str(out_path)],
                                  cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s)
        if proc.returncode != 0 or not out_path.exists():
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
            raise RuntimeError(f"vLLM run {name} failed ({proc.returncode}); log {log_path}:\n{tail}")
        results[name] = json.loads(out_path.read_text())
        r = results[name]
        print(f"[vllm] {name}: engine up in {r['start_s']:.0f} s, {len(r['requests'])} requests in "
              f"{r['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return results


if __name__ == "__main__":
    spec_file, out_file = Path(sys.argv[1]), Path(sys.argv[2])
    spec_in = json.loads(spec_file.read_text())
    if len(spec_in["runs"]) != 1:
        raise SystemExit("one run per process (see the module docstring)")
    out_file.write_text(json.dumps(asyncio.run(run_one(spec_in["runs"][0], spec_in))))
