"""`quickcode bench nes`: next-edit suggestions on real edit sequences, against plain inline completion.

The sequences are the held-out ones of `quickcode model edits` (quickcode/draft_model/edit_pairs.py: blocks the
authors of packages no model here trained on changed between two releases, nearby blocks of one file in file
order). For each, a simulated developer in a simulated editor (quickcode/benchmarks/editor_sim.py) opens the
document as it was before the sequence and types its first edit through the real language server (`quickcode
lsp`, over LSP) and the real backend: the old text of the change selected and deleted (one key), then the new
text key by key with human timing (Enter auto-indents); then pauses with the cursor where the typing ended, and
the editor asks once, at the pause:
  nes     `textDocument/copilotInlineEdit` (the next edit, anywhere in the lines around the cursor), with the
          client's defaults and `next_edit` on
  inline  `textDocument/inlineCompletion` with next edits off: plain inline completion at the cursor, shown
          whole (`suggestion_unit` block, no patience: the most one inline suggestion supplies)
Both arms type the same edits with the same key timing, rotated per sequence; each arm is its own language
server, each sequence its own document.

The rule (the same for both arms, `score`): the real next edit and the suggestion are each made the smallest
replacement of the document after the first edit (common head, then common tail). The suggestion is exact when
making it gives exactly the document after the real next edit. The characters it supplies are the characters of
the real next edit's inserted text it gets right: all of them when exact; else, when it starts where the real
edit starts and replaces no more of the old text, the right leading words of its text (the word developer's
rule, quickcode/benchmarks/accept_rule.py: accept-next-word while the words are right); else none. A suggestion
elsewhere supplies nothing; a next edit that only deletes has no characters to supply (it counts in the exact
rate). Figures: exact next-edit rate, share of the real next edits' inserted characters supplied (90 % intervals
by resampling sequences, paired across arms), nes / inline, and the latency from the request to its answer.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

from quickcode.backend.edit_prompt import replacement
from quickcode.benchmarks.accept_rule import accepted_len
from quickcode.benchmarks.report import Report, md_table, paired_bootstrap, percentile
from quickcode.draft_model.edit_pairs import after_edits, read
from quickcode.lsp_client.config import ClientConfig
from quickcode.protocol.edit_window import region_around

ARMS = ("nes", "inline")
ARM_SETTINGS = {"nes": {"next_edit": True},
                "inline": {"next_edit": False, "suggestion_unit": "block", "block_patience_ms": 0,
                           "line_patience_ms": 0}}
CLIENT_DEADLINE_MS = ClientConfig().deadline_ms      # the client's default deadline


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path("runs/edits"),
                   help="the output of `quickcode model edits` (its heldout.jsonl is replayed)")
    p.add_argument("--url", default=None, help="a running backend (ws://.../v1/ws); default: start one")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the backend it starts (repeatable), e.g. profile=default")
    p.add_argument("--sequences", type=int, default=30, help="held-out edit sequences replayed (each by both arms)")
    p.add_argument("--speed", type=float, default=3.0, help="typing speed multiple (1 ≈ 55 words per minute)")
    p.add_argument("--deadline-ms", type=float, default=15_000.0,
                   help="the clients' deadline for an answer (both arms; the share within the client's default "
                        "is reported beside it)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", type=Path, default=None, help="also write each replay as a JSON line here")
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


def _portable(setting: str) -> str:
    """A KEY=VALUE setting as a reader elsewhere can use it: a path inside the checkout made relative to it."""
    key, _, value = setting.partition("=")
    path = Path(value)
    root = Path(__file__).resolve().parents[2]
    return f"{key}={path.relative_to(root)}" if path.is_absolute() and path.is_relative_to(root) else setting


# ── the rule ──────────────────────────────────────────────────────────────────────────────────────────────────
def score(before: str, after: str, suggestion: tuple[int, int, str] | None) -> dict:
    """The suggestion (start, end, text) of `before` against the real next edit (`before` → `after`):
    {exact, supplied, target_chars} by the rule of this module's docstring."""
    target = replacement(before, after)
    target_chars = len(target[2]) if target else 0
    out = {"exact": False, "supplied": 0, "target_chars": target_chars}
    if suggestion is None or target is None:
        return out
    s0, s1, text = suggestion
    if not 0 <= s0 <= s1 <= len(before):
        return out
    made = before[:s0] + text + before[s1:]
    if made == after:
        return {**out, "exact": True, "supplied": target_chars}
    mine = replacement(before, made)
    if mine is not None and mine[0] == target[0] and mine[1] <= target[1]:
        out["supplied"] = accepted_len(mine[2], target[2], "word")
    return out


