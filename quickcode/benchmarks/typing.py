"""`quickcode bench typing`: what the language server's intelligence is worth to a user, on real typing.

A simulated developer (quickcode/benchmarks/editor_sim.py) types real source files the models never trained on
(held-out standard-library modules) keystroke by keystroke, with human timing (bursts, pauses, typos,
accepting right suggestions), through the real language server and the real backend, the way VS Code asks
(every keystroke, cancelling the previous request). Three language-server configurations type the same
segments with the same seeds in one run, rotated so the machine's noise hits all of them; the developer meets
the same pauses at the same places in every arm (editor_sim draws them per position):
  ours    adaptive debounce + learnt pauses, cache, in-flight reuse, cancellation, prefetch, warm-ups, the
          suggestion shown word by word (the client's defaults)
  naive   fixed 75 ms debounce, no cache, no reuse, no cancellation of stale requests, nothing else (the line or
          block shown whole)
  honest  what a simple editor plugin does: fixed 75 ms debounce, cancels the previous request, no cache
          (= naive + cancel; a request whose text is final is stopped, as a stop sequence would)
Value first: accepted characters per 100 characters typed (ours / each baseline, 90 % interval by resampling
sessions), then the cost — backend requests, engine tokens (prefill + decode, warm-ups included, from the
backend's own counters) per accepted character, generated tokens never shown — and the latency from a pause
to ghost text. Every baseline-accepted suggestion ours did not accept is attributed to a cause
(quickcode/benchmarks/typing_figures.py). Sessions are kept one JSON line each (--rows), so a run can be
continued in a later hold of the machine with a larger --sessions: only sessions typed by the same client code
are pooled. The simulated developer is of one kind per session (--developer;
quickcode/benchmarks/accept_rule.py): `whole` takes a suggestion only whole, `word` also takes the right words
of a longer one with accept-next-word (VS Code's Ctrl+Right); `both` types every segment with each kind, and
the report sets the two side by side. Rows of different kinds are never pooled.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import sysconfig
from pathlib import Path

from quickcode.benchmarks import typing_figures as tf
from quickcode.benchmarks.report import Report, figure, md_table, source_digest
from quickcode.benchmarks.rows import append_row, read_rows

NAIVE = {"adaptive_debounce": False, "debounce_ms": 75.0, "cache": False, "inflight_reuse": False,
         "cancel_stale": False, "prefetch": False, "predictor": False, "warmup": False, "suggestion_unit": "block",
         "doc_words_min_chars": 0, "skip_word_chars": 0}     # (what a simple plugin does: ask the model each time)
HONEST = {**NAIVE, "cancel_stale": True}
BASELINE = NAIVE                       # the name earlier versions (and quickcode/benchmarks/quality.py's notes) used
ARMS = {"ours": {}, "naive": NAIVE, "honest": HONEST, "no_predictor": {"predictor": False}}
DEFAULT_FILES = ["textwrap.py", "shlex.py", "plistlib.py", "webbrowser.py", "codecs.py", "pdb.py", "types.py"]
REPO = Path(__file__).resolve().parents[2]


def add_segment_arguments(p: argparse.ArgumentParser) -> None:
    """The backend and what is typed: shared by the typing benchmarks (this one, quickcode/benchmarks/neovim_typing.py)."""
    p.add_argument("--url", default=None, help="a running backend (ws://.../v1/ws); default: start one")
    p.add_argument("--files", nargs="*", default=None, help="source files to type (default: held-out stdlib modules)")
    p.add_argument("--sessions", type=int, default=6, help="segments typed (each by every arm)")
    p.add_argument("--chars", type=int, default=350, help="characters typed per session")
    p.add_argument("--speed", type=float, default=1.0, help="typing speed multiple (1 ≈ 55 words per minute)")
    p.add_argument("--seed", type=int, default=0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_segment_arguments(p)
    p.add_argument("--arms", default="ours,naive,honest",
                   help="configurations: ours, naive, honest (the compared ones), no_predictor (ours without the "
                        "acceptance predictor)")
    p.add_argument("--arm", action="append", default=[], metavar="NAME=JSON", type=_named_json,
                   help="an extra arm: ours' client with these settings over its defaults, e.g. "
                        "'line={\"suggestion_unit\": \"line\"}' (name it in --arms too)")
    p.add_argument("--arm-backend", action="append", default=[], metavar="NAME=K=V,...", type=_named_sets,
                   help="the backend an arm types against, started beside the default one with these settings, "
                        "e.g. 'light=profile=light' (arms without one type against the default backend)")
    p.add_argument("--ours-settings", type=json.loads, default=None, metavar="JSON",
                   help="client settings over ours' defaults, e.g. an earlier client's defaults for a before/after "
                        "comparison: '{\"predictor\": true, \"hot_streak_lines\": 3}' (kept in the rows' key)")
    p.add_argument("--developer", choices=("whole", "word", "both"), default="whole",
                   help="the simulated developer: takes suggestions only whole (as before), also word by "
                        "word with accept-next-word, or both kinds (each types every segment; side by side)")
    p.add_argument("--rows", type=Path, default=None,
                   help="keep each session's record in this JSON-lines file and continue from it: sessions already "
                        "there (same client code, seed, size) are not typed again")
    p.add_argument("--budget-min", type=float, default=17.0,
                   help="stop starting new segments after this many minutes (a hold of the machine is < 20 min); "
                        "continue later with the same --rows")
    p.add_argument("--until", default=None,
                   help="HH:MM (UTC): start no new segment after this wall-clock time (a shared machine's deadline)")
    p.add_argument("--editor-style", default="vscode",
                   help="how the simulated editor asks (quickcode/benchmarks/editor_sim.py): 'vscode' on every key; "
                        "'vscode-1.100' 50 ms after the last key, as VS Code 1.100 does; 'neovim', 'neovim-pause'")
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


def _named_json(text: str) -> tuple[str, dict]:
    name, sep, body = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"NAME=JSON, got {text!r}")
    return name.strip(), json.loads(body)


def _named_sets(text: str) -> tuple[str, tuple[str, ...]]:
    name, sep, body = text.partition("=")
    sets = tuple(kv.strip() for kv in body.split(",") if kv.strip())
    if not sep or not name.strip() or not all("=" in kv for kv in sets):
        raise argparse.ArgumentTypeError(f"NAME=KEY=VALUE[,KEY=VALUE...], got {text!r}")
    return name.strip(), sets


def _served_tokenizer(sets: tuple[str, ...] = ()) -> Path:
    """The tokenizer.json of the model a backend with these `--set`s serves (read as it reads its settings)."""
    from quickcode.backend.settings import Settings

    return Settings(**dict(kv.split("=", 1) for kv in sets)).target_path / "tokenizer.json"


def held_out_files(args) -> list[Path]:
    """`--files`, else the standard-library modules held out of the models' training (DEFAULT_FILES)."""
    if getattr(args, "files", None):
        return [Path(f) for f in args.files]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [stdlib / f for f in DEFAULT_FILES if (stdlib / f).is_file()]


