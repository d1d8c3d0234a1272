"""`quickcode bench overload`'s pure parts: its arms, the plan's rate, per-user figures, the best cap, the paired
intervals, the acceptance verdict and the report itself (the run needs a real engine: `quickcode bench overload`)."""
from __future__ import annotations

import argparse
import json
import math

import pytest

from quickcode.benchmarks import overload as ov
from quickcode.benchmarks.loadgen import Outcome
from quickcode.benchmarks.trace import TraceRow, plan

FAMILIES = {"fifo-cap2": "fifo", "fifo-cap4": "fifo", "vllm-priority": "priority", "ours": "ours"}


def rec(user, kind="served", response_s=0.1, keystroke=False):
    return ov.Rec(user, kind, response_s, keystroke)


def test_every_arm_sets_every_field_another_arm_changes():
    arms = ov.arms([2, 6], budget_s=0.9)
    assert [a.name for a in arms] == ["fifo-cap2", "fifo-cap6", "vllm-priority", "ours"]
    assert [a.family for a in arms] == ["fifo", "fifo", "priority", "ours"]
    assert all({"mode", "admit_cap"} <= set(a.patch) for a in arms)     # no arm inherits another's cap or mode
    assert arms[1].patch == {"mode": "fifo", "admit_cap": 6}
    assert arms[2].patch == {"mode": "priority", "admit_cap": 0}
    assert arms[3].patch == {"mode": "latency", "admit_cap": 0, "ttft_budget_s": 0.9}
    assert [a.name for a in ov.block_order(arms, 1)] == ["fifo-cap6", "vllm-priority", "ours", "fifo-cap2"]
    assert ov.block_order(arms, 4) == arms


class TinyCorpus:
    def prompt(self, n_tokens, start=None):
        start = 7 if start is None else start
        return f"x{start}:{n_tokens}", start


def test_the_trace_is_time_scaled_to_send_the_levels_rate():
    rows = [TraceRow(t * 0.5, 100 + t, 5) for t in range(2000)]                 # 2 req/s of trace time
    speed = ov.speed_for(rows, start_s=100.0, duration_s=10.0, rps=6.0)         # 60 requests in 10 s wall
    assert speed == pytest.approx(3.0)
    planned = plan(rows, TinyCorpus(), speed=speed, start_s=100.0, duration_s=10.0, users=5, typist_share=0.2,
                   burst_gap_s=0.3, max_prompt_tokens=1500, max_output_tokens=64, seed=0)
    assert len(planned) == 60 and max(p.at_s for p in planned) < 10.0
    with pytest.raises(ValueError, match="needed"):
        ov.speed_for(rows, start_s=900.0, duration_s=10.0, rps=1000.0)


def test_records_follow_what_the_client_saw():
    outs = [Outcome("a", "", 10, 0.0, t_first=0.2, t_end=0.5, finish="stop"),
            Outcome("b", "", 10, 0.5, t_end=0.501, finish="shed"),
            Outcome("c", "", 10, 0.0, t_end=0.3, finish="superseded"),
            Outcome("d", "", 10, 0.0),
            Outcome("e", "", 10, 0.1, t_first=0.4, t_end=0.5, finish="length"),   # user 1's next comes at 0.3
            Outcome("f", "", 10, 0.3, t_first=0.5, t_end=0.6, finish="length")]
    recs = ov.records(outs, [0, 0, 1, 2, 1, 1], [False, True, False, False, True, True])
    assert [(r.user, r.kind, r.keystroke) for r in recs[:4]] == [(0, "served", False), (0, "shed", True),
                                                                (1, "superseded", False), (2, "unfinished", False)]
    assert recs[0].response_s == pytest.approx(0.2) and recs[3].response_s is None
    assert [r.until_next_s for r in recs] == pytest.approx([0.5, None, 0.1, None, 0.2, None])
    assert [ov.in_time(r, 1.0) for r in recs] == [True, False, False, False, True, True]   # `shed`: no suggestion
    assert not ov.in_time(recs[0], 0.1)
    # e's answer came 0.3 s after it, after the user's next request (0.2 s): in time, but no longer current
    assert [ov.current(r, 1.0) for r in recs] == [True, False, False, False, False, True]