def typed_change(before: str, after: str) -> tuple[int, int, str]:
    """The first edit as the developer makes it: the smallest replacement (select, delete, type)."""
    change = replacement(before, after)
    if change is None:
        raise ValueError("the first edit changes nothing")
    return change


def keys_of(text: str) -> list[str]:
    """The keys that type `text`: one a character; Enter with the next line's indentation (auto-indent)."""
    keys, i = [], 0
    while i < len(text):
        if text[i] == "\n":
            j = i + 1
            while j < len(text) and text[j] in " \t":
                j += 1
            keys.append(text[i:j])
            i = j
        else:
            keys.append(text[i])
            i += 1
    return keys


def pick(records: list[dict], n: int, seed: int) -> list[dict]:
    """`n` sequences, taken in turn from each package (shuffled by `seed` within a package)."""
    by_pkg: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: r["id"]):
        by_pkg.setdefault(r["package"], []).append(r)
    rng = random.Random(seed)
    for rs in by_pkg.values():
        rng.shuffle(rs)
    out, k = [], 0
    while len(out) < n and any(k < len(rs) for rs in by_pkg.values()):
        out += [rs[k] for _, rs in sorted(by_pkg.items()) if k < len(rs)]
        k += 1
    return out[:n]


# ── one replay ────────────────────────────────────────────────────────────────────────────────────────────────
async def _replay(ed, arm: str, rec: dict, i: int, seed: int, speed: float) -> dict:
    from quickcode.benchmarks.editor_sim import TypingModel

    d0, d1, d2 = rec["text"], after_edits(rec, 1), after_edits(rec, 2)
    start, end, typed = typed_change(d0, d1)
    ed.open(f"file:///quickcode-nes/{i}/{rec['path']}", d0)
    await asyncio.sleep(0.3)                           # the editor is open before the developer types
    model, prev = TypingModel(speed=speed), "x"
    if end > start:
        ed.replace(start, end, "")                     # the old text selected and deleted
    at = start
    for k, key in enumerate(keys_of(typed)):
        await asyncio.sleep(model.gap_ms(random.Random(f"{seed}:{i}:{k}"), prev) / 1000)
        ed.replace(at, at, key)
        at += len(key)
        prev = key[0]
    assert ed.text == d1, "the typed first edit is not the record's"
    t0 = time.perf_counter()
    suggestion = None
    if arm == "nes":
        res = await ed.inline_edit(at)
        latency_ms = (time.perf_counter() - t0) * 1000
        edits = (res or {}).get("edits") or []
        if edits:
            r = edits[0]["range"]
            suggestion = (ed.offset(r["start"]["line"], r["start"]["character"]),
                          ed.offset(r["end"]["line"], r["end"]["character"]), edits[0]["text"])
    else:
        _, fut = ed.ask(at=at)
        result = await fut
        latency_ms = (time.perf_counter() - t0) * 1000
        items = getattr(result, "items", None) if result is not None and not isinstance(result, list) else result
        if items and items[0].insert_text:
            item = items[0]
            text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
            s = e = at
            if item.range is not None:
                s = ed.offset(item.range.start.line, item.range.start.character)
                e = ed.offset(item.range.end.line, item.range.end.character)
            suggestion = (s, e, text)
    ed.close()
    cfg = ClientConfig()
    region = region_around(d1, at, cfg.next_edit_lines, cfg.next_edit_region_chars)
    target = replacement(d1, d2)
    return {"id": rec["id"], "package": rec["package"], "path": rec["path"], "arm": arm, "sequence": i,
            **score(d1, d2, suggestion), "answered": suggestion is not None, "latency_ms": round(latency_ms, 1),
            "reachable": bool(region and target and region.start <= target[0] and target[1] <= region.end),
            "typed_keys": len(keys_of(typed)) + (end > start),
            "suggestion": None if suggestion is None else {"start": suggestion[0], "end": suggestion[1],
                                                           "text": suggestion[2][:400]}}


