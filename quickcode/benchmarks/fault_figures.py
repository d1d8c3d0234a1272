"""The figures of `quickcode bench faults` (quickcode/benchmarks/faults.py), read off what the simulated
editors saw and what the backends logged: pure functions over plain records, times in seconds from the run's
start.

An editor's record: {"user", "sessions" (the backend sessions its language server held), "asks": [{"t_s",
"end_s", "outcome"}], "shows": [{"t_s", "id"}], "messages": [{"t_s", "type", "text"}], "probes": [{"t_s", "ok",
"replica"}]}. A fault's record: {"name",
"t_start_s", "t_end_s", "t_stop_s" (its recovery period ends), "ref": "start" | "end" (what recovery is timed
from), "affected": [users]}.
"""
from __future__ import annotations

import re

from quickcode.protocol.stats import percentile

MESSAGE_ERROR = 1            # LSP MessageType.Error
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
_BACKEND_ID = re.compile(r"r\d+(\+\d+)?")
_CONNECTED = re.compile(r"connected to \S+ \(replica \S+, session (\S+),")


def base_id(item_id: str) -> str:
    """The backend request id of a suggestion id (`r12+5`: served 5 characters into r12's text)."""
    return item_id.split("+", 1)[0]


def from_backend(item_id: str) -> bool:
    """A suggestion a backend request wrote (`r12`, `r12+5`), not one the language server made by itself (the
    document's own words: `doc7`)."""
    return _BACKEND_ID.fullmatch(item_id) is not None


def parse_access_line(line: str) -> tuple[str, str, str] | None:
    """(session, the client's request id, user) of a text access line (quickcode/backend/logs.py), else None.
    The logged request id is `session:client id`."""
    if "quickcode.access" not in line:
        return None
    import json

    fields = {k: json.loads(v) if v.startswith('"') else v for k, v in _FIELD.findall(line)}
    if "request_id" not in fields or "user" not in fields or ":" not in str(fields["request_id"]):
        return None
    session, rid = str(fields["request_id"]).rsplit(":", 1)
    return session, rid, fields["user"]


def served_by(lines) -> dict[tuple[str, str], set[str]]:
    """{(session, client request id): the users the backends' access logs name for it}."""
    out: dict[tuple[str, str], set[str]] = {}
    for line in lines:
        if (p := parse_access_line(line)) is not None:
            out.setdefault(p[:2], set()).add(p[2])
    return out


def sessions_of(lsp_log_lines) -> set[str]:
    """The backend sessions a language server's own log says it was connected to
    (quickcode/lsp_client/channel.py)."""
    return {m.group(1) for line in lsp_log_lines if (m := _CONNECTED.search(line))}


def recovery_s(shows: list[dict], t_ref_s: float, t_stop_s: float) -> float | None:
    """From `t_ref_s` to the first new suggestion shown (one whose backend request was not shown before
    `t_ref_s`: not text typed through from the cache), if one is shown before `t_stop_s`."""
    shows = [s for s in shows if from_backend(s["id"])]
    before = {base_id(s["id"]) for s in shows if s["t_s"] < t_ref_s}
    for s in sorted(shows, key=lambda s: s["t_s"]):
        if t_ref_s <= s["t_s"] < t_stop_s and base_id(s["id"]) not in before:
            return s["t_s"] - t_ref_s
    return None


def _in(t: float, t0: float, t1: float) -> bool:
    return t0 <= t < t1


def window_counts(editor: dict, t0_s: float, t1_s: float, hang_s: float) -> dict:
    """What one editor saw in [t0_s, t1_s): keystrokes whose request was answered with a JSON-RPC error, error
    messages shown, requests never answered (or answered after `hang_s`), status probes unanswered."""
    asks = [a for a in editor["asks"] if _in(a["t_s"], t0_s, t1_s)]
    return {
        "requests": len(asks),
        "errors_shown": sum(a["outcome"] == "error" for a in asks),
        "error_messages": sum(m["type"] == MESSAGE_ERROR for m in editor["messages"] if _in(m["t_s"], t0_s, t1_s)),
        "hung_requests": sum(a["outcome"] is None or a["end_s"] is None or a["end_s"] - a["t_s"] > hang_s
                             for a in asks),
        "hung_probes": sum(not p["ok"] for p in editor["probes"] if _in(p["t_s"], t0_s, t1_s)),
        "shown": sum(_in(s["t_s"], t0_s, t1_s) for s in editor["shows"]),
    }


