"""Word-by-word accepts are counted once: VS Code reports the running total at each accept-next-word, so each
report counts only what it adds, and a later whole accept (Tab, or typed through) only the rest."""
from __future__ import annotations

from quickcode.lsp_client.telemetry import Outcomes, Shown


def outcomes():
    sent, learnt = [], []
    o = Outcomes(send=sent.append, learn=lambda f, ok, now_s: learnt.append(ok))
    o.on_shown(Shown("r1", "file:///a.py", "x = ", "compute(a, b)", "python", [], 0.0))
    return o, sent, learnt


def test_running_totals_count_each_character_once():
    o, sent, _ = outcomes()
    for length in (7, 8, 8, 9, 4):        # compute, (, again (, a, a shorter one
        o.on_partial("r1", length, 1.0)
    assert o.accepted_chars == 9 and o.counts["partial"] == 3
    assert [m.accepted_chars for m in sent if m.event == "partial"] == [7, 1, 1]


def test_a_whole_accept_after_partial_ones_counts_only_the_rest():
    o, sent, learnt = outcomes()
    o.on_partial("r1", 8, 1.0)
    o.on_accepted("r1", 2.0)
    assert o.accepted_chars == len("compute(a, b)") and sent[-1].accepted_chars == len("compute(a, b)") - 8
    assert learnt == [True]


def test_typed_through_after_partial_counts_only_the_rest():
    o, _, _ = outcomes()
    o.on_partial("r1", 8, 1.0)
    o.on_position("file:///a.py", "x = compute(a, b)", 3.0)
    assert o.accepted_chars == len("compute(a, b)") and o.counts["accepted"] == 1


def test_a_partly_accepted_suggestion_left_behind_is_learnt_as_taken_not_rejected():
    o, sent, learnt = outcomes()
    o.on_partial("r1", 7, 1.0)
    o.on_position("file:///a.py", "x = compute.z", 2.0)     # the developer went another way after the word
    assert o.counts["dismissed"] == 1 and o.accepted_chars == 7 and learnt == [True]


def test_a_report_longer_than_the_suggestion_counts_its_length():
    o, _, _ = outcomes()
    o.on_partial("r1", 10_000, 1.0)
    assert o.accepted_chars == len("compute(a, b)")
