"""Unit tests of quickcode/backend/scheduler.py with virtual time: supersede, caps, shedding, prefetch, fairness, fifo."""
from __future__ import annotations

import heapq
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quickcode.backend.scheduler import End, Job, Lateness, RateModel, Reason, Scheduler, SchedulerConfig, Start


def sched(**cfg) -> Scheduler:
    """A scheduler with known, round rates: 10,000 prompt tokens/s, 100 tokens/s decode, 10 of 64 output tokens."""
    rates = RateModel(prefill_tok_s=10_000.0, decode_tok_s=100.0, output_fill=10 / 64)
    return Scheduler(SchedulerConfig(**{"max_running": 2, "per_user_inflight": 2, "ttft_budget_s": 0.2, **cfg}), rates)


_keys = itertools.count()


def job(user: str = "u", prompt_tokens: int = 100, max_tokens: int = 64, prefetch: bool = False, key=None) -> Job:
    return Job(key if key is not None else next(_keys), user, prompt_tokens, max_tokens, prefetch=prefetch)


def starts(actions) -> list:
    return [a.key for a in actions if isinstance(a, Start)]


def ends(actions) -> dict:
    return {a.key: (a.reason, a.was_running) for a in actions if isinstance(a, End)}


# ── supersede ──────────────────────────────────────────────────────────────────────────────────────────────

def test_normal_supersedes_the_users_older_queued_running_and_prefetch_requests():
    s = sched(max_running=2, per_user_inflight=3)
    assert starts(s.submit(job("b", key="b0"), 0.0)) == ["b0"]
    assert starts(s.submit(job("a", key="a1"), 0.001)) == ["a1"]
    assert starts(s.submit(job("c", key="c1"), 0.002)) == []      # no slot: c1 waits
    s.submit(job("a", prefetch=True, key="a2"), 0.003)
    acts = s.submit(job("a", key="a3"), 0.004)
    assert ends(acts) == {"a1": (Reason.SUPERSEDED, True),        # running: the caller aborts it in the engine
                          "a2": (Reason.SUPERSEDED, False)}
    assert starts(acts) == ["c1"]                                  # the freed slot goes to the older arrival
    assert list(s.queue) == ["a3"]
    acts = s.submit(job("a", key="a4"), 0.005)
    assert ends(acts) == {"a3": (Reason.SUPERSEDED, False)}        # a queued one ends without an abort
    assert set(s.running) == {"b0", "c1"} and list(s.queue) == ["a4"]   # other users are untouched


def test_prefetch_supersedes_only_the_users_older_prefetches():
    s = sched(max_running=4)
    s.submit(job("a", key="n1"), 0.0)
    s.submit(job("a", prefetch=True, key="p1"), 0.01)
    acts = s.submit(job("a", prefetch=True, key="p2"), 0.02)
    assert ends(acts) == {"p1": (Reason.SUPERSEDED, True)}
    assert set(s.jobs) == {"n1", "p2"}


def test_a_superseded_request_is_not_ended_twice_when_the_engine_reports_it():
    s = sched()
    s.submit(job("a", key="x"), 0.0)
    s.submit(job("a", key="y"), 0.01)
    assert s.finished("x", 0.02) == []                            # late report of the aborted one: a no-op
    assert set(s.running) == {"y"}


# ── per-user cap ───────────────────────────────────────────────────────────────────────────────────────────

def test_per_user_cap_a_prefetch_never_displaces_a_normal_request():
    s = sched(per_user_inflight=1)
    s.submit(job("a", key="n"), 0.0)
    acts = s.submit(job("a", prefetch=True, key="p"), 0.01)
    assert ends(acts) == {"p": (Reason.SHED, False)}
    assert set(s.jobs) == {"n"}


def test_per_user_cap_allows_a_normal_and_a_prefetch_at_two():
    s = sched(max_running=4, per_user_inflight=2)
    s.submit(job("a", key="n"), 0.0)
    acts = s.submit(job("a", prefetch=True, key="p"), 0.01)
    assert ends(acts) == {} and set(s.jobs) == {"n", "p"}
    assert len(s.by_user["a"]) == 2