async def _run_all(url: str, recs: list[dict], args) -> tuple[list[dict], dict]:
    """(the replays, what the nes arm's language server counted: the model served, next-edit outcomes)."""
    from quickcode.benchmarks.editor_sim import SimEditor, lsp_command

    eds = {}
    for arm in ARMS:
        init = {"endpoints": [url], "state_dir": tempfile.mkdtemp(prefix=f"qc-nes-{arm}-"),
                "deadline_ms": args.deadline_ms, **ARM_SETTINGS[arm]}
        eds[arm] = SimEditor(lsp_command(), style="neovim-pause", init_options=init, seed=args.seed)
        await eds[arm].start()
    try:
        status = {}
        for ed in eds.values():
            for _ in range(400):
                if (status := await ed.command("quickcode.status")).get("connected"):
                    break
                await asyncio.sleep(0.05)
        rows = []
        for i, rec in enumerate(recs):
            order = ARMS[i % 2:] + ARMS[:i % 2]
            got = {}
            for arm in order:
                got[arm] = await _replay(eds[arm], arm, rec, i, args.seed, args.speed)
                rows.append(got[arm])
                if args.rows is not None:
                    with open(args.rows, "a") as f:
                        f.write(json.dumps(got[arm]) + "\n")
            n, m = got["nes"], got["inline"]
            print(f"[nes] {i + 1}/{len(recs)} {rec['id']}: nes {'exact' if n['exact'] else 'no'} "
                  f"{n['supplied']}/{n['target_chars']} chars {n['latency_ms']:.0f} ms; inline "
                  f"{m['supplied']}/{m['target_chars']} chars {m['latency_ms']:.0f} ms", file=sys.stderr, flush=True)
        stats = await eds["nes"].command("quickcode.stats")
        return rows, {"model": status.get("model", ""), "next_edits": dict(stats.get("next_edits") or {})}
    finally:
        for ed in eds.values():
            await ed.stop()


