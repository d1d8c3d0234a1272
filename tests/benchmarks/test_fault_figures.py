"""The figures of `quickcode bench faults` (quickcode/benchmarks/fault_figures.py) on hand-made records: recovery is timed
to the first new suggestion (not text typed through from the cache), errors, hangs and cross-user answers are
counted in the fault's period only, and a failure names what broke."""
from __future__ import annotations

import pytest

from quickcode.benchmarks import fault_figures as ff


def _editor(user: str, shows=(), asks=(), messages=(), probes=(), sessions=("s0",)) -> dict:
    return {"user": user, "sessions": list(sessions), "shows": [{"t_s": t, "id": i} for t, i in shows],
            "asks": [{"t_s": t, "end_s": e, "outcome": o} for t, e, o in asks],
            "messages": [{"t_s": t, "type": k, "text": "x"} for t, k in messages],
            "probes": [{"t_s": t, "ok": ok, "replica": "a-1"} for t, ok in probes]}


def test_access_lines_give_the_session_the_clients_request_id_and_the_user():
    lines = ['2026-01-01 00:00:00,000 INFO quickcode.access: completion request_id=s1a2:r12 user=dev3 route=ws '
             'status=length queue_ms=0.1',
             '... INFO quickcode.access: completion request_id="s9:r\\"7" user=dev4 route=ws status=stop',
             '... INFO uvicorn.error: request_id=s1:r1 user=dev9 (not an access line)',
             '... INFO quickcode.access: completion user=dev5']
    assert ff.served_by(lines) == {("s1a2", "r12"): {"dev3"}, ("s9", 'r"7'): {"dev4"}}


def test_a_language_servers_sessions_come_from_its_own_log():
    lines = ["2026-01-01 00:00:00,000 INFO quickcode.channel: connected to ws://10.79.0.2:8765/v1/ws (replica a-1, "
             "session 7efb82365317, model quickcode-embedded)", "... WARNING quickcode.channel: lost ws://x: closed"]
    assert ff.sessions_of(lines) == {"7efb82365317"}


def test_recovery_is_timed_to_the_first_suggestion_of_a_new_request():
    shows = [{"t_s": 1.0, "id": "r5"}, {"t_s": 11.0, "id": "r5+3"}, {"t_s": 14.0, "id": "r9"}]
    assert ff.recovery_s(shows, 10.0, 30.0) == pytest.approx(4.0)     # r5+3: typed through r5, from the cache
    assert ff.recovery_s(shows, 10.0, 13.0) is None                   # nothing new before the period ended
    assert ff.base_id("r12+5") == "r12" and ff.base_id("r12") == "r12"


def test_a_fault_counts_only_its_period_and_only_its_affected_editors_recover():
    a = _editor("dev0", shows=[(5, "r1"), (21, "r2"), (45, "r3"), (22, "doc4")],
                asks=[(5, 5.1, "items"), (20.5, 20.6, "error"), (22, None, None), (50, 50.1, "error")],
                messages=[(25, 1), (26, 3), (60, 1)], probes=[(21, False), (23, True)])
    b = _editor("dev1", shows=[(6, "r1"), (12, "r2"), (13, "r3")], sessions=("s1",))
    fault = {"name": "engine_kill", "t_start_s": 10.0, "t_end_s": 15.0, "t_stop_s": 40.0, "ref": "start",
             "affected": ["dev0"]}
    # dev1's session s1: r1 its own, r2 logged for dev0 (a cross-user answer), r3 not logged; dev0's r2 is its
    # own whatever dev1's ids are
    served = {("s0", "r1"): {"dev0"}, ("s0", "r2"): {"dev0"}, ("s1", "r1"): {"dev1"}, ("s1", "r2"): {"dev0"}}
    fig = ff.fault_figures(fault, [a, b], served, hang_s=5.0)
    assert fig["affected"] == 1 and fig["recovery_by_user_s"] == {"dev0": pytest.approx(11.0)}   # doc4: local
    assert fig["recovery_max_s"] == pytest.approx(11.0)
    assert (fig["errors_shown"], fig["error_messages"], fig["hung_requests"], fig["hung_probes"]) == (1, 1, 1, 1)
    assert (fig["ours"], fig["cross"], fig["unattributed"], fig["local"]) == (1, 1, 1, 1)
    assert ff.failures(fig) == ["1 keystrokes with an error shown", "1 error messages", "1 hung requests",
                                "1 unanswered status probes", "1 cross-user answers"]


def test_recovery_from_the_faults_end_and_an_editor_that_never_recovers_fails():
    a = _editor("dev0", shows=[(1, "r1"), (12, "r2"), (30, "r4")])
    b = _editor("dev1", shows=[(1, "r1"), (25, "r1+4")], asks=[(22, 22.1, "empty"), (23, 23.1, "empty"),
                                                                (24, 24.1, "items")], probes=[(21, True), (35, True)])
    b["probes"][-1]["connected"] = True
    fault = {"name": "link_down", "t_start_s": 10.0, "t_end_s": 20.0, "t_stop_s": 40.0, "ref": "end",
             "affected": ["dev0", "dev1"]}
    fig = ff.fault_figures(fault, [a, b], {("s0", "r2"): {"dev0"}, ("s0", "r4"): {"dev0"}}, hang_s=5.0)
    assert fig["recovery_by_user_s"] == {"dev0": pytest.approx(10.0), "dev1": None}   # r1+4: from the cache
    assert fig["not_recovered"] == 1 and fig["recovery_p50_s"] == pytest.approx(10.0)
    assert fig["window_s"] == pytest.approx(20.0)
    assert ff.failures(fig) == ["1 editors not recovered within 20 s"]
    assert ff.why_not_recovered(fault, fig, [a, b]) == {"dev1": "on a-1; requests empty 2, items 1"}


def test_a_slow_answer_is_hung_and_a_shown_suggestion_nobody_logged_is_unattributed():
    a = _editor("dev0", shows=[(12, "r7")], asks=[(11, 11 + 6.0, "items"), (13, 13.5, "cancelled")])
    fault = {"name": "log_disk_full", "t_start_s": 10.0, "t_end_s": 20.0, "t_stop_s": 30.0, "ref": "start",
             "affected": ["dev0"]}
    fig = ff.fault_figures(fault, [a], {}, hang_s=5.0)
    assert fig["hung_requests"] == 1 and fig["errors_shown"] == 0
    assert (fig["ours"], fig["cross"], fig["unattributed"]) == (0, 0, 1)


def test_per_second_bins():
    assert ff.per_second([0.1, 0.9, 1.0, 2.5, 7.0, -1.0], 3.0) == [2, 1, 1, 0]


def test_what_brought_suggestions_back_is_the_replica_the_editor_was_on_then():
    a = _editor("dev0", shows=[(12, "r2")])
    a["probes"] = [{"t_s": 11.5, "ok": True, "connected": False, "replica": ""},
                   {"t_s": 12.5, "ok": True, "connected": True, "replica": "b-1"}]
    b = _editor("dev1", shows=[(30, "r9")])
    b["probes"] = [{"t_s": 31, "ok": True, "connected": True, "replica": "a-2"}]
    fault = {"name": "engine_kill", "t_start_s": 10.0, "t_end_s": 25.0, "t_stop_s": 40.0, "ref": "start",
             "affected": ["dev0", "dev1"]}
    fig = ff.fault_figures(fault, [a, b], {}, hang_s=5.0)
    assert ff.recovered_on(fault, fig, [a, b]) == {"b-1": 1, "a-2": 1}
    assert ff.replica_at(a["probes"], 13.0) == ""