def test_per_user_cap_holds_across_the_users_sessions():
    s = sched(max_running=8, per_user_inflight=2)
    for i in range(10):   # one user, requests from several editors (keys differ), interleaved prefetch
        s.submit(job("a", prefetch=i % 2 == 1, key=("session", i)), i * 0.001)
        assert len(s.by_user["a"]) <= 2


# ── shedding ───────────────────────────────────────────────────────────────────────────────────────────────

def test_admission_sheds_a_request_whose_predicted_wait_breaks_the_budget():
    s = sched(max_running=1)
    s.submit(job("a", prompt_tokens=1000, key="r"), 0.0)          # 0.1 s prefill, then ~10 tokens at 100/s
    # b waits for r: r's first token at 0.1 s, done at 0.2 s; b's prefill 0.05 s → first token at 0.25 s
    b = job("b", prompt_tokens=500, key="b")
    acts = s.submit(b, 0.0)
    assert ends(acts) == {"b": (Reason.SHED, False)}
    # a short prompt, once r decodes (first token out), fits: r frees at 0.05+0.1, c's prefill 0.01 s
    s.progress("r", 1)
    c = job("c", prompt_tokens=100, key="c")
    assert ends(s.submit(c, 0.05)) == {}
    assert s.predicted_ttft_s(c, 0.05) == pytest.approx(0.09 + 0.01)
    assert list(s.queue) == ["c"]


def test_a_request_that_gets_a_slot_at_once_is_never_shed_at_admission():
    s = sched(max_running=1, ttft_budget_s=0.01)
    acts = s.submit(job("a", prompt_tokens=5000, key="huge"), 0.0)  # 0.5 s of prefill on an idle engine
    assert starts(acts) == ["huge"] and ends(acts) == {}


def test_a_free_slot_does_not_save_a_request_stuck_behind_running_prefills():
    s = sched(max_running=4, ttft_budget_s=0.2)
    assert starts(s.submit(job("a", prompt_tokens=1500, key="a"), 0.0)) == ["a"]   # 0.15 s of prefill
    acts = s.submit(job("b", prompt_tokens=1500, key="b"), 0.0)                     # would get its first at 0.3 s
    assert ends(acts) == {"b": (Reason.SHED, False)} and starts(acts) == []
    assert starts(s.submit(job("c", prompt_tokens=400, key="c"), 0.0)) == ["c"]     # 0.15 + 0.04: fits


def test_tick_sheds_a_queued_request_once_the_wait_has_used_up_the_budget():
    s = sched(max_running=1)
    s.submit(job("a", prompt_tokens=100, key="r"), 0.0)
    s.progress("r", 1)
    s.submit(job("b", prompt_tokens=100, key="b"), 0.0)          # predicted: r frees at 0.09, b's first at 0.1
    assert s.tick(0.05) == []
    # the engine is slower than measured: r is still on its first token at 0.15 s
    assert ends(s.tick(0.15)) == {"b": (Reason.SHED, False)}
    assert not s.queue and s.finished("r", 0.16) == []


def test_the_queue_never_grows_past_what_the_budget_allows():
    s = sched(max_running=2)
    served = 0
    for i in range(200):                                         # 200 users arrive within 20 ms
        acts = s.submit(job(f"u{i}", prompt_tokens=200, key=i), i * 0.0001)
        served += len(starts(acts))
        for k in s.queue:
            assert s.predicted_ttft_s(s.jobs[k], i * 0.0001) <= 0.2
    assert len(s.queue) + len(s.running) < 20                      # the rest were shed at once


def test_shed_requests_behind_do_not_count_late_ones_ahead():
    """A late request is left out of the forecast, so the ones behind it are judged on the real load."""
    s = sched(max_running=1, ttft_budget_s=0.25)
    s.submit(job("a", prompt_tokens=100, key="r"), 0.0)
    s.progress("r", 1)                                           # r frees at 0.09
    s.submit(job("b", prompt_tokens=100, key="b"), 0.0)          # first token at 0.1, frees at 0.2
    late = s.submit(job("c", prompt_tokens=1500, key="c"), 0.0)  # 0.2 + 0.15 → late
    assert ends(late) == {"c": (Reason.SHED, False)}
    # d: 0.2 + 0.005 fits; had c's load (it frees at 0.45) been counted, d would be late too
    assert ends(s.submit(job("d", prompt_tokens=50, key="d"), 0.0)) == {}
    assert s.predicted_ttft_s(s.jobs["d"], 0.0) == pytest.approx(0.205)


