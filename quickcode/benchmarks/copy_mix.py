"""`quickcode bench copy`: does a cache (copy) model mixed into the target's next-token distribution complete
more lines exactly? (issue 14, item 4: "copying identifiers and lines from the open file".)

The copy model: the longest n-gram (n ≤ `--max-n`) that ends the context (the prompt as the backend builds it —
prefix, suffix, FIM tokens — plus what was generated) and occurred earlier in it; its distribution is that of
the tokens that followed the earlier occurrences. Mixed as p = (1 − λ_n) p_model + λ_n p_copy, λ by the length
of the match. Greedy decoding in PyTorch of the first line (what the served exact-match figures count), on
HumanEval single-line infilling (`bench quality`'s seeded subset) and the held-out FIM cases of the model's
data; every λ setting against plain decoding on the same cases (wins / losses: cases only one of the two got).
A screen in PyTorch with the served functions (quickcode/backend/copy_model.py); served through vLLM it is the
logits processor of quickcode/backend/vllm_logits.py (`copy_lambdas`), measured by `quickcode bench quality --arm`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from quickcode.backend.copy_model import copy_distribution, mix_logits
from quickcode.benchmarks.report import Report, md_table

REPO = Path(__file__).resolve().parents[2]


LAMBDAS = ["0.1,0.2,0.3,0.4", "0.2,0.4,0.6,0.7", "0.5,0.7,0.8,0.9"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, default=REPO / "models" / "target")
    p.add_argument("--data", type=Path, default=None, help="the model's prepared data (held-out FIM cases)")
    p.add_argument("--humaneval", type=int, default=200, help="seeded subset of the 1,033 tasks (0: all)")
    p.add_argument("--fim", type=int, default=200, help="held-out FIM cases")
    p.add_argument("--lam", action="append", default=None,
                   help=f"λ for matches of length 1,2,3,4 (comma-separated; repeatable; default: {' and '.join(LAMBDAS)})")
    p.add_argument("--max-n", type=int, default=4)
    p.add_argument("--prompt-tokens", type=int, default=960, help="the served prompt budget")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)


@torch.no_grad()
def first_line(model, prompt: list[int], lam, stop: frozenset[int], exclude: frozenset[int], max_n: int,
               max_new: int = 24) -> list[int]:
    from transformers import DynamicCache

    cache = DynamicCache()
    logits = model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True).logits[0, -1]
    out: list[int] = []
    for _ in range(max_new):
        if lam is not None:        # the served logits processor's own functions (quickcode/backend/vllm_logits.py)
            logits = mix_logits(logits.float(), *copy_distribution(prompt + out, max_n, exclude), lam)
        nxt = int(logits.argmax())
        out.append(nxt)
        if nxt in stop:
            break
        logits = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True).logits[0, -1]
    return out


def run(args: argparse.Namespace) -> dict:
    from quickcode.benchmarks.quality import exact_line, load_problems, single_line_tasks, subset, wilson
    from quickcode.draft_model import evaluate as ev
    from quickcode.draft_model import tokenizer as tokmod

    report = Report("copy", "A copy model mixed into the target's distribution: exact first lines", out=args.out)
    torch.set_num_threads(args.threads)
    lams = [tuple(float(x) for x in s.split(",")) for s in (args.lam or LAMBDAS)]
    tok, model, names = tokmod.load(args.model), ev.load(args.model), ev.template_names(args.model)
    special = frozenset(tok.token_to_id(names[k]) for k in ("prefix_token", "suffix_token", "middle_token", "eot_token"))
    stop = special | {i for i in range(tok.get_vocab_size()) if "\n" in tok.decode([i], skip_special_tokens=False)}
    tasks = subset(single_line_tasks(load_problems()), args.humaneval, 0)
    sets = {"HumanEval single-line": ([{"prefix": t.prefix, "suffix": t.suffix} for t in tasks], [t.line for t in tasks])}
    if args.fim:
        fim = ev.fim_cases(args.model, args.data, args.fim, 0)
        sets["held-out FIM (first line of the middle)"] = (fim, [c["middle"].split("\n")[0] for c in fim])
    settings = [None, *lams]
    hits: dict[str, dict[str, list[bool]]] = {}
    lines: dict[str, dict[str, list[str]]] = {}
    for name, (cases, expected) in sets.items():
        prompts = ev.prompt_ids(args.model, cases, args.prompt_tokens, ev.serving_fim_policy())
        hits[name], lines[name] = {}, {}
        for lam in settings:
            label = "off" if lam is None else "λ " + ",".join(f"{x:g}" for x in lam)
            got, texts = [], []
            for pr, c, e in tqdm(list(zip(prompts, cases, expected)), desc=f"{name}, {label}", file=sys.stderr):
                text = ev.unheal(c["prefix"], tok.decode(first_line(model, pr, lam, stop, special, args.max_n),
                                                         skip_special_tokens=True))
                got.append(bool(e.strip()) and exact_line(text, e))
                texts.append(text.split("\n")[0].strip())
            hits[name][label], lines[name][label] = got, texts
    report.add(f"Model `{args.model.relative_to(REPO) if args.model.is_relative_to(REPO) else args.model}`; greedy, PyTorch, {args.threads} thread(s); prompts as the backend builds them "
               f"({args.prompt_tokens}-token budget); copy model: longest earlier n-gram, n ≤ {args.max_n}. "
               "Wins / losses: cases only this setting / only plain decoding got right.")
    rows, headline = [], {"model": str(args.model)}
    for name, by in hits.items():
        base = by["off"]
        for label, got in by.items():
            k, lo_hi = sum(got), wilson(sum(got), len(got))
            wins = sum(g and not b for g, b in zip(got, base))
            losses = sum(b and not g for g, b in zip(got, base))
            changed = sum(a != b for a, b in zip(lines[name][label], lines[name]["off"]))
            rows.append([name, label, f"{k}/{len(got)} = {100 * k / len(got):.1f} %",
                         f"[{100 * lo_hi[0]:.1f}, {100 * lo_hi[1]:.1f}]",
                         "" if label == "off" else f"{changed}", "" if label == "off" else f"{wins} / {losses}"])
            headline[f"{name.split(' ')[0]}.{label}"] = k
    report.add(md_table(["cases", "decoding", "exact", "95 % interval", "lines changed vs off", "wins / losses vs off"],
                        rows))
    return report.finish(headline)
