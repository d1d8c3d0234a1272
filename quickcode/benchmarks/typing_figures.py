"""The typing benchmark's figures from its session records: pure functions over plain dicts (no I/O).

A session record is what `quickcode/benchmarks/typing.py` keeps of one arm typing one segment: the simulated
editor's position-by-position log (quickcode/benchmarks/editor_sim.py: `asks`, `shows`, `accepts`, `waits`,
offsets `at` into the segment), the language server's counters, and the backend's engine counters over the
session (`engine`: requests, prompt tokens looked up / found cached, output tokens). Figures:

  accepted per 100     accepted characters per 100 characters of the segment typed (the text the developer had
                       to produce; the same for every arm, so ratios of it are ratios of accepted characters)
  backend requests     requests the backend received (warm-ups and prefetches included)
  engine tokens        prefill (prompt tokens not found in the prefix cache) + decode (output tokens), per
                       accepted character
  waste                generated tokens whose text was never shown: per backend request, the characters of its
                       text that reached the editor (the union of every show of it, wherever typed through);
                       tokens shown = those characters tokenized; waste = 1 - shown / output tokens
  cache share          of the distinct suggestions shown (a backend request × where its shown text ends), the
                       share first shown at a later keystroke than the request's first text: served from the
                       client's cache or a request already running, not asked for
  pause → ghost        for gaps > 300 ms before a key, the time from the last key to the ghost text

Loss attribution: every suggestion an arm B (a baseline) accepted is looked up in arm A's (ours) record of the
same segment at the same position (the simulated developer meets the same pauses at the same places in both):
kept, kept shorter, covered by an acceptance of A's that began earlier, or lost — and then why (`CAUSES`).
Both arms' records must come from the same kind of simulated developer (quickcode/benchmarks/accept_rule.py:
`whole` takes a suggestion only whole, `word` also its right words); what counts as a right show depends on
it.
"""
from __future__ import annotations

import math

from quickcode.benchmarks.accept_rule import accepted_len
from quickcode.benchmarks.report import paired_bootstrap, percentile

PAUSE_MS = 300.0

CAUSES = {
    "kept": "ours accepted at least as many characters at the same place",
    "kept_shorter": "ours accepted fewer characters at the same place (its text shown shorter: a line or block cut "
                    "early by patience, post-processing, or the cache's rest of an older suggestion)",
    "covered": "ours had already accepted a suggestion spanning this place",
    "later": "ours accepted from a later place inside the baseline's text",
    "shown_longer": "ours showed the baseline's text and more, wrong beyond it (not taken: the whole "
                    "developer takes a suggestion only whole; for the word developer, its first word was "
                    "wrong)",
    "shown_other": "ours showed other text there (not what comes next)",
    "shown_declined": "ours showed the right text, the developer's coin said no (a later show at the place)",
    "answer_late": "ours' answer came after the developer typed on (text for an older document version)",
    "no_answer": "ours' request had no answer when the developer typed on (debounce wait + backend time > the "
                 "pause; cancelled by the next key)",
    "empty": "ours answered nothing there (skipped by the predictor, a learnt pause that outlasted the gap, the "
             "cache knowing nothing is there, or text post-processed to nothing)",
    "not_asked": "ours was not asked there",
}


def rid_of(item_id: str) -> str:
    """The backend request a suggestion's id names ("" for none: `doc…`, the rest of a word the language server
    took from the document's own identifiers, generated no token)."""
    rid = item_id.split("+", 1)[0]
    return "" if rid.startswith("doc") else rid


def shown_chars_by_request(shows: list[dict]) -> dict[str, str]:
    """Backend request id → the text of it that reached the editor (the union of its shows, in segment
    coordinates: typing through a suggestion shows the rest of the same text one position further)."""
    spans: dict[str, dict[int, str]] = {}
    for s in shows:
        rid = rid_of(s.get("id") or "")
        if not rid or not s["text"]:
            continue
        chars = spans.setdefault(rid, {})
        for k, ch in enumerate(s["text"]):
            chars.setdefault(s["at"] + k, ch)
    return {rid: "".join(ch for _, ch in sorted(chars.items())) for rid, chars in spans.items()}