def synthetic_level():
    """4 users; user 0 asks 4 times, the others twice. cap2 wins overall, cap4 wins on user 0 alone."""
    recs = {
        "fifo-cap2": [rec(0), rec(0), rec(0, "shed", 0.001), rec(0, "served", 5.0),
                      rec(1), rec(1), rec(2), rec(2), rec(3), rec(3)],
        "fifo-cap4": [rec(0), rec(0), rec(0), rec(0, "served", 0.2),
                      rec(1, "served", 3.0), rec(1, "served", 3.0), rec(2, "unfinished", None), rec(2),
                      rec(3, "shed", 0.001), rec(3)],
        "vllm-priority": [rec(0, "served", 2.0)] * 4 + [rec(1), rec(1), rec(2), rec(2), rec(3), rec(3)],
        "ours": [rec(0), rec(0, "superseded", 0.01, True), rec(0), rec(0)] + [rec(u) for u in (1, 1, 2, 2, 3, 3)],
    }
    return recs


def test_level_figures_per_arm_and_the_best_cap_chosen_in_each_draw():
    per_arm = {n: ov.aggregate(r, [0, 1, 2, 3], slo_s=1.0) for n, r in synthetic_level().items()}
    f = ov.level_figures(per_arm, FAMILIES, [0, 1, 2, 3], block_s=2.0)
    assert f["fifo-cap2.goodput_rps"] == 8 / 2 and f["fifo-cap4.goodput_rps"] == 6 / 2
    assert all(f[f"{n}.current_rps"] == f[f"{n}.goodput_rps"] for n in FAMILIES)   # no request is followed here
    assert f["vllm-priority.goodput_rps"] == 6 / 2 and f["ours.goodput_rps"] == 9 / 2
    assert f["fifo-cap2.shed_share"] == pytest.approx(0.1) and f["ours.superseded_share"] == pytest.approx(0.1)
    # users in time: the mean of each user's share, not the share of all requests
    assert f["fifo-cap2.user_in_time"] == pytest.approx((2 / 4 + 1 + 1 + 1) / 4)
    assert f["fifo-cap4.served_p95_s"] == pytest.approx(3.0)
    assert f["best_fifo.goodput_rps"] == 4.0 and ov.best_cap(f, FAMILIES) == "fifo-cap2"
    assert f["ours_over_best_fifo"] == pytest.approx(4.5 / 4) and f["ours_over_priority"] == pytest.approx(1.5)
    assert f["current_over_best_fifo"] == f["ours_over_best_fifo"]
    only0 = ov.level_figures(per_arm, FAMILIES, [0, 0], block_s=2.0)           # a draw of user 0 twice
    assert only0["best_fifo.goodput_rps"] == only0["fifo-cap4.goodput_rps"] == 8 / 2
    assert only0["ours_over_best_fifo"] == pytest.approx(6 / 8)


def test_a_tie_between_caps_goes_to_the_smaller_one():
    point = {"fifo-cap2.goodput_rps": 1.0, "fifo-cap4.goodput_rps": 1.0}
    assert ov.best_cap(point, FAMILIES) == "fifo-cap2"


def test_intervals_bracket_the_point_and_collapse_when_users_are_alike():
    sm = ov.summarize_level(synthetic_level(), FAMILIES, slo_s=1.0, block_s=2.0, draws=300, seed=1)
    assert sm["users"] == 4 and sm["best_fifo"] == sm["best_fifo_current"] == "fifo-cap2"
    for key in ("ours.goodput_rps", "ours_over_best_fifo", "fifo-cap2.user_in_time"):
        lo, hi = sm["ci"][key]
        assert lo <= sm["point"][key] <= hi and lo < hi, key
    alike = {n: [rec(u) for u in range(6)] for n in FAMILIES}
    sm = ov.summarize_level(alike, FAMILIES, slo_s=1.0, block_s=1.0, draws=100)
    assert sm["ci"]["ours_over_priority"] == [1.0, 1.0] and sm["point"]["ours.user_in_time"] == 1.0