def test_lateness_is_a_high_quantile_of_actual_over_forecast_once_there_are_enough_samples():
    late = Lateness(window=10, quantile=0.9, min_samples=4)
    for _ in range(3):
        late.observe(0.2, 0.1)
    assert late.factor == 1.0                                    # too few samples to say
    late.observe(0.2, 0.1)
    assert late.factor == pytest.approx(2.0)
    for _ in range(10):                                          # the old samples leave the window
        late.observe(0.05, 0.1)
    assert late.factor == pytest.approx(0.5)
    assert len(late.ratios) == 10
    one = Lateness(min_samples=1)
    one.observe(10.0, 0.0)                                       # a ~0 forecast counts as floor_s; kept ≤ 4
    assert one.ratios[0] == pytest.approx(1000.0) and one.factor == 4.0


def test_first_tokens_later_than_forecast_make_the_scheduler_shed_sooner():
    s = sched(max_running=4, ttft_budget_s=0.2)
    assert starts(s.submit(job("a", prompt_tokens=1500, key="a"), 0.0)) == ["a"]   # forecast: first at 0.15 s
    s.first_token("a", 0.3)                                      # it came twice as late
    assert list(s.lateness.ratios) == [pytest.approx(2.0)]
    s.first_token("a", 0.4)                                      # one sample per request
    assert len(s.lateness.ratios) == 1
    s.finished("a", 0.3)
    # c would fit (0.15 + 0.04 s) on the forecast alone, as in the test above; 2× later it does not
    for _ in range(7):
        s.lateness.observe(0.3, 0.15)
    assert s.lateness.factor == pytest.approx(2.0)
    s.submit(job("a", prompt_tokens=1500, key="a2"), 1.0)
    acts = s.submit(job("c", prompt_tokens=400, key="c"), 1.0)
    assert ends(acts) == {"c": (Reason.SHED, False)}
    assert starts(s.submit(job("d", prompt_tokens=40, key="d"), 1.0)) == []      # (0.15 + 0.004) × 2 > 0.2
    s2 = sched(max_running=4, ttft_budget_s=0.2)
    s2.lateness.min_samples = 1
    s2.lateness.observe(0.1, 0.2)                                 # earlier than forecast: shed less
    s2.submit(job("a", prompt_tokens=1500, key="a"), 0.0)
    assert starts(s2.submit(job("b", prompt_tokens=1500, key="b"), 0.0)) == ["b"]  # 0.3 s × 0.5 fits


def test_the_prefill_forecast_is_a_fixed_step_plus_the_prompt_at_a_rate():
    """Short prompts cost the engine's step, not their length: a rate alone (tokens / seconds) would be
    short for them and long for long ones, and the lateness ratio would learn the short prompts' error."""
    r = RateModel(prefill_tok_s=20_000.0)
    for t in (10, 600, 40, 1500, 200, 900, 20, 300) * 2:
        r.observe_prefill(t, 0.05 + t / 2000)              # a 50 ms step, then 2,000 tokens/s
    assert r.step_s == pytest.approx(0.05, rel=0.05) and r.prefill_tok_s == pytest.approx(2000, rel=0.05)
    assert r.prefill_s(20) == pytest.approx(0.06, rel=0.05)
    late = Lateness(min_samples=1)
    for t in (10, 600, 40, 1500):
        late.observe(0.05 + t / 2000, r.prefill_s(t))
    assert late.factor == pytest.approx(1.0, abs=0.05)
    same = RateModel(prefill_tok_s=1000.0)
    for _ in range(8):
        same.observe_prefill(500, 1.0)                      # all one length: the window's tokens/s, step 0
    assert same.step_s == 0.0 and same.prefill_tok_s == pytest.approx(500)
    noisy = RateModel(prefill_tok_s=1000.0)
    for t in (100, 900) * 5:
        noisy.observe_prefill(t, 0.5)                       # not rising with length: no step
    assert noisy.step_s == 0.0 and noisy.prefill_tok_s == pytest.approx(1000)