def distinct_suggestions(shows: list[dict]) -> tuple[int, int]:
    """(distinct suggestions shown, of which first shown at a later keystroke than their request's first text)."""
    first_version: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    distinct = reused = 0
    for s in sorted(shows, key=lambda s: s["t_ms"]):
        rid = rid_of(s.get("id") or "")
        if not rid:
            continue
        key = (rid, s["at"] + len(s["text"]))
        first_version.setdefault(rid, s["version"])
        if key in seen:
            continue
        seen.add(key)
        distinct += 1
        reused += s["version"] > first_version[rid]
    return distinct, reused


def session_figures(row: dict, count_tokens=None) -> dict:
    """One session's additive figures (sums) and its pause → ghost latencies."""
    eng = row.get("engine") or {}
    shown_text = shown_chars_by_request(row["shows"])
    shown_tokens = sum(count_tokens(t) for t in shown_text.values()) if count_tokens else None
    distinct, reused = distinct_suggestions(row["shows"])
    return {
        "segment_chars": row["segment_chars"], "accepted_chars": row["accepted_chars"], "accepted": row["accepted"],
        # a row written before accept keys were recorded took each accept with one key (Tab)
        "accept_keys": sum(a.get("keys", 1) for a in row["accepts"]),
        "partial": sum(1 for a in row["accepts"] if a.get("partial")),
        "partial_chars": sum(len(a["text"]) for a in row["accepts"] if a.get("partial")),
        "keystrokes": row["keystrokes"],
        "backend_requests": eng.get("requests", row.get("backend_requests", 0)),
        "prefill_tokens": max(0, eng.get("prompt_tokens", 0) - eng.get("cached_tokens", 0)),
        "decode_tokens": eng.get("output_tokens", 0),
        "shown_chars": sum(len(t) for t in shown_text.values()),
        "shown_tokens": shown_tokens or 0,
        "distinct": distinct, "reused": reused,
        "pauses": sum(1 for w in row["waits"] if w["gap_ms"] > PAUSE_MS),
        "_lat": [w["ghost_ms"] for w in row["waits"] if w["gap_ms"] > PAUSE_MS and w["ghost_ms"] is not None],
    }


