"""Where a typing-benchmark arm's decoded tokens and backend requests go (issue 15's cost diagnosis), from the
session records of `quickcode bench typing` (quickcode/benchmarks/typing.py):

  python -m quickcode.benchmarks.typing_cost ROWS [--state DIR] [--read-ms MS] [--sessions N] [--developer
  whole|word]

Tokens: per session, the engine's output tokens split into the tokens of the text that reached the editor (as
typing_figures counts them), the tokens of requests none of whose text was shown (the language server's own
`wasted_by`: typed_away, stopped_early, empty, prefetch — warm-ups are prefill-only, max_tokens 1, and count
as prefetch), and the rest: tokens of shown requests beyond the text shown.
Requests by place (an estimate): an ask answered from the network launched its request; an ask the next key
cancelled launched one if its gap outlasted the learnt wait of its place (the run's final learnt pauses,
`--state`, with the run's `pause_read_ms`). Places: in a string literal (the file's tokens), else by
quickcode.lsp_client.places.
Requests by what came before the ask (counted, not estimated): each ask answered by a new backend request's
text, by the ghost text shown last before it — the developer had just accepted one, typed through one (served
from it: no request), typed a character it did not have (deviated), or nothing was shown yet — and by how many
characters of a word were typed before the cursor; with the characters accepted from those requests.
"""
from __future__ import annotations

import argparse
import collections
import io
import sysconfig
import tokenize
from pathlib import Path

from quickcode.benchmarks.rows import read_rows
from quickcode.benchmarks.typing_figures import rid_of, shown_chars_by_request
from quickcode.lsp_client.debounce import AdaptiveDebounce
from quickcode.lsp_client.places import chars_into_word, place_of

PLACES = ("mid-word", "after space", "after punctuation", "line start", "in string")


def string_spans(source: str, base: int) -> list[tuple[int, int]]:
    """(start, end) offsets of the string literals of `source`, relative to `base`."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return [(starts[t.start[0] - 1] + t.start[1] - base, starts[t.end[0] - 1] + t.end[1] - base)
            for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.STRING]


def place_class(target: str, at: int, spans: list[tuple[int, int]]) -> str:
    if any(a < at < b for a, b in spans):
        return "in string"
    line = target[:at][target[:at].rfind("\n") + 1:]
    return {"line": "line start", "word": "mid-word", "space": "after space"}.get(place_of(line).kind,
                                                                                   "after punctuation")


def tokens_of(row: dict, count) -> dict:
    """A session's decoded tokens: shown, of requests never shown (by how they ended), beyond the shown text."""
    decoded = row["engine"]["output_tokens"]
    shown = sum(count(t) for t in shown_chars_by_request(row["shows"]).values())
    never = {k: v for k, v in row["wasted_by"].items() if v}
    return {"decoded": decoded, "shown": shown, "never_shown_requests": never,
            "beyond_shown": decoded - shown - sum(never.values())}


def requests_by_place(row: dict, spans: list[tuple[int, int]], debounce: AdaptiveDebounce) -> collections.Counter:
    """(place, "asks" | "requests" | "accepted_chars") → count, for one session (requests estimated)."""
    out, launched_at, target = collections.Counter(), {}, row["target"]
    for a in row["asks"]:
        at = a["at"]
        where = place_class(target, at, spans)
        p = place_of(target[:at][target[:at].rfind("\n") + 1:])
        if a["outcome"] == "items":
            launched = "+" not in a["id"]
            if launched:
                launched_at[a["id"]] = where
        else:
            launched = a["end_ms"] - a["t_ms"] > debounce.delay_ms(p.pause, p.kind) + 1
        out[(where, "asks")] += 1
        out[(where, "requests")] += launched
    for x in row["accepts"]:
        out[(launched_at.get(rid_of(x["id"]), "unknown"), "accepted_chars")] += len(x["text"])
    return out


def ask_cause(row: dict, ask: dict, last_show: dict | None, accepted_to: set[int]) -> str:
    """What came before an ask: after_accept, deviated (a typed character the shown text did not have),
    typed_through (the typed text is a prefix of the shown text), nothing_shown, other."""
    at = ask["at"]
    if at in accepted_to:
        return "after_accept"
    if last_show is None:
        return "nothing_shown"
    typed = row["target"][last_show["at"]:at]
    if at <= last_show["at"]:
        return "other"
    return "typed_through" if last_show["text"].startswith(typed) else "deviated"


