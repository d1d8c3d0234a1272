"""`quickcode bench invoke`: what a developer gets who asks for a suggestion (the editor's trigger-suggestion
key: an inline completion with triggerKind Invoked), arm by arm, through the real language server and backend.

At places of held-out files (standard-library modules the models never trained on) where someone writing the
file would stop and ask — a code line's start after its indentation, or inside it after an opener, `=`, `.`, a
comma or a keyword's space — the document holds the file up to the cursor (as in `bench typing`), the language
server has had it open for a moment (its warm-up prefill done), and the editor invokes once. Each arm is a
language server with its own settings over the client's defaults:
  default     the client's defaults (by the word unit: the next word, ~2 tokens, streamed)
  line        the greedy line, shown whole (what a simple plugin shows: `suggestionUnit` block, one line)
  best_of_5   `explicitBestOf` 5: the best of the greedy line and 4 sampled ones by the code around them
              (quickcode/backend/best_of.py), sent whole
Figures per arm, over the same places (arms asked in turn at every place, rotated): the answer equals the rest
of the line (exact line); the characters a developer would take (Tab-only: all of it or nothing; word by word:
its right words, quickcode/benchmarks/accept_rule.py); wrong suggestions shown; invoke → answer latency p50 /
p95. Intervals: 90 %, resampling places with replacement (paired across arms).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import tokenize
from pathlib import Path

from quickcode.benchmarks.accept_rule import accepted_len
from quickcode.benchmarks.report import Report, md_table, paired_bootstrap, percentile, source_digest
from quickcode.benchmarks.typing_cost import string_spans

REPO = Path(__file__).resolve().parents[2]
LINE = {"suggestion_unit": "block", "multiline_max_lines": 1}
ARMS = {"default": {}, "line": LINE, "best_of_5": {"explicit_best_of": 5}}
_OPENERS = ("(", "[", "{", "= ", ".", ", ", "return ", "in ", "if ", "not ", "and ", "or ")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend (ws://.../v1/ws); default: start one")
    p.add_argument("--files", nargs="*", default=None, help="source files (default: bench typing's held-out modules)")
    p.add_argument("--places", type=int, default=120, help="places asked at (each by every arm)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default=",".join(ARMS), help=f"arms, of: {', '.join(ARMS)}")
    p.add_argument("--settle-ms", type=float, default=400.0,
                   help="after opening the document, wait this long before invoking (the warm-up's prefill)")
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


# ── pure parts: where to ask, and what an answer is worth
def places(text: str, n: int, seed: int, min_rest_chars: int = 4) -> list[int]:
    """Up to `n` cursor offsets into `text`: code lines (not blank, not comments, not in a string literal, not
    among the file's first 30 lines) at their start after the indentation, or just after an opener inside them, with at least
    `min_rest_chars` of the line still to come. Half of each kind where there are enough; chosen by `seed`."""
    starts, inside = [], []
    offset = 0
    lines = text.splitlines(keepends=True)
    for k, line in enumerate(lines):
        body = line.rstrip("\n")
        code = body.lstrip(" \t")
        indent = len(body) - len(code)
        if k >= 30 and code and not code.startswith(("#", '"', "'")):
            if len(code) >= min_rest_chars:
                starts.append(offset + indent)
            ends = [j + len(op) for op in _OPENERS if (j := body.find(op, indent + 1)) > 0]
            if ends and len(body) - min(ends) >= min_rest_chars:
                inside.append(offset + min(ends))
        offset += len(line)
    try:
        spans = string_spans(text, 0)
    except (tokenize.TokenError, SyntaxError):      # not Python, or not whole: no string is known
        spans = []
    in_string = lambda o: any(a < o < b for a, b in spans)
    starts, inside = [o for o in starts if not in_string(o)], [o for o in inside if not in_string(o)]
    rng = random.Random(seed)
    rng.shuffle(starts)
    rng.shuffle(inside)
    half = n // 2
    picked = starts[:max(half, n - len(inside))] + inside[:max(n - half, n - len(starts))]
    return sorted(picked[:n])


def score(shown: str, rest: str) -> dict:
    """One answer against `rest` (the file after the cursor): exact line (its first line is the rest of the
    cursor's line, trailing whitespace aside, and not empty), characters the Tab-only and the word-by-word
    developer take, and whether what was shown is wrong from its first word."""
    line = rest.split("\n", 1)[0]
    first = shown.split("\n", 1)[0]
    whole = accepted_len(shown, rest, "whole") if shown else 0
    word = accepted_len(shown, rest, "word") if shown else 0
    return {"shown": bool(shown), "exact": bool(line.strip()) and first.rstrip() == line.rstrip(),
            "whole_chars": whole, "word_chars": word, "wrong": bool(shown) and word == 0}


def summarize(scores: list[dict], latencies_ms: list[float]) -> dict:
    n = max(1, len(scores))
    return {"places": len(scores), "exact": sum(s["exact"] for s in scores),
            "exact_share": sum(s["exact"] for s in scores) / n,
            "whole_chars": sum(s["whole_chars"] for s in scores), "word_chars": sum(s["word_chars"] for s in scores),
            "shown_share": sum(s["shown"] for s in scores) / n, "wrong_share": sum(s["wrong"] for s in scores) / n,
            "p50_ms": percentile(latencies_ms, 50), "p95_ms": percentile(latencies_ms, 95)}


INTERVAL_KEYS = ("exact_share", "whole_chars", "word_chars", "wrong_share", "p50_ms", "p95_ms")


def intervals(by_arm: dict[str, list[dict]], draws: int = 2000, seed: int = 0, level: float = 0.90) -> dict:
    """{"arm.key": [lo, hi], "arm/other.key": [lo, hi] (ratio of sums, or difference of shares and ms)} by
    resampling places with replacement, the same places for every arm. Rows: {"score": …, "ms": …}."""
    arms = list(by_arm)

    def measure(idx: list[int]) -> dict[str, float]:
        s = {a: summarize([by_arm[a][i]["score"] for i in idx],
                          [by_arm[a][i]["ms"] for i in idx if by_arm[a][i]["ms"] is not None]) for a in arms}
        out = {f"{a}.{k}": s[a][k] for a in arms for k in INTERVAL_KEYS}
        for a in arms:
            for b in (b for b in arms if b != a):
                for k in INTERVAL_KEYS:
                    x, y = s[a][k], s[b][k]
                    out[f"{a}/{b}.{k}"] = (x / y if y else float("nan")) if k.endswith("_chars") else x - y
        return out

    return paired_bootstrap(len(by_arm[arms[0]]), measure, draws, seed, level)


# ── the run
async def _ask(ed, uri: str, before: str, settle_s: float) -> tuple[str, float | None]:
    """Open `before` as a document, let the language server warm it up, invoke once: (text, ms)."""
    from lsprotocol import types as T

    ed.open(uri, before)
    await asyncio.sleep(settle_s)
    t0 = time.perf_counter()
    _, fut = ed.ask(invoked=True)
    try:
        result = await asyncio.wait_for(fut, 10)
    except Exception:  # a timeout or an error response: nothing shown (the report counts it as empty)
        result = None
    ms = (time.perf_counter() - t0) * 1000 if result is not None else None
    ed.client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri=uri)))
    items = result.items if isinstance(result, T.InlineCompletionList) else (result or [])
    if not (items and items[0].insert_text):
        return "", ms
    it = items[0].insert_text
    return (it if isinstance(it, str) else it.value), ms


async def _run_arms(url: str, arms: list[str], todo: list[tuple[Path, str, str]], settle_s: float) -> dict:
    from quickcode.benchmarks.editor_sim import SimEditor, lsp_command

    eds = {}
    for a in arms:
        ed = SimEditor(lsp_command(), style="vscode",
                       init_options={"endpoints": [url], "state_dir": tempfile.mkdtemp(prefix=f"qc-invoke-{a}-"),
                                     **ARMS[a]})
        await ed.start()
        eds[a] = ed
    for ed in eds.values():
        for _ in range(200):
            if (await ed.command("quickcode.status")).get("connected"):
                break
            await asyncio.sleep(0.05)
    rows: dict[str, list[dict]] = {a: [] for a in arms}
    try:
        for i, (path, before, rest) in enumerate(todo):
            for a in arms[i % len(arms):] + arms[: i % len(arms)]:     # rotated: noise hits every arm
                uri = (Path(tempfile.gettempdir()) / f"qc-invoke-{a}-{i}-{path.name}").as_uri()
                text, ms = await _ask(eds[a], uri, before, settle_s)
                rows[a].append({"place": i, "file": path.name, "text": text, "ms": ms, "score": score(text, rest),
                                "rest": rest.split("\n", 1)[0]})
            if (i + 1) % 10 == 0 or i + 1 == len(todo):
                print(f"[invoke] {i + 1}/{len(todo)} places", file=sys.stderr, flush=True)
    finally:
        for ed in eds.values():
            await ed.stop()
    return rows


def run(args: argparse.Namespace) -> dict:
    from quickcode.backend.launch import start_backend, stop_backend
    from quickcode.benchmarks.typing import held_out_files

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not arms or not set(arms) <= set(ARMS):
        raise SystemExit(f"--arms: any of {', '.join(ARMS)} (got {args.arms!r})")
    files = held_out_files(args)
    per_file = -(-args.places // len(files))
    todo = []
    for k, f in enumerate(files):
        text = f.read_text()
        todo += [(f, text[:o], text[o:]) for o in places(text, per_file, args.seed + k)]
    todo = todo[:args.places]
    t_start = time.time()
    backend, url = None, args.url
    if url is None:
        backend = start_backend(Path("artifacts/logs/bench-invoke-backend.log").resolve())
        url = backend.ws_url
    try:
        rows = asyncio.run(_run_arms(url, arms, todo, args.settle_ms / 1000))
    finally:
        if backend is not None:
            stop_backend(backend, 60)
    return _report(args, arms, rows, files, t_start)


def _report(args, arms: list[str], rows: dict[str, list[dict]], files: list[Path], t_start: float) -> dict:
    summ = {a: summarize([r["score"] for r in rows[a]], [r["ms"] for r in rows[a] if r["ms"] is not None])
            for a in arms}
    ci = intervals(rows)
    f = lambda v, c, fmt: f"{fmt.format(v)} [{fmt.format(c[0])}, {fmt.format(c[1])}]"
    n = len(rows[arms[0]])
    code = source_digest([*(REPO / "quickcode" / "lsp_client").glob("*.py"), Path(__file__)])
    rep = Report("invoke", "Invoked suggestions: what a developer gets who asks", out=args.out)
    rep.started = t_start
    rep.add(f"{n} places in {', '.join(sorted({p.name for p in files}))} (held out of the models' training; seed "
            f"{args.seed}): code lines at their start after the indentation and just after an opener inside them. "
            f"The document holds the file up to the cursor, open {args.settle_ms:.0f} ms before one invoked "
            f"inline completion (triggerKind Invoked); client code `{code}`. Arms (settings over the client's "
            "defaults): " + "; ".join(f"**{a}** `{json.dumps(ARMS[a])}`" for a in arms)
            + ". Intervals: 90 %, resampling places (2,000 draws), paired across arms.")
    table = [
        ["exact line", *(f(summ[a]["exact_share"], ci[f"{a}.exact_share"], "{:.1%}") + f" ({summ[a]['exact']})"
                         for a in arms)],
        ["characters taken, Tab only", *(f(summ[a]["whole_chars"], ci[f"{a}.whole_chars"], "{:.0f}") for a in arms)],
        ["characters taken, word by word", *(f(summ[a]["word_chars"], ci[f"{a}.word_chars"], "{:.0f}") for a in arms)],
        ["something shown", *(f"{summ[a]['shown_share']:.0%}" for a in arms)],
        ["shown and wrong from its first word", *(f(summ[a]["wrong_share"], ci[f"{a}.wrong_share"], "{:.1%}")
                                                      for a in arms)],
        ["invoke → answer p50 ms", *(f(summ[a]["p50_ms"], ci[f"{a}.p50_ms"], "{:.0f}") for a in arms)],
        ["invoke → answer p95 ms", *(f(summ[a]["p95_ms"], ci[f"{a}.p95_ms"], "{:.0f}") for a in arms)],
    ]
    rep.add("## Per arm\n\n" + md_table(["figure", *arms], table))
    pairs = [(a, b) for a in arms for b in arms if a != b and arms.index(a) > arms.index(b)]
    contrast = []
    for a, b in pairs:
        contrast.append([f"{a} vs {b}",
                         f(summ[a]["exact_share"] - summ[b]["exact_share"], ci[f"{a}/{b}.exact_share"], "{:+.1%}"),
                         *(f(summ[a][k] / summ[b][k] if summ[b][k] else float("nan"), ci[f"{a}/{b}.{k}"], "{:.2f}×")
                           for k in ("whole_chars", "word_chars")),
                         f(summ[a]["p50_ms"] - summ[b]["p50_ms"], ci[f"{a}/{b}.p50_ms"], "{:+.0f}"),
                         f(summ[a]["p95_ms"] - summ[b]["p95_ms"], ci[f"{a}/{b}.p95_ms"], "{:+.0f}")])
    rep.add("## Arm against arm (same places)\n\n" + md_table(
        ["arms", "Δ exact line", "Tab-only characters ×", "word-by-word characters ×", "Δ p50 ms", "Δ p95 ms"],
        contrast))
    ex = [[r["file"], f"`{r['rest']}`", *(f"`{rows[a][i]['text'].split(chr(10))[0]}`"
                                          + (" ✓" if rows[a][i]["score"]["exact"] else "") for a in arms)]
          for i, r in enumerate(rows[arms[0]][:12])]
    rep.add("## The first 12 places\n\n" + md_table(["file", "rest of the line", *arms], ex))
    headline = {"places": n, "client_code": code,
                **{a: {k: round(v, 3) for k, v in summ[a].items() if k != "places"} for a in arms}}
    return rep.finish(headline)