def test_lateness_scales_the_prefills_not_the_wait_for_a_slot():
    """First tokens come late when prefills share the cores; the wait for a slot is the decode rate's."""
    s = sched(max_running=1, ttft_budget_s=0.2)
    assert starts(s.submit(job("a", prompt_tokens=10, max_tokens=64, key="a"), 0.0)) == ["a"]
    s.progress("a", 54)                                   # 10 of 64 expected: 1 token left
    s.rates.decode_tok_s, s.lateness.factor = 10.0, 4.0   # the slot frees in 0.1 s
    assert ends(s.submit(job("b", prompt_tokens=100, key="b"), 0.0)) == {}      # 0.1 + 4 × 0.01 s fits
    assert s.predicted_ttft_s(s.jobs["b"], 0.0) == pytest.approx(0.11)           # (× 4 whole: 0.44, shed)
    s.rates.decode_tok_s = 5.0                            # now the slot frees in 0.2 s: late whatever the factor
    assert ends(s.tick(0.0)) == {"b": (Reason.SHED, False)}


def test_a_running_prefetch_does_not_make_a_normal_request_late():
    s = sched(max_running=2, ttft_budget_s=0.2, prefetch_share=1.0)
    assert starts(s.submit(job("p", prompt_tokens=100, prefetch=True, key="p"), 0.0)) == ["p"]
    s.progress("p", 1)
    s.lateness.factor = 4.0
    # 3,000 tokens: 0.3 s to prefill, late on any forecast; but the engine does nothing that will not give way
    assert starts(s.submit(job("a", prompt_tokens=3000, key="a"), 0.0)) == ["a"]


def test_shedding_disabled_queues_everything():
    s = sched(max_running=1, shed_enabled=False)
    for i in range(50):
        assert ends(s.submit(job(f"u{i}", prompt_tokens=1500, key=i), 0.0)) == {}
    assert len(s.queue) == 49 and s.tick(10.0) == []


# ── prefetch ───────────────────────────────────────────────────────────────────────────────────────────────

def test_prefetch_starts_only_on_spare_capacity():
    s = sched(max_running=4, prefetch_share=0.5)                # prefetches only below 2 running
    s.submit(job("a", key="a"), 0.0)
    s.submit(job("b", key="b"), 0.0)
    acts = s.submit(job("c", prefetch=True, prompt_tokens=10, key="p"), 0.0)
    assert starts(acts) == [] and "p" in s.queue
    assert starts(s.finished("a", 0.01)) == ["p"]                # back under the share: it starts
    assert s.running["p"].prefetch


def test_a_queued_normal_request_starts_before_any_queued_prefetch():
    s = sched(max_running=1, prefetch_share=1.0, ttft_budget_s=10.0)
    s.submit(job("a", key="a"), 0.0)
    s.submit(job("p", prefetch=True, key="p"), 0.001)
    s.submit(job("n", key="n"), 0.002)
    assert starts(s.finished("a", 0.01)) == ["n"]
    assert starts(s.finished("n", 0.02)) == ["p"]


def test_a_running_prefetch_is_evicted_when_a_normal_request_needs_its_slot():
    s = sched(max_running=1, prefetch_share=1.0)
    assert starts(s.submit(job("a", prefetch=True, key="p"), 0.0)) == ["p"]
    acts = s.submit(job("b", key="n"), 0.01)
    assert ends(acts) == {"p": (Reason.SHED, True)}               # aborted in the engine
    assert starts(acts) == ["n"]
    assert acts.index(End("p", Reason.SHED, True)) < acts.index(Start("n", 0))  # slot freed before reuse


def test_engine_priority_follows_the_order():
    s = sched(max_running=4)
    acts = s.submit(job("a", key="n"), 0.0) + s.submit(job("b", prefetch=True, key="p"), 0.0)
    assert {a.key: a.engine_priority for a in acts if isinstance(a, Start)} == {"n": 0, "p": 1}


# ── fairness ───────────────────────────────────────────────────────────────────────────────────────────────