def attribution(editor: dict, served: dict[tuple[str, str], set[str]], t0_s: float, t1_s: float) -> dict:
    """The suggestions shown to this editor in [t0_s, t1_s), by whom the backends served their request in the
    sessions this editor's language server held (`editor["sessions"]`): this user alone (ours), anyone else
    (cross: a cross-user answer), or nobody that was logged (unattributed: its access line was not written,
    e.g. while the log disk was full); `local`: made by the language server itself (no backend request)."""
    user = editor["user"]
    out = {"ours": 0, "cross": 0, "unattributed": 0, "local": 0}
    for s in editor["shows"]:
        if not _in(s["t_s"], t0_s, t1_s):
            continue
        if not from_backend(s["id"]):
            out["local"] += 1
            continue
        rid = base_id(s["id"])
        users = set().union(*(served.get((session, rid), set()) for session in editor["sessions"]))
        out["ours" if users == {user} else "cross" if users else "unattributed"] += 1
    return out


def fault_figures(fault: dict, editors: list[dict], served: dict[tuple[str, str], set[str]], hang_s: float) -> dict:
    """One fault's figures, over its period [start, end of its recovery period): recovery of each affected
    editor (p50, max; `not_recovered` counts those that showed nothing new in time) and the sums over every
    editor."""
    t0, t1 = fault["t_start_s"], fault["t_stop_s"]
    t_ref = t0 if fault["ref"] == "start" else fault["t_end_s"]
    rec = {e["user"]: recovery_s(e["shows"], t_ref, t1) for e in editors if e["user"] in fault["affected"]}
    got = [r for r in rec.values() if r is not None]
    sums: dict = {}
    for e in editors:
        for k, v in {**window_counts(e, t0, t1, hang_s), **attribution(e, served, t0, t1)}.items():
            sums[k] = sums.get(k, 0) + v
    return {"name": fault["name"], "affected": len(rec), "recovery_by_user_s": rec,
            "recovery_p50_s": percentile(got, 50) if got else None, "recovery_max_s": max(got) if got else None,
            "not_recovered": sum(r is None for r in rec.values()), "window_s": t1 - t_ref,
            "duration_s": fault["t_end_s"] - t0, "ref": fault["ref"], **sums}


def why_not_recovered(fault: dict, fig: dict, editors: list[dict]) -> dict[str, str]:
    """{user: what an affected editor shown nothing new saw}: the replica its language server said it was on
    at the window's end, and how its requests in the window ended (e.g. all `empty`: a replica that answered
    but did not serve)."""
    t_ref = fault["t_start_s"] if fault["ref"] == "start" else fault["t_end_s"]
    out = {}
    for e in editors:
        if e["user"] in fig["recovery_by_user_s"] and fig["recovery_by_user_s"][e["user"]] is None:
            ended: dict[str, int] = {}
            for a in e["asks"]:
                if _in(a["t_s"], t_ref, fault["t_stop_s"]):
                    ended[str(a["outcome"])] = ended.get(str(a["outcome"]), 0) + 1
            on = [p for p in e["probes"] if _in(p["t_s"], t_ref, fault["t_stop_s"])]
            last = next((p["replica"] for p in reversed(on) if p.get("connected")), "") or "no replica"
            out[e["user"]] = f"on {last}; requests " + (", ".join(f"{k} {v}" for k, v in sorted(ended.items()))
                                                        or "none")
    return out


def replica_at(probes: list[dict], t_s: float) -> str:
    """The replica a language server said it was connected to at its first status probe from `t_s` on ('' if
    none said)."""
    for p in sorted(probes, key=lambda p: p["t_s"]):
        if p["t_s"] >= t_s and p.get("connected") and p.get("replica"):
            return p["replica"]
    return ""


def recovered_on(fault: dict, fig: dict, editors: list[dict]) -> dict[str, int]:
    """{replica: affected editors it showed its first new suggestion from}: what brought suggestions back."""
    t_ref = fault["t_start_s"] if fault["ref"] == "start" else fault["t_end_s"]
    out: dict[str, int] = {}
    for e in editors:
        r = fig["recovery_by_user_s"].get(e["user"])
        if r is not None:
            name = replica_at(e["probes"], t_ref + r) or "?"
            out[name] = out.get(name, 0) + 1
    return out


def failures(fig: dict) -> list[str]:
    """What breaks the acceptance in one fault's figures (empty: passed)."""
    out = []
    for key, what in (("errors_shown", "keystrokes with an error shown"), ("error_messages", "error messages"),
                      ("hung_requests", "hung requests"), ("hung_probes", "unanswered status probes"),
                      ("cross", "cross-user answers")):
        if fig.get(key):
            out.append(f"{fig[key]} {what}")
    if fig.get("not_recovered"):
        out.append(f"{fig['not_recovered']} editors not recovered within {fig['window_s']:.0f} s")
    return out


def per_second(times_s: list[float], end_s: float) -> list[int]:
    """How many of `times_s` fall in each second [k, k + 1) of [0, end_s)."""
    counts = [0] * max(1, int(end_s) + 1)
    for t in times_s:
        if 0 <= t < len(counts):
            counts[int(t)] += 1
    return counts