def _segments(files: list[Path], n: int, chars: int, seed: int) -> list[tuple[Path, str, str]]:
    """(file, text already there, text to type): segments that start at a line inside function bodies. The
    i-th segment does not depend on n (a run can be continued with a larger n)."""
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


def _engine_counters(http: str) -> dict:
    """The backend's own counters (Prometheus text at /metrics): requests, prompt tokens looked up in the
    prefix cache and found there, output tokens."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{http}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = {"quickcode_requests": "requests", "quickcode_output_tokens": "output_tokens",
            "quickcode_prefix_cache_queries_tokens": "prompt_tokens", "quickcode_prefix_cache_hits_tokens": "cached_tokens"}
    out = {v: 0.0 for v in want.values()}
    for fam in text_string_to_metric_families(text):
        if fam.name in want:
            out[want[fam.name]] += sum(s.value for s in fam.samples if s.name.endswith("_total"))
    return out


async def _session(url: str, cfg: dict, seg, seed: int, speed: float, state_dir: str,
                   developer: str = "whole", style: str = "vscode") -> dict:
    from quickcode.benchmarks.editor_sim import SimEditor, TypingModel, lsp_command

    path, before, target = seg
    http = "http" + url[2:].split("/v1/", 1)[0] if url.startswith("ws") else None
    init = {"endpoints": [url], "state_dir": state_dir, **cfg}   # the predictor learns across an arm's sessions
    ed = SimEditor(lsp_command(), style=style, init_options=init, seed=seed)
    e0 = _engine_counters(http) if http else None
    await ed.start()
    ed.open(path.resolve().as_uri(), before)
    for _ in range(200):
        st = await ed.command("quickcode.status")
        if st.get("connected"):
            break
        await asyncio.sleep(0.05)
    res = await ed.type_text(target, TypingModel(speed=speed, developer=developer))
    await asyncio.sleep(1.0)                 # let the last requests end, so their tokens are counted
    stats = await ed.command("quickcode.stats")
    await ed.stop()
    await asyncio.sleep(0.3)
    engine = None
    if e0 is not None:
        e1 = _engine_counters(http)
        engine = {k: round(e1[k] - e0[k]) for k in e1}
    g = (lambda k: stats.get(k, 0))
    return {"keystrokes": res.keystrokes, "shown": res.shown, "accepted": res.accepted,
            "accepted_chars": res.accepted_chars, "segment_chars": res.segment_chars, "target": target,
            "typed_as_is": res.final_text == before + target,      # the session wrote exactly the segment
            "pause_to_ghost_ms": res.pause_to_ghost_ms, "pauses": res.pauses,
            "asks": res.asks, "shows": res.shows, "accepts": res.accepts, "waits": res.waits, "engine": engine,
            "backend_requests": g("backend_requests"), "served_cache": g("served_cache"),
            "served_inflight": g("served_inflight"), "served_network": g("served_network"),
            "tokens_generated": g("tokens_generated"), "tokens_never_shown": g("tokens_never_shown"),
            "cancelled": g("cancelled"), "stopped_early": g("stopped_early"), "skipped": g("skipped_predictor"),
            "superseded_waits": g("superseded_waits"), "empty": g("empty"), "empty_from_cache": g("empty_from_cache"),
            "prefetches": g("prefetches"), "warmups": g("warmups"), "wasted_by": stats.get("wasted_by", {}),
            "decisions": stats.get("decisions", {}), "developer": developer,
            # what the language server counted of the accepts (partial accepts reach it as notifications)
            "server_accepted_chars": stats.get("accepted_chars", 0),
            "server_partial": (stats.get("outcomes") or {}).get("partial", 0)}


def _code_key() -> str:
    """What the pooled sessions must share: the language server's code (and the simulator's)."""
    sim = [REPO / "quickcode" / "benchmarks" / "editor_sim.py", REPO / "quickcode" / "benchmarks" / "accept_rule.py"]
    return source_digest([*(REPO / "quickcode" / "lsp_client").glob("*.py"), *sim])


def _setting_key(args) -> dict:
    """What else the pooled sessions must share when it is not the default: ours' settings over the defaults and
    the backend's QUICKCODE_* environment (e.g. QUICKCODE_MAX_MODEL_LEN, the prompt budget)."""
    import os

    key = {}
    if getattr(args, "ours_settings", None):
        key["ours_settings"] = args.ours_settings
    if getattr(args, "editor_style", "vscode") != "vscode":
        key["editor_style"] = args.editor_style
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("QUICKCODE_")}
    if env and getattr(args, "url", None) is None:
        key["backend_env"] = env
    return key