class VirtualEngine:
    """Serves each started job in `service_s`, in virtual time; the test drives the event loop."""

    def __init__(self, s: Scheduler, service_s: float):
        self.s, self.service_s = s, service_s
        self.done_at: list[tuple[float, object]] = []
        self.started: dict = {}
        self.ended: dict = {}

    def apply(self, actions, now: float) -> None:
        for a in actions:
            if isinstance(a, Start):
                self.started[a.key] = now
                heapq.heappush(self.done_at, (now + self.service_s, a.key))
            else:
                self.ended[a.key] = a.reason

    def run_until(self, t: float) -> None:
        while self.done_at and self.done_at[0][0] <= t:
            when, key = heapq.heappop(self.done_at)
            if key in self.s.running:
                self.ended[key] = "finished"
                self.apply(self.s.finished(key, when), when)


@pytest.mark.parametrize("max_running", [1, 2])
def test_a_fast_typist_cannot_starve_other_users(max_running):
    s = sched(max_running=max_running, ttft_budget_s=0.5)
    eng = VirtualEngine(s, service_s=0.08)
    events = [(i * 0.010, "typist", f"t{i}") for i in range(300)]                 # a keystroke every 10 ms
    events += [(0.005 + i * 0.150, f"u{i % 3}", f"o{i}") for i in range(20)]     # three others, now and then
    arrivals = {}
    for t, user, key in sorted(events):
        eng.run_until(t)
        arrivals[key] = t
        eng.apply(s.submit(job(user, prompt_tokens=200, key=key), t), t)
    eng.run_until(1e9)
    others = [k for k in arrivals if k.startswith("o")]
    assert all(eng.ended[k] == "finished" for k in others)                      # none shed, none superseded
    waits = [eng.started[k] - arrivals[k] for k in others]
    # a typist's keystroke frees its slot (its old request is superseded) within 10 ms; with slots to spare
    # the others never wait at all
    assert max(waits) <= 0.010 + 1e-9
    assert eng.ended["t299"] == "finished"
    assert sum(1 for k in arrivals if k.startswith("t") and eng.ended[k] == Reason.SUPERSEDED) == 299


# ── ends exactly once; fifo ────────────────────────────────────────────────────────────────────────────────

def test_every_request_ends_exactly_once():
    s = sched(max_running=2)
    seen: dict = {}
    keys = []
    for i in range(40):
        k = f"k{i}"
        keys.append(k)
        for a in s.submit(job(f"u{i % 5}", prefetch=i % 7 == 0, prompt_tokens=100 * (i % 4 + 1), key=k), i * 0.01):
            if isinstance(a, End):
                seen[a.key] = seen.get(a.key, 0) + 1
        if i % 3 == 0 and s.running:
            k_done = next(iter(s.running))
            seen[k_done] = seen.get(k_done, 0) + 1
            s.finished(k_done, i * 0.01)
        if i % 11 == 0:
            for a in s.cancel(keys[i // 2], i * 0.01):
                if isinstance(a, End):
                    seen[a.key] = seen.get(a.key, 0) + 1
    while s.jobs:
        for k in list(s.running):
            seen[k] = seen.get(k, 0) + 1
            s.finished(k, 10.0)
        for a in s.tick(10.0):
            if isinstance(a, End):
                seen[a.key] = seen.get(a.key, 0) + 1
    assert seen == {k: 1 for k in keys}
    assert not s.queue and not s.running and not s.by_user


def test_fifo_mode_passes_everything_through():
    s = sched(mode="fifo", max_running=1, per_user_inflight=1)
    acts = []
    for i in range(20):
        acts += s.submit(job("a", prefetch=i % 2 == 1, prompt_tokens=1500, key=i), i * 0.001)
    assert [a for a in acts if isinstance(a, End)] == []
    assert starts(acts) == list(range(20))                       # all at once, in arrival order
    assert s.tick(5.0) == [] and len(s.running) == 20
    assert s.cancel(3, 5.0) == [End(3, Reason.CANCELLED, True)]


def test_fifo_with_an_admission_cap_answers_busy_at_once_and_keeps_arrival_order():
    s = sched(mode="fifo", admit_cap=3)
    acts = []
    for i in range(5):
        acts += s.submit(job(f"u{i}", prompt_tokens=1500, key=i), i * 0.001)
    assert starts(acts) == [0, 1, 2]                            # vLLM queues them in this order (one priority)
    assert ends(acts) == {3: (Reason.SHED, False), 4: (Reason.SHED, False)}
    assert {a.engine_priority for a in acts if isinstance(a, Start)} == {0}
    s.finished(0, 0.5)
    assert starts(s.submit(job("u9", key=9), 0.5)) == [9] and len(s.running) == 3


def test_priority_mode_hands_everything_to_vllm_newest_first():
    s = sched(mode="priority", max_running=1)
    acts = []
    for i in range(4):
        acts += s.submit(job("a" if i < 2 else f"u{i}", prefetch=i == 3, key=i), i * 0.001)
    prio = {a.key: a.engine_priority for a in acts if isinstance(a, Start)}
    assert set(prio) == {0, 1, 2, 3} and not ends(acts)          # no supersede, no slots of its own: vLLM's
    assert sorted(prio, key=prio.get) == [2, 1, 0, 3]            # lower first: newest normal first, prefetch last
    assert s.tick(10.0) == []


# ── property test over random event sequences: invariants 2, 3 and 6 ───────────────────────────────────────

op = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, 3), st.booleans(), st.integers(1, 2000), st.integers(1, 64)),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("progress"), st.integers(0, 50), st.integers(1, 64)),
    st.tuples(st.just("cancel"), st.integers(0, 80)),
    st.tuples(st.just("tick"), st.floats(0.0, 0.3)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=80), max_running=st.integers(1, 4), cap=st.integers(1, 3),
       share=st.sampled_from([0.25, 0.5, 1.0]), budget=st.sampled_from([0.05, 0.2, 5.0]))