def summarize(figs: list[dict]) -> dict:
    """An arm's figures over sessions (sums of the additive parts, percentiles of the pooled latencies)."""
    s = {k: sum(f[k] for f in figs) for k in figs[0] if k != "_lat"}
    lat = [x for f in figs for x in f["_lat"]]
    engine = s["prefill_tokens"] + s["decode_tokens"]
    return {
        "sessions": len(figs), "segment_chars": s["segment_chars"], "keystrokes": s["keystrokes"],
        "accepted": s["accepted"], "accepted_chars": s["accepted_chars"],
        "partial": s["partial"], "partial_chars": s["partial_chars"],
        "accepted_per_100": 100 * s["accepted_chars"] / max(1, s["segment_chars"]),
        "accept_keys": s["accept_keys"], "keys_saved": s["accepted_chars"] - s["accept_keys"],
        "keys_saved_per_100": 100 * (s["accepted_chars"] - s["accept_keys"]) / max(1, s["segment_chars"]),
        "backend_requests": s["backend_requests"],
        "requests_per_100_keys": 100 * s["backend_requests"] / max(1, s["keystrokes"]),
        "prefill_tokens": s["prefill_tokens"], "decode_tokens": s["decode_tokens"], "engine_tokens": engine,
        "engine_tokens_per_accepted_char": engine / s["accepted_chars"] if s["accepted_chars"] else math.inf,
        "shown_tokens": s["shown_tokens"],
        "waste_share": max(0.0, 1 - s["shown_tokens"] / s["decode_tokens"]) if s["decode_tokens"] else 0.0,
        "distinct_suggestions": s["distinct"],
        "cache_share": s["reused"] / s["distinct"] if s["distinct"] else 0.0,
        "pauses": s["pauses"], "ghost_in_pauses": len(lat) / max(1, s["pauses"]),
        "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95), "_lat": lat,
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b else (math.inf if a else math.nan)


def contrasts(arms: dict[str, dict], ours: str = "ours") -> dict:
    """The compared figures of one draw: ours / each baseline's accepted characters, requests, p95 difference."""
    o = arms[ours]
    out = {}
    for name, b in arms.items():
        if name == ours:
            continue
        out[f"accepted_ratio_vs_{name}"] = _ratio(o["accepted_chars"], b["accepted_chars"])
        out[f"keys_saved_ratio_vs_{name}"] = _ratio(o["keys_saved"], b["keys_saved"])
        out[f"fewer_requests_vs_{name}"] = 1 - _ratio(o["backend_requests"], b["backend_requests"])
        out[f"p95_minus_{name}_ms"] = o["p95_ms"] - b["p95_ms"]
        out[f"p50_minus_{name}_ms"] = o["p50_ms"] - b["p50_ms"]
    return out


INTERVAL_KEYS = ("keys_saved_per_100", "accepted_per_100", "backend_requests", "engine_tokens_per_accepted_char", "waste_share",
                 "cache_share", "p50_ms", "p95_ms")


def intervals(figs: dict[str, list[dict]], draws: int = 2000, seed: int = 0, level: float = 0.90) -> dict:
    """`level` intervals by resampling whole sessions with replacement, paired (the same sessions for every
    arm: they typed the same segments): each arm's figures and the contrasts. {name: [lo, hi]}."""
    def measure(idx: list[int]) -> dict[str, float]:
        arms = {a: summarize([fs[i] for i in idx]) for a, fs in figs.items()}
        out = {f"{a}.{k}": s[k] for a, s in arms.items() for k in INTERVAL_KEYS}
        if "ours" in arms and len(arms) > 1:
            out.update(contrasts(arms))
        return out

    return paired_bootstrap(len(next(iter(figs.values()))), measure, draws, seed, level)


def _covering(accepts: list[dict], at: int) -> dict | None:
    for a in accepts:
        if a["at"] < at < a["at"] + len(a["text"]):
            return a
    return None


def attribute(base: dict, ours: dict, target: str, developer: str = "whole") -> list[dict]:
    """Every suggestion the baseline accepted in `base`, looked up in `ours` (the same segment, `target`, the
    same kind of `developer`): [{at, chars, cause, ours_chars}] — `ours_chars` of the baseline's characters
    ours accepted there too."""
    out = []
    ours_at = {a["at"]: a for a in ours["accepts"]}
    for acc in base["accepts"]:
        at, n = acc["at"], len(acc["text"])
        mine = ours_at.get(at)
        if mine is not None:
            k = min(n, len(mine["text"]))
            out.append({"at": at, "chars": n, "ours_chars": k, "cause": "kept" if k >= n else "kept_shorter"})
            continue
        cover = _covering(ours["accepts"], at)
        if cover is not None:
            k = min(n, cover["at"] + len(cover["text"]) - at)
            out.append({"at": at, "chars": n, "ours_chars": k, "cause": "covered"})
            continue
        inside = [a for a in ours["accepts"] if at < a["at"] < at + n]
        if inside:
            k = sum(min(len(a["text"]), at + n - a["at"]) for a in inside)
            out.append({"at": at, "chars": n, "ours_chars": k, "cause": "later"})
            continue
        cause = _why_lost(ours, at, acc["text"], target, developer)
        out.append({"at": at, "chars": n, "ours_chars": 0, "cause": cause})
    return out


def _why_lost(ours: dict, at: int, text: str, target: str, developer: str) -> str:
    shows = [s for s in ours["shows"] if s["at"] == at]
    right = [s for s in shows if accepted_len(s["text"], target[at:], developer)]   # what the developer takes
    if right:
        return "shown_declined"
    if shows:
        return "shown_longer" if any(s["text"].startswith(text) for s in shows) else "shown_other"
    asks = [a for a in ours["asks"] if a["at"] == at]
    if not asks:
        return "not_asked"
    last = asks[-1]
    if last["outcome"] == "late":
        return "answer_late"
    if last["outcome"] in ("cancelled", None, "error"):
        return "no_answer"
    return "empty"


def wins(base: dict, ours: dict) -> int:
    """Characters ours accepted at places where the baseline accepted nothing of them."""
    taken = set()
    for a in base["accepts"]:
        taken.update(range(a["at"], a["at"] + len(a["text"])))
    return sum(1 for a in ours["accepts"] for k in range(a["at"], a["at"] + len(a["text"])) if k not in taken)