# ── figures ───────────────────────────────────────────────────────────────────────────────────────────────────
def figures(rows: list[dict]) -> dict:
    """Per arm: exact rate, share of characters supplied, latency; the ratio nes / inline; 90 % intervals."""
    by = {a: sorted((r for r in rows if r["arm"] == a), key=lambda r: r["sequence"]) for a in ARMS}
    n = len(by["nes"])

    def measure(idx: list[int]) -> dict:
        out = {}
        for a in ARMS:
            rs = [by[a][i] for i in idx]
            chars = sum(r["target_chars"] for r in rs)
            out[f"{a}.exact_rate"] = sum(r["exact"] for r in rs) / len(rs)
            out[f"{a}.supplied_share"] = sum(r["supplied"] for r in rs) / chars if chars else math.nan
        sup = {a: sum(by[a][i]["supplied"] for i in idx) for a in ARMS}
        out["supplied_ratio"] = sup["nes"] / sup["inline"] if sup["inline"] else math.nan
        return out

    point = measure(list(range(n)))
    ci = paired_bootstrap(n, measure) if n > 1 else {}
    arms = {}
    for a in ARMS:
        lat = [r["latency_ms"] for r in by[a]]
        arms[a] = {"exact": sum(r["exact"] for r in by[a]), "supplied_chars": sum(r["supplied"] for r in by[a]),
                   "exact_rate": point[f"{a}.exact_rate"], "supplied_share": point[f"{a}.supplied_share"],
                   "answered_share": sum(r["answered"] for r in by[a]) / n,
                   "within_client_deadline_share": sum(x <= CLIENT_DEADLINE_MS for x in lat) / n,
                   "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95)}
    return {"sequences": n, "packages": sorted({r["package"] for r in by["nes"]}),
            "target_chars": sum(r["target_chars"] for r in by["nes"]),
            "reachable_share": sum(r["reachable"] for r in by["nes"]) / n, "arms": arms,
            "supplied_ratio": point["supplied_ratio"], "ci": ci}


def _rnd(x, k=3):
    return None if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else round(x, k)


def _fmt(x, ci=None, f="{:.1%}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if not ci or any(isinstance(c, float) and math.isnan(c) for c in ci):
        return f.format(x)
    return f"{f.format(x)} [{f.format(ci[0])}, {f.format(ci[1])}]"


def report(rows: list[dict], args, started_s: float, served: dict | None = None) -> dict:
    fig = figures(rows)
    served = served or {}
    ci, arms = fig["ci"], fig["arms"]
    rep = Report("nes", "Next-edit suggestions vs plain inline completion, on real edit sequences",
                 out=getattr(args, "out", None))
    rep.started = started_s
    rep.add(f"{fig['sequences']} held-out edit sequences of {len(fig['packages'])} packages "
            f"({', '.join(fig['packages'])}; `quickcode model edits`, whole packages held out), each replayed by "
            f"both arms: the first edit typed through the real language server (typing speed ×{args.speed}, "
            f"seed {args.seed}), then one request at the pause. Client deadline {args.deadline_ms:.0f} ms in both "
            "arms. The real next edits' inserted characters: "
            f"{fig['target_chars']}; next edits inside the lines around the cursor a next edit may change "
            f"({ClientConfig().next_edit_lines} above and below): {fig['reachable_share']:.0%}. Intervals: 90 %, "
            "resampling sequences with replacement (2,000 draws), paired across arms."
            + (f" Model served: `{served['model']}`." if served.get("model") else "")
            + (f" Backend settings: {', '.join(f'`{_portable(x)}`' for x in args.sets)}."
               if getattr(args, "sets", None)
               else (" Backend: the one at the given --url." if getattr(args, "url", None) else
                     " Backend: its defaults."))
            + (" The nes arm's language server's next-edit outcomes (asked; answered, none, stale, typed away, "
               "late, failed, unavailable): " + ", ".join(f"{k} {v}" for k, v in served["next_edits"].items()) + "."
               if served.get("next_edits") else ""))
    rep.add("**The rule, the same for both arms.** The real next edit and the suggestion are each made the "
            "smallest replacement of the document after the first edit (common head, then common tail). The "
            "suggestion is exact when making it gives exactly the document after the real next edit. The characters "
            "it supplies are the characters of the real next edit's inserted text it gets right: all of them when "
            "exact; else, when it starts where the real edit starts and replaces no more of the old text, the right "
            "leading words of its text (accept-next-word while the words are right); else none. A next edit that "
            "only deletes has no characters to supply (it counts in the exact rate).")
    rows_md = [
        ["exact next edit", *(_fmt(arms[a]["exact_rate"], ci.get(f"{a}.exact_rate")) + f" ({arms[a]['exact']})"
                              for a in ARMS)],
        ["share of the next edits' inserted characters supplied",
         *(_fmt(arms[a]["supplied_share"], ci.get(f"{a}.supplied_share")) + f" ({arms[a]['supplied_chars']})"
           for a in ARMS)],
        ["requests answered with a suggestion", *(f"{arms[a]['answered_share']:.0%}" for a in ARMS)],
        [f"answers within the client's default deadline ({CLIENT_DEADLINE_MS:.0f} ms)",
         *(f"{arms[a]['within_client_deadline_share']:.0%}" for a in ARMS)],
        ["request → answer p50 ms", *(_fmt(arms[a]["p50_ms"], None, "{:.0f}") for a in ARMS)],
        ["request → answer p95 ms", *(_fmt(arms[a]["p95_ms"], None, "{:.0f}") for a in ARMS)],
    ]
    rep.add("## Headline\n\n" + md_table(["figure", *ARMS], rows_md)
            + f"\n\nCharacters supplied, nes / inline: {_fmt(fig['supplied_ratio'], ci.get('supplied_ratio'), '{:.2f}×')}.")
    ratio, p95 = fig["supplied_ratio"], arms["nes"]["p95_ms"]
    targets = {"supplied_ge_1_5x_inline": not math.isnan(ratio) and ratio >= 1.5, "p95_le_300ms": p95 <= 300}
    rep.add("## Targets (issue 50)\n\n" + md_table(["target", "measured", "met"], [
        ["next edits supply ≥ 1.5× the characters inline completion supplies",
         _fmt(ratio, ci.get("supplied_ratio"), "{:.2f}×"), "yes" if targets["supplied_ge_1_5x_inline"] else "no"],
        ["next-edit latency p95 ≤ 300 ms", f"{p95:.0f} ms", "yes" if targets["p95_le_300ms"] else "no"]]))
    by = {a: {r["sequence"]: r for r in rows if r["arm"] == a} for a in ARMS}
    rep.add("## Sequence by sequence\n\n" + md_table(
        ["#", "sequence", "next edit chars", "reachable", "nes: exact, supplied, ms", "inline: supplied, ms"],
        [[i + 1, f"`{by['nes'][i]['id']}`", by["nes"][i]["target_chars"], "yes" if by["nes"][i]["reachable"] else "no",
          f"{'yes' if by['nes'][i]['exact'] else 'no'}, {by['nes'][i]['supplied']}, {by['nes'][i]['latency_ms']:.0f}",
          f"{by['inline'][i]['supplied']}, {by['inline'][i]['latency_ms']:.0f}"] for i in sorted(by["nes"])]))
    headline = {"sequences": fig["sequences"], "packages": len(fig["packages"]), "model": served.get("model", ""),
                "next_edit_outcomes": served.get("next_edits", {}), "target_chars": fig["target_chars"],
                "reachable_share": _rnd(fig["reachable_share"]),
                **{a: {k: _rnd(v, 3 if "share" in k or "rate" in k else 1) for k, v in arms[a].items()} for a in ARMS},
                "supplied_ratio_nes_vs_inline": _rnd(ratio),
                "intervals_90": {k: [_rnd(v[0]), _rnd(v[1])] for k, v in ci.items()}, "targets_met": targets}
    return rep.finish(headline)


def run(args: argparse.Namespace) -> dict:
    from quickcode.backend.launch import start_backend, stop_backend

    path = Path(args.data) / "heldout.jsonl"
    if not path.exists():
        raise SystemExit(f"{path}: no held-out edit sequences; build them with `quickcode model edits --data "
                         f"{args.data}`")
    recs = pick(read(args.data, "heldout"), args.sequences, args.seed)
    if not recs:
        raise SystemExit(f"{path} holds no sequences")
    started_s = time.time()
    backend, url = None, args.url
    if url is None:
        print("[nes] starting the backend", file=sys.stderr, flush=True)
        backend = start_backend(Path("artifacts/logs/bench-nes-backend.log").resolve(), *getattr(args, "sets", ()))
        url = backend.ws_url
    try:
        rows, served = asyncio.run(_run_all(url, recs, args))
    finally:
        if backend is not None:
            stop_backend(backend, 60)
    return report(rows, args, started_s, served)