def test_invariants_hold_over_random_event_sequences(ops, max_running, cap, share, budget):
    s = sched(max_running=max_running, per_user_inflight=cap, prefetch_share=share, ttft_budget_s=budget)
    prefetch_cap = max(1, int(max_running * share))
    state: dict[int, str] = {}           # key → queued | running | ended (the caller's view)
    ends_seen: dict[int, int] = {}
    info: dict[int, Job] = {}
    now = 0.0

    def apply(actions):
        started_prefetch = False
        for a in actions:
            assert a.key in state, "an action for a request that was never submitted"
            if isinstance(a, Start):
                assert state[a.key] == "queued", "started twice, or after it ended"
                assert a.engine_priority == (1 if info[a.key].prefetch else 0)
                state[a.key] = "running"
                started_prefetch |= info[a.key].prefetch
            else:
                assert state[a.key] != "ended", f"{a.key} ended twice"
                assert a.was_running == (state[a.key] == "running")
                state[a.key] = "ended"
                ends_seen[a.key] = ends_seen.get(a.key, 0) + 1
        # invariant 2: per-user cap
        per_user: dict[str, int] = {}
        for k, st_ in state.items():
            if st_ != "ended":
                per_user[info[k].user] = per_user.get(info[k].user, 0) + 1
        assert all(n <= cap for n in per_user.values())
        # invariant 3: slots; normals before prefetches; prefetches only on spare capacity
        running = [k for k, v in state.items() if v == "running"]
        assert len(running) <= max_running
        queued_normal = any(v == "queued" and not info[k].prefetch for k, v in state.items())
        if queued_normal:
            assert len(running) == max_running and not any(info[k].prefetch for k in running)
        if started_prefetch:
            assert not queued_normal and len(running) <= prefetch_cap
        # the scheduler's own view agrees with the caller's
        assert set(s.running) == set(running)
        assert set(s.queue) == {k for k, v in state.items() if v == "queued"}

    next_key = 0
    for o in ops:
        if o[0] == "submit":
            _, user, prefetch, prompt, max_tokens = o
            j = Job(next_key, f"u{user}", prompt, max_tokens, prefetch=prefetch)
            info[next_key], state[next_key] = j, "queued"
            next_key += 1
            apply(s.submit(j, now))
            if not prefetch:   # invariant 1, as a bonus: nothing older of that user is live
                assert all(v == "ended" for k, v in state.items() if info[k].user == j.user and k < j.key)
        elif o[0] == "finish":
            running = [k for k, v in state.items() if v == "running"]
            if running:
                k = running[o[1] % len(running)]
                state[k] = "ended"
                ends_seen[k] = ends_seen.get(k, 0) + 1
                apply(s.finished(k, now))
        elif o[0] == "progress":
            running = [k for k, v in state.items() if v == "running"]
            if running:
                s.progress(running[o[1] % len(running)], o[2])
        elif o[0] == "cancel":
            acts = s.cancel(o[1], now)                # may name an ended or unknown request: a no-op
            if o[1] not in state or state[o[1]] == "ended":
                assert acts == []
            apply(acts)
        else:
            now += o[1]
            apply(s.tick(now))
    # drain: the engine finishes whatever runs; queued requests start or are shed; nothing is left behind
    for _ in range(10 * (len(state) + 1)):
        running = [k for k, v in state.items() if v == "running"]
        if not running and not s.queue:
            break
        for k in running:
            state[k] = "ended"
            ends_seen[k] = ends_seen.get(k, 0) + 1
            apply(s.finished(k, now))
        now += 0.01
        apply(s.tick(now))
    # invariant 6: every submitted request ended exactly once, and the scheduler holds nothing
    assert ends_seen == {k: 1 for k in state}
    assert not s.jobs and not s.queue and not s.running and not s.by_user