def requests_by_cause(row: dict, spans: list[tuple[int, int]]) -> collections.Counter:
    """(group, key, "requests" | "accepted_chars") → count: new backend requests by `ask_cause` and by
    characters into the word (and in a string or not)."""
    out, acc = collections.Counter(), collections.Counter()
    for x in row["accepts"]:
        acc[rid_of(x["id"])] += len(x["text"])
    accepted_to = {x["at"] + len(x["text"]) for x in row["accepts"]}
    shows, i, last = sorted(row["shows"], key=lambda s: s["t_ms"]), 0, None
    for a in sorted(row["asks"], key=lambda a: a["t_ms"]):
        while i < len(shows) and shows[i]["t_ms"] <= a["t_ms"]:
            last, i = shows[i], i + 1
        if a["outcome"] != "items" or "+" in (a.get("id") or "") or not rid_of(a.get("id") or ""):
            continue
        line = row["target"][:a["at"]][row["target"][:a["at"]].rfind("\n") + 1:]
        where = "in string" if any(s < a["at"] < e for s, e in spans) else "code"
        for key in (("cause", ask_cause(row, a, last, accepted_to)),
                    ("into word", f"{where}, {min(chars_into_word(line), 3)}{'+' * (chars_into_word(line) >= 3)}")):
            out[(*key, "requests")] += 1
            out[(*key, "accepted_chars")] += acc[a["id"]]
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rows", type=Path)
    p.add_argument("--arm", default="ours")
    p.add_argument("--state", type=Path, default=None, help="the run's learnt state of the arm (state-…-ours)")
    p.add_argument("--read-ms", type=float, default=0.0, help="the run's pause_read_ms")
    p.add_argument("--sessions", type=int, default=None, help="only the first N segments (the report's)")
    p.add_argument("--developer", default="whole", help="the simulated developer kind (rows of both: one)")
    p.add_argument("--files", type=Path, nargs="+", default=[],
                   help="the run's --files (default: the segments come from the standard library)")
    args = p.parse_args(argv)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(Path(__file__).resolve().parents[2] / "models" / "target" / "tokenizer.json"))
    count = lambda t: len(tok.encode(t).ids)   # noqa: E731
    debounce = AdaptiveDebounce(read_ms=args.read_ms)
    if args.state is not None:
        debounce.load(args.state / "pauses.json")
    rows = sorted((r for r in read_rows(args.rows)
                   if r["arm"] == args.arm and (args.sessions is None or r["session"] < args.sessions)
                   and r.get("developer", "whole") == args.developer), key=lambda r: r["session"])
    print("| segment | file | requests (warm-ups, prefetches) | decoded | shown | never shown | requests never "
          "shown: tokens by ending | beyond the shown text | accepted chars |\n|---|---|---|---|---|---|---|---|---|")
    total, places, causes = collections.Counter(), collections.Counter(), collections.Counter()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    given = {f.name: f for f in args.files}
    for r in rows:
        t = tokens_of(r, count)
        never = t.pop("never_shown_requests")
        total.update(t)
        total.update({f"never:{k}": v for k, v in never.items()})
        total.update(requests=r["engine"]["requests"], warmups=r["warmups"], prefetches=r["prefetches"])
        print(f"| {r['session'] + 1} | {r['file']} | {r['engine']['requests']} ({r['warmups']}, {r['prefetches']}) "
              f"| {t['decoded']} | {t['shown']} | {1 - t['shown'] / max(1, t['decoded']):.0%} | "
              f"{', '.join(f'{k} {v}' for k, v in never.items())} | {t['beyond_shown']} | {r['accepted_chars']} |")
        source = given.get(r["file"], stdlib / r["file"]).read_text()
        spans = string_spans(source, source.find(r["target"]))
        places += requests_by_place(r, spans, debounce)
        causes += requests_by_cause(r, spans)
    d, never = total["decoded"], sum(v for k, v in total.items() if k.startswith("never:"))
    print(f"\n{len(rows)} sessions: {total['requests']} requests ({total['warmups']} warm-ups, "
          f"{total['prefetches']} prefetches), {d} decoded tokens, {total['shown']} shown "
          f"({1 - total['shown'] / max(1, d):.1%} never shown); beyond the shown text of shown requests "
          f"{total['beyond_shown']} ({total['beyond_shown'] / max(1, d):.0%}); requests never shown {never} "
          f"({never / max(1, d):.0%}: "
          + ", ".join(f"{k[6:]} {v}" for k, v in total.items() if k.startswith("never:")) + ")")
    print("\n| place (of the ask) | editor asks | backend requests (est.) | accepted chars (by its request's place) |"
          "\n|---|---|---|---|")
    for where in (*PLACES, "unknown"):
        print(f"| {where} | {places[(where, 'asks')]} | {places[(where, 'requests')]} | "
              f"{places[(where, 'accepted_chars')]} |")
    est = sum(v for (_, k), v in places.items() if k == "requests")
    print(f"\nkeystroke requests: {est} estimated, {total['requests'] - total['warmups'] - total['prefetches']} counted")
    print("\n| before the ask / characters into the word | backend requests (answered) | accepted chars |\n|---|---|---|")
    for group, key in sorted({k[:2] for k in causes}):
        n, c = causes[(group, key, "requests")], causes[(group, key, "accepted_chars")]
        print(f"| {group}: {key} | {n} | {c} |")


if __name__ == "__main__":
    main()