def _load_rows(path: Path | None, key: dict) -> dict[tuple[int, str, str], dict]:
    """The kept sessions that share `key`, by (segment, arm, developer kind: rows kept before there were
    kinds are the whole developer's)."""
    rows = {}
    if path is None or not path.exists():
        return rows
    for r in read_rows(path):
        if all(r.get(k) == v for k, v in key.items()):
            rows[(r["session"], r["arm"], r.get("developer", "whole"))] = r
    return rows


def _counter(path: Path):
    """Tokens of a text by the served model's tokenizer (to count the shown text in tokens)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def client_settings(ours: dict, extra: dict[str, dict], arm_backends: dict[str, tuple]) -> dict[str, dict]:
    """Each arm's client settings: the compared arms' own, an `--arm`'s over its namesake's (else ours'), and
    ours' for an arm named only by its backend (`--arm-backend light=profile=light`: the same client)."""
    return {**{a: ours for a in arm_backends}, **ARMS,
            **{a: {**ARMS.get(a, ours), **cfg} for a, cfg in extra.items()}, "ours": ours}


def run(args: argparse.Namespace) -> dict:
    import tempfile
    import time

    from quickcode.backend.launch import start_backend, stop_backend

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    extra = dict(getattr(args, "arm", None) or [])
    arm_backends = dict(getattr(args, "arm_backend", None) or [])
    known = {*ARMS, *extra, *arm_backends}
    if "ours" not in arms or not set(arms) <= known or not set(arm_backends) <= set(arms):
        raise SystemExit(f"--arms: 'ours' and any of {', '.join(sorted(known - {'ours'}))} "
                         f"(got {args.arms!r}; an --arm-backend names an arm of --arms)")
    key = {"code": _code_key(), "seed": args.seed, "chars": args.chars, "speed": args.speed, **_setting_key(args)}
    if extra:
        key["extra_arms"] = extra
    if arm_backends:
        key["arm_backends"] = {a: list(v) for a, v in arm_backends.items()}
    ours = {**ARMS["ours"], **(getattr(args, "ours_settings", None) or {})}
    arm_settings = client_settings(ours, extra, arm_backends)
    dev_arg = getattr(args, "developer", "whole")
    devs = ["whole", "word"] if dev_arg == "both" else [dev_arg]
    rows = _load_rows(args.rows, key)
    segs = _segments(held_out_files(args), args.sessions, args.chars, args.seed)
    todo = [i for i in range(len(segs)) if any((i, a, d) not in rows for a in arms for d in devs)]
    t_start = time.monotonic()
    args.started_s = time.time()
    backend, url = None, args.url
    if todo and url is None:
        backend = start_backend(Path("artifacts/logs/bench-typing-backend.log").resolve())
        url = backend.ws_url
    # an arm with a backend of its own types against it; the default backend serves the others
    others = {sets: start_backend(Path(f"artifacts/logs/bench-typing-backend-{i}.log").resolve(), *sets)
              for i, sets in enumerate(sorted(set(arm_backends.values())))} if todo else {}
    url_of = {a: others[arm_backends[a]].ws_url if a in arm_backends and todo else url for a in arms}
    # what each arm's client learns (pauses, the predictor) is kept across its sessions, and beside the rows
    # across the holds a run is continued in, as an editor keeps it across its sessions
    # (per developer kind: what a client learns depends on what its developer takes)
    tag = lambda a, d: a if d == "whole" else f"{d}-{a}"
    state = {(a, d): str(args.rows.parent / f"state-{key['code']}-{tag(a, d)}") if args.rows is not None
             else tempfile.mkdtemp(prefix=f"qc-typing-{tag(a, d)}-") for a in arms for d in devs}
    try:
        spent = lambda: (time.monotonic() - t_start) / 60 > args.budget_min or _past(getattr(args, "until", None))
        for i in todo:
            order = arms[i % len(arms):] + arms[: i % len(arms)]      # rotate: the machine's noise hits every arm
            kinds = devs[i % len(devs):] + devs[: i % len(devs)]      # and the developer kinds
            for dev, name in [(d, a) for d in kinds for a in order]:
                if (i, name, dev) in rows:
                    continue
                if spent():                   # checked per session: a hold's last minutes type one arm, not none
                    break
                seg = segs[i]
                print(f"[typing] session {i + 1}/{len(segs)} {name} ({dev} developer): {seg[0].name}, "
                      f"{len(seg[2])} chars", file=sys.stderr, flush=True)
                r = asyncio.run(_session(url_of[name], arm_settings[name], seg, args.seed + i, args.speed,
                                         state[(name, dev)], dev, getattr(args, "editor_style", "vscode")))
                r.update(key, session=i, arm=name, file=seg[0].name, developer=dev)
                rows[(i, name, dev)] = r
                if args.rows is not None:
                    append_row(args.rows, r)
            if spent():
                print(f"[typing] time budget spent at segment {i + 1} of {len(segs)}; continue with the same --rows",
                      file=sys.stderr, flush=True)
                break
    finally:
        for b in [backend, *others.values()]:
            if b is not None:
                stop_backend(b, 60)
    done = {d: [i for i in range(len(segs)) if all((i, a, d) in rows for a in arms)] for d in devs}
    if not any(done.values()):
        raise SystemExit("no segment typed by every arm yet")
    by_dev = {d: [[rows[(i, a, d)] for a in arms] for i in done[d]] for d in devs if done[d]}
    return _report(args, arms, by_dev, key, arm_backends)


def _past(until: str | None) -> bool:
    """Is it past `until` (HH:MM, UTC) today?"""
    if not until:
        return False
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    h, m = (int(x) for x in until.split(":"))
    return (now.hour, now.minute) >= (h, m)


def _fmt_ci(x: float, ci, f="{:.1f}") -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return "–"
    if ci is None or any(math.isnan(c) or math.isinf(c) for c in ci):
        return f.format(x)
    return f"{f.format(x)} [{f.format(ci[0])}, {f.format(ci[1])}]"


DEVELOPER_SAYS = {"whole": "takes a suggestion only whole (Tab)",
                  "word": "takes a suggestion whole when all of it is right, else its right words "
                          "(accept-next-word, reported to the language server as a partial accept)"}


def _kind_figures(arms: list[str], sessions: list[list[dict]], count) -> dict:
    """One developer kind's figures: per arm (its sessions, their sums), intervals, contrasts."""
    by_arm = {a: [s[k] for s in sessions] for k, a in enumerate(arms)}
    figs = {a: [tf.session_figures(r, count[a]) for r in rows] for a, rows in by_arm.items()}
    summ = {a: tf.summarize(f) for a, f in figs.items()}
    return {"sessions": sessions, "by_arm": by_arm, "summ": summ,
            "ci": tf.intervals(figs) if len(sessions) > 1 else {}, "con": tf.contrasts(summ)}


def _attribution(arms: list[str], sessions: list[list[dict]], base: str, developer: str):
    """({cause: [suggestions, base's chars, of them ours' chars]}, chars ours won where `base` took none)."""
    tally: dict[str, list[int]] = {c: [0, 0, 0] for c in tf.CAUSES}
    won = 0
    for s in sessions:
        b, ours = s[arms.index(base)], s[arms.index("ours")]
        for x in tf.attribute(b, ours, ours["target"], developer):
            t = tally[x["cause"]]
            t[0] += 1
            t[1] += x["chars"]
            t[2] += x["ours_chars"]
        won += tf.wins(b, ours)
    return {c: v for c, v in tally.items() if v[0]}, won


def _targets(kind: dict, bases: list[str]) -> tuple[dict, list[list[str]]]:
    """Issue 15's targets on one developer kind's figures: ({target: met}, report rows)."""
    summ, ci, con = kind["summ"], kind["ci"], kind["con"]
    t_rows, targets = [], {}
    for b in bases:
        r, lo = con[f"accepted_ratio_vs_{b}"], ci.get(f"accepted_ratio_vs_{b}", [math.nan])[0]
        ok = r >= 1.0 and lo >= 0.9
        targets[f"accepted_ge_1x_{b}"] = ok
        t_rows.append([f"accepted characters ≥ 1.0× {b} (lower end of the interval ≥ 0.9)",
                       _fmt_ci(r, ci.get(f"accepted_ratio_vs_{b}"), "{:.2f}×"), "yes" if ok else "no"])
    if "naive" in bases:
        f = con["fewer_requests_vs_naive"]
        targets["fewer_requests_ge_80pct_vs_naive"] = f >= 0.80
        t_rows.append(["≥ 80 % fewer backend requests than naive",
                       _fmt_ci(f, ci.get("fewer_requests_vs_naive"), "{:.0%}"), "yes" if f >= 0.80 else "no"])
    w = summ["ours"]["waste_share"]
    targets["waste_le_10pct"] = w <= 0.10
    t_rows.append(["generated tokens never shown ≤ 10 %", _fmt_ci(w, ci.get("ours.waste_share"), "{:.1%}"),
                   "yes" if w <= 0.10 else "no"])
    if "honest" in bases:
        d, hi = con["p95_minus_honest_ms"], ci.get("p95_minus_honest_ms", [math.nan, math.nan])[1]
        ok = not math.isnan(hi) and hi <= 10
        targets["p95_not_worse_than_honest"] = ok
        t_rows.append(["p95 pause → ghost text not worse than honest (upper end of the difference ≤ +10 ms)",
                       _fmt_ci(d, ci.get("p95_minus_honest_ms"), "{:+.0f} ms"), "yes" if ok else "no"])
    return targets, t_rows


def _rnd(x, n=3):
    return None if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else round(x, n)


def _headline_of(kind: dict, arms: list[str], attribution: dict, targets: dict) -> dict:
    """One developer kind's figures for the JSON headline."""
    summ, ci = kind["summ"], kind["ci"]
    out: dict = {"segments": len(kind["sessions"])}
    for a in arms:
        s = summ[a]
        out[a] = {"keys_saved": s["keys_saved"], "keys_saved_per_100": _rnd(s["keys_saved_per_100"], 2),
                  "accept_keys": s["accept_keys"],
                  "accepted_chars": s["accepted_chars"], "accepted_per_100": _rnd(s["accepted_per_100"], 2),
                  "partial_accepts": s["partial"], "partial_chars": s["partial_chars"],
                  "backend_requests": s["backend_requests"],
                  "engine_tokens_per_accepted_char": _rnd(s["engine_tokens_per_accepted_char"], 1),
                  "waste_share": _rnd(s["waste_share"]), "cache_share": _rnd(s["cache_share"]),
                  "p50_ms": _rnd(s["p50_ms"], 0), "p95_ms": _rnd(s["p95_ms"], 0)}
    out["contrasts"] = {k: _rnd(v) for k, v in kind["con"].items()}
    out["intervals_90"] = {k: [_rnd(v[0]), _rnd(v[1])] for k, v in ci.items()
                           if not k.startswith(tuple(f"{a}." for a in arms)) or k.split(".")[1] in
                           ("keys_saved_per_100", "accepted_per_100", "p95_ms", "waste_share")}
    out["loss_causes"] = {b: {c: v[1] for c, v in tally.items()} for b, (tally, _) in attribution.items()}
    out["targets_met"] = targets
    return out


def _side_by_side(arms: list[str], kinds: dict[str, dict]) -> str:
    """The headline figures of each developer kind, one column each."""
    devs = list(kinds)
    rows = [["segments typed by every arm", *(str(len(kinds[d]["sessions"])) for d in devs)]]
    for a in arms:
        rows.append([f"accepted characters per 100 typed: {a}",
                     *(_fmt_ci(kinds[d]["summ"][a]["accepted_per_100"],
                               kinds[d]["ci"].get(f"{a}.accepted_per_100"), "{:.2f}") for d in devs)])
    for a in arms:
        s = {d: kinds[d]["summ"][a] for d in devs}
        rows.append([f"accepted characters (suggestions; of them word by word): {a}",
                     *(f"{s[d]['accepted_chars']} ({s[d]['accepted']}; "
                       f"{s[d]['partial_chars']} in {s[d]['partial']})" for d in devs)])
    for a in arms:
        rows.append([f"keystrokes saved per 100 typed: {a}",
                     *(_fmt_ci(kinds[d]["summ"][a]["keys_saved_per_100"],
                               kinds[d]["ci"].get(f"{a}.keys_saved_per_100"), "{:.2f}") for d in devs)])
    for b in (a for a in arms if a in ("naive", "honest")):
        for k, what in ((f"keys_saved_ratio_vs_{b}", "keystrokes saved"), (f"accepted_ratio_vs_{b}",
                                                                            "accepted characters")):
            rows.append([f"{what}, ours / {b}",
                         *(_fmt_ci(kinds[d]["con"][k], kinds[d]["ci"].get(k), "{:.2f}×") for d in devs)])
    return md_table(["figure", *(f"{d} developer" for d in devs)], rows)


def _report(args, arms: list[str], by_dev: dict[str, list[list[dict]]], key: dict,
            arm_backends: dict[str, tuple[str, ...]] | None = None) -> dict:
    """The report of a run: the whole developer's figures in full (or the one kind typed), the kinds side by
    side when both were typed, and each kind's loss attribution."""
    arm_backends = arm_backends or {}
    # shown text counted in the tokens of the model each arm's backend serves (a running backend of --url:
    # the model this process's settings name)
    by_sets = {sets: _counter(_served_tokenizer(sets)) for sets in {(), *arm_backends.values()}}
    count = {a: by_sets[arm_backends.get(a, ())] for a in arms}
    kinds = {d: _kind_figures(arms, s, count) for d, s in by_dev.items()}
    dev = "whole" if "whole" in kinds else next(iter(kinds))
    sessions, by_arm, summ, ci = (kinds[dev][k] for k in ("sessions", "by_arm", "summ", "ci"))
    bases = [a for a in arms if a in ("naive", "honest")]
    attribution = {d: {b: _attribution(arms, kinds[d]["sessions"], b, d) for b in bases} for d in kinds}
    targets = {d: _targets(kinds[d], bases) for d in kinds}
    rep = Report("typing", "Typing benchmark: accepted text first, then what it costs",
                 out=getattr(args, "out", None))
    rep.started = getattr(args, "started_s", rep.started)
    files = sorted({r["file"] for r in by_arm["ours"]})
    rep.add(f"{len(sessions)} segments of {args.chars} characters typed by each arm (typing speed ×{args.speed}, "
            f"seed {args.seed}; files {', '.join(files)}, held out of the models' training); client code "
            f"`{key['code']}`. The arms type the same segments, rotated; the simulated developer meets the same "
            "pauses at the same places in every arm. Intervals: 90 %, resampling whole segments with "
            "replacement (2,000 draws), paired across arms."
            + "".join(f" {k.replace('_', ' ').capitalize()}: `{json.dumps(key[k])}`." for k in ("ours_settings", "backend_env", "editor_style")
                      if k in key)
            + f" Simulated developer ({dev}): {DEVELOPER_SAYS[dev]}."
            + (" The word developer's figures: [Developer kinds side by side](#developer-kinds-side-by-side)."
               if len(kinds) > 1 else ""))
    pc = lambda a, k, f="{:.1f}": _fmt_ci(summ[a][k], ci.get(f"{a}.{k}"), f)
    rows = [
        ["keystrokes saved per 100 typed (accepted characters less the keys that took them)",
         *(pc(a, "keys_saved_per_100", "{:.2f}") for a in arms)],
        ["keystrokes saved (accepted characters − accept keys)",
         *(f"{summ[a]['keys_saved']} ({summ[a]['accepted_chars']} − {summ[a]['accept_keys']})" for a in arms)],
        ["accepted characters per 100 typed", *(pc(a, "accepted_per_100", "{:.2f}") for a in arms)],
        ["accepted characters (suggestions)", *(f"{summ[a]['accepted_chars']} ({summ[a]['accepted']})" for a in arms)],
        *([["… of them word by word (partial accepts)",
            *(f"{summ[a]['partial_chars']} ({summ[a]['partial']})" for a in arms)]] if dev == "word" else []),
        ["backend requests", *(pc(a, "backend_requests", "{:.0f}") for a in arms)],
        ["requests per 100 keystrokes", *(f"{summ[a]['requests_per_100_keys']:.1f}" for a in arms)],
        ["engine tokens: prefill + decode", *(f"{summ[a]['prefill_tokens']:,} + {summ[a]['decode_tokens']:,}" for a in arms)],
        ["engine tokens per accepted character", *(pc(a, "engine_tokens_per_accepted_char", "{:.0f}") for a in arms)],
        ["generated tokens never shown", *(pc(a, "waste_share", "{:.1%}") for a in arms)],
        ["distinct suggestions shown", *(str(summ[a]["distinct_suggestions"]) for a in arms)],
        ["… served without asking (cache share)", *(pc(a, "cache_share", "{:.1%}") for a in arms)],
        ["pauses with ghost text", *(f"{summ[a]['ghost_in_pauses']:.0%} of {summ[a]['pauses']}" for a in arms)],
        ["pause → ghost text p50 ms", *(pc(a, "p50_ms", "{:.0f}") for a in arms)],
        ["pause → ghost text p95 ms", *(pc(a, "p95_ms", "{:.0f}") for a in arms)],
    ]
    rep.add("## Headline\n\n" + md_table(["figure", *arms], rows))
    # ── targets (issue 15): value, then cost, then latency; never redefined to be met
    rep.add("## Targets (issue 15)\n\n"
            + md_table(["target", "ours (90 % interval)", "met"], targets[dev][1]))
    if len(kinds) > 1:
        rep.add("## Developer kinds side by side\n\n"
                + "".join(f"The {d} developer {DEVELOPER_SAYS[d]}. " for d in kinds)
                + "Each kind typed the same segments in every arm, with the same pauses and coins at the "
                "same places; each arm's client learnt from its own kind's sessions only.\n\n"
                + _side_by_side(arms, kinds))
    # ── where accepted characters were lost
    for d in kinds:
        for b in bases:
            tally, won = attribution[d][b]
            sb = kinds[d]["summ"][b]
            kind = f" ({d} developer)" if len(kinds) > 1 else ""
            rep.add(f"## Where ours lost characters {b} accepted{kind}\n\nEach suggestion {b} accepted "
                    f"({sb['accepted']}, {sb['accepted_chars']} characters), looked up at the same place of "
                    f"the same segment in ours' session. Ours accepted {won} characters at places where {b} "
                    "accepted none of them.\n\n"
                    + md_table(["cause", "suggestions", f"{b}'s characters", "of them ours accepted too",
                                "meaning"], [[c, v[0], v[1], v[2], tf.CAUSES[c]] for c, v in tally.items()]))
    rep.add("**Cost columns.** Backend requests and engine tokens are the backend's own counters over each session "
            "(warm-ups, prefetches, cancelled and stopped requests included); prefill = prompt tokens not found in the "
            "engine's prefix cache. Never shown: output tokens minus the tokens of the text that reached the editor "
            "(per backend request, the union of every show of it). Cache share: of the distinct suggestions "
            "shown (a backend request × where its shown text ends), those first shown at a later keystroke than the "
            "request's first text (from the cache, or a request still running): typing through a suggestion is not "
            "counted again.")
    rep.add("**Session by session** (accepted characters; backend requests):\n\n" + md_table(
        ["segment", "file", *arms],
        [[str(k + 1), s[0]["file"], *(f"{r['accepted_chars']}; {tf.session_figures(r)['backend_requests']}" for r in s)]
         for k, s in enumerate(sessions)]))
    ours_rows = by_arm["ours"]
    client = {k: sum(r.get(k, 0) for r in ours_rows) for k in
              ("served_cache", "served_inflight", "served_network", "skipped", "superseded_waits", "empty",
               "empty_from_cache", "cancelled", "stopped_early", "prefetches", "warmups")}
    decisions: dict[str, int] = {}
    for r in ours_rows:
        for k, v in (r.get("decisions") or {}).items():
            decisions[k] = decisions.get(k, 0) + v
    rep.add("**Ours, the language server's own counters**: " + ", ".join(f"{k} {v}" for k, v in client.items())
            + (". Editor requests by how each ended (`decisions`): "
               + ", ".join(f"{k} {v}" for k, v in sorted(decisions.items(), key=lambda kv: -kv[1]) if v)
               if decisions else "") + ".")
    _plot(rep, {a: summ[a]["_lat"] for a in arms})
    top = _headline_of(kinds[dev], arms, attribution[dev], targets[dev][0])
    headline = {"segments": top.pop("segments"), "chars_per_segment": args.chars, "client_code": key["code"],
                **{k: key[k] for k in ("ours_settings", "backend_env", "editor_style") if k in key}, "developer": dev, **top}
    if "word" in kinds:
        word = kinds["word"]
        headline["developer_word"] = _headline_of(word, arms, attribution["word"], targets["word"][0])
    return rep.finish(headline)


def _plot(rep: Report, lats: dict[str, list[float]]) -> None:
    fig, ax = figure(figsize=(7, 4))
    for label, xs in lats.items():
        if xs:
            xs = sorted(xs)
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{label} (n={len(xs)})")
    ax.set_xlabel("pause → ghost text (ms)")
    ax.set_ylabel("share of pauses with ghost text")
    ax.set_title("Perceived latency, cumulative")
    ax.grid(alpha=0.3)
    ax.legend()
    rep.add_figure(fig, "latency_cdf", "pause to ghost text")