def test_the_rate_model_follows_the_engine_but_one_outlier_moves_it_at_most_4x():
    r = RateModel(prefill_tok_s=1000.0, decode_tok_s=20.0, output_fill=0.5)
    r.observe_prefill(1500, 1e-5)                         # two prefills batched in one step: a bogus sample
    assert r.prefill_tok_s == pytest.approx(1000 + 0.2 * (4000 - 1000))
    for _ in range(r.fit_window):                          # (until it leaves the prefill line's window)
        r.observe_prefill(3000, 1.0)
        r.observe_decode(50, 1.0)
        r.observe_output(64, 64)                          # every request runs to max_tokens
    assert r.prefill_tok_s == pytest.approx(3000, rel=0.01)
    assert r.decode_tok_s == pytest.approx(50, rel=0.01) and r.output_fill == pytest.approx(1.0, abs=0.01)


def test_slot_waits_use_each_running_requests_own_max_tokens():
    s = sched(max_running=1, ttft_budget_s=5.0)
    s.rates.output_fill = 1.0                             # requests run to max_tokens
    s.submit(job("a", prompt_tokens=100, max_tokens=8, key="short"), 0.0)
    s.progress("short", 1)
    b = job("b", prompt_tokens=100, key="b")
    s.submit(b, 0.0)
    assert s.predicted_ttft_s(b, 0.0) == pytest.approx(7 / 100 + 0.01)   # 7 tokens left at 100/s, then prefill
    s.cancel("b", 0.0)
    s.finished("short", 0.0)
    s.submit(job("a", prompt_tokens=100, max_tokens=64, key="long"), 0.0)
    s.progress("long", 1)
    c = job("c", prompt_tokens=100, key="c")
    s.submit(c, 0.0)
    assert s.predicted_ttft_s(c, 0.0) == pytest.approx(63 / 100 + 0.01)


def test_only_an_idle_engine_serves_a_prompt_slower_than_the_budget():
    s = sched(max_running=4, ttft_budget_s=0.2)
    s.submit(job("a", prompt_tokens=100, key="a"), 0.0)
    s.progress("a", 1)                                     # a decodes: the engine is busy, three slots free
    acts = s.submit(job("b", prompt_tokens=5000, key="b"), 0.0)   # 0.5 s of prefill > 0.2 s
    assert ends(acts) == {"b": (Reason.SHED, False)}
    s.finished("a", 0.05)
    assert starts(s.submit(job("c", prompt_tokens=5000, key="c"), 0.05)) == ["c"]   # idle: served anyway


def test_a_prefill_that_overran_its_estimate_still_counts():
    s = sched(max_running=2, ttft_budget_s=5.0)
    s.submit(job("a", prompt_tokens=1000, key="a"), 0.0)     # estimated 0.1 s of prefill
    b = job("b", prompt_tokens=100, key="b")
    s.submit(b, 0.3)                                       # a is 0.2 s late: expect another 0.025 s
    assert "b" in s.running
    c = job("c", prompt_tokens=100, key="c")
    s.submit(c, 0.3)
    # c waits for a slot: a frees at 0.3 + 0.025 + 10 tokens/100; b's first at 0.335 and frees at 0.435
    assert s.predicted_ttft_s(c, 0.3) == pytest.approx(0.125 + 0.01)