def test_the_acceptance_verdict_reads_the_point_and_the_intervals_low_end():
    summary = {"point": {"ours_over_best_fifo": 1.6, "ours_over_priority": 0.9, "current_over_best_fifo": 2.0,
                         "current_over_priority": 1.2, "ours.served_p95_s": 1.0},
               "ci": {"ours_over_best_fifo": [1.4, 1.9], "ours_over_priority": [0.8, 1.1],
                      "current_over_best_fifo": [1.6, 2.5], "current_over_priority": [0.9, 1.5]}}
    acc = ov.acceptance(summary, unloaded_p95_s=0.6)
    assert acc["ours_over_best_fifo"]["met"] and not acc["ours_over_best_fifo"]["ci_clears"]
    assert not acc["ours_over_priority"]["met"]
    assert acc["current_over_best_fifo"]["ci_clears"] and acc["current_over_priority"]["met"]
    assert not acc["current_over_priority"]["ci_clears"]
    assert acc["served_p95"]["met"] and acc["served_p95"]["limit_ms"] == pytest.approx(1200)
    summary["point"]["ours.served_p95_s"] = 1.3
    assert not ov.acceptance(summary, unloaded_p95_s=0.6)["served_p95"]["met"]


def test_the_report_and_its_headline_from_a_synthetic_run(tmp_path, capsys):
    """The whole report path without an engine: tables, sweep, verdict, plot, and the JSON line last."""
    arms = [ov.Arm("fifo-cap2", "fifo", {}), ov.Arm("fifo-cap4", "fifo", {}), ov.Arm("vllm-priority", "priority", {}),
            ov.Arm("ours", "ours", {})]
    levels = [{"level": x, "rps": x, "speed": x, "requests": 10, "keystrokes": 1, "recs": synthetic_level()}
              for x in (1.0, 3.0)]
    unloaded = [Outcome(str(i), "", 10, 0.0, t_first=0.4 + i / 100, t_end=0.5 + i / 100, finish="length")
                for i in range(20)]
    r = {"unloaded": unloaded, "sustainable": 1.8, "slo_s": 1.0, "budget_s": 0.75, "drain_s": 10.0,
         "max_running": 4, "arms": arms, "levels": levels,
         "served": {"profile": "light", "profile_why": "asked for", "target": "target", "precision": "int8",
                    "spec_method": "off"}}
    args = argparse.Namespace(levels="1,3", caps="2,4", block_s=2.0, users=4, engine_slots=4, trace=ov.DEFAULT_TRACE,
                              start_s=180.0, typist_share=0.25, burst_gap_ms=300.0, max_prompt_tokens=1500,
                              max_output_tokens=64, budget_share=0.75, slo_ms=None, sustainable_rps=None,
                              capacity_s=25.0, draws=50, seed=0, accept_level=3.0, out=tmp_path)

    class Work:
        clipped_share = 0.49
    headline = ov._report(args, Work(), r)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == headline
    lv = headline["levels"]["3x"]
    assert lv["best_fifo"] == "fifo-cap2" and lv["goodput_rps"]["ours"] == 4.5
    assert lv["ours_over_best_fifo"][0] == pytest.approx(1.12) and len(lv["ours_over_best_fifo"]) == 3
    assert headline["target_goodput_1_5x_best_fifo_met"] is False and headline["target_goodput_ge_priority_met"]
    assert headline["target_current_goodput_ge_priority_met"] and lv["current_rps"]["best_fifo"] == 4.0
    md = (tmp_path / "overload.md").read_text()
    assert "fifo-cap2 (best FIFO)" in md and "The capped FIFO's sweep" in md and "**NOT met**" in md
    assert (tmp_path / "overload_load.png").stat().st_size > 10_000
    assert not any(isinstance(v, float) and math.isnan(v) for v in lv.values())
    assert "current goodput ≥ 1.5 × the best capped FIFO" in md
    assert "Served: profile **light** (asked for)" in md and headline["profile"] == "light"
