"""Ours with other settings against a run's baselines, from `quickcode bench typing` rows (no new typing):

  python -m quickcode.benchmarks.typing_arms BASE_ROWS ARM_ROWS... [--sessions N] [--default ROWS]

BASE_ROWS: a run with the arms ours (the defaults), naive and honest (e.g. the rows of the current typing report:
`git show 4d25a71:benchmarks/reports/typing-1129-final/rows.jsonl.gz > base.jsonl.gz`); each
ARM_ROWS: an ours-only run (`--arms ours --ours-settings …`) on the same segments, seed and size. Per arm and
developer kind: accepted characters, ratio to naive, honest and the base run's ours (90 % intervals,
resampling segments paired across the runs, as the report does; `--default`: ours' defaults from another
ours-only run, e.g. one of the same series as the arms), backend requests and how many fewer than
naive, generated tokens never shown, pause → ghost p95 and its difference to honest's. A setting's rows come
from a different hold than the base's: the machine's noise between holds is not paired away.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from quickcode.benchmarks import typing_figures as tf
from quickcode.benchmarks.rows import read_rows


def by_segment(rows: list[dict], arm: str, developer: str, sessions: int) -> dict[int, dict]:
    return {r["session"]: r for r in rows
            if r["arm"] == arm and r.get("developer", "whole") == developer and r["session"] < sessions}


def compare(base: list[dict], arm: list[dict], developer: str, sessions: int, count,
            default: list[dict] | None = None) -> dict | None:
    """The arm's figures against the base run's naive, honest and ours ("default"), on common segments."""
    groups = {"ours": by_segment(arm, "ours", developer, sessions),
              **{b: by_segment(base, b, developer, sessions) for b in ("naive", "honest")},
              "default": by_segment(base if default is None else default, "ours", developer, sessions)}
    common = sorted(set.intersection(*(set(g) for g in groups.values())))
    if not common:
        return None
    figs = {a: [tf.session_figures(g[i], count) for i in common] for a, g in groups.items()}
    summ = {a: tf.summarize(f) for a, f in figs.items()}
    return {"segments": len(common), "summ": summ, "con": tf.contrasts(summ), "ci": tf.intervals(figs)}


def _ci(x: float, ci, fmt: str) -> str:
    return f"{fmt.format(x)} [{fmt.format(ci[0])}, {fmt.format(ci[1])}]" if ci else fmt.format(x)


def table(name: str, developer: str, c: dict) -> str:
    s, con, ci = c["summ"], c["con"], c["ci"]
    o = s["ours"]
    rows = [
        ("segments", str(c["segments"])),
        ("accepted characters: arm / default / naive / honest",
         " / ".join(str(s[a]["accepted_chars"]) for a in ("ours", "default", "naive", "honest"))),
        ("arm / naive", _ci(con["accepted_ratio_vs_naive"], ci.get("accepted_ratio_vs_naive"), "{:.2f}×")),
        ("arm / honest", _ci(con["accepted_ratio_vs_honest"], ci.get("accepted_ratio_vs_honest"), "{:.2f}×")),
        ("arm / default", _ci(con["accepted_ratio_vs_default"], ci.get("accepted_ratio_vs_default"),
                              "{:.2f}×")),
        ("backend requests: arm / default / naive",
         " / ".join(str(s[a]["backend_requests"]) for a in ("ours", "default", "naive"))),
        ("fewer requests than naive", _ci(100 * con["fewer_requests_vs_naive"],
                                          [100 * x for x in ci.get("fewer_requests_vs_naive", [])],
                                          "{:.1f} %")),
        ("generated tokens never shown: arm / default",
         f"{_ci(100 * o['waste_share'], [100 * x for x in ci.get('ours.waste_share', [])], '{:.1f} %')} / "
         f"{100 * s['default']['waste_share']:.1f} %"),
        ("decoded tokens: arm / default", f"{o['decode_tokens']} / {s['default']['decode_tokens']}"),
        ("pause → ghost p95 ms: arm / honest", f"{o['p95_ms']:.0f} / {s['honest']['p95_ms']:.0f}"),
        ("p95 arm − honest", _ci(con["p95_minus_honest_ms"], ci.get("p95_minus_honest_ms"), "{:+.0f} ms")),
        ("pauses with ghost text: arm / default",
         f"{100 * o['ghost_in_pauses']:.0f} % / {100 * s['default']['ghost_in_pauses']:.0f} %"),
    ]
    head = f"### {name}: {developer} developer\n\n| figure | value |\n|---|---|\n"
    return head + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", type=Path)
    p.add_argument("arms", type=Path, nargs="+")
    p.add_argument("--sessions", type=int, default=6)
    p.add_argument("--default", type=Path, default=None,
                   help="ours' defaults from this run (else BASE_ROWS')")
    args = p.parse_args(argv)
    from tokenizers import Tokenizer

    repo = Path(__file__).resolve().parents[2]
    tok = Tokenizer.from_file(str(repo / "models" / "target" / "tokenizer.json"))
    count = lambda t: len(tok.encode(t).ids)   # noqa: E731
    base = read_rows(args.base)
    default = read_rows(args.default) if args.default is not None else None
    for path in args.arms:
        arm = read_rows(path)
        settings = {r.get("ours_settings") and json.dumps(r["ours_settings"]) for r in arm} - {None}
        for developer in ("whole", "word"):
            c = compare(base, arm, developer, args.sessions, count, default)
            if c is not None:
                print(table(f"{path.name} {', '.join(sorted(settings)) or '(defaults)'}", developer, c))


if __name__ == "__main__":
    main()
