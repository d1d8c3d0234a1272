"""quickcode/backend/scheduler.py's invariants over random interleavings (hypothesis stateful testing, virtual
time).

A caller model drives the real Scheduler through submits (several users, each with two sessions; normal and
prefetch; a user with live requests supersedes, one without does not), cancels (of live, ended and unknown ids),
disconnects (every live request of a session cancelled, as `CompletionService.drop_session` does), the engine
finishing or failing a running request (the service then calls `finished`), the engine dying (every running
request fails), decode progress and time advancing (the service's ticker: `tick`). Every action the scheduler
returns is checked against the caller's own view, and after every step:
  * at most `max_running` requests in the engine; at most `per_user_inflight` live requests per user, of them
    at most one normal and one prefetch;
  * each user's newest request is served before the user's older ones: no live request has a newer normal
    request of its user behind it (a prefetch: no newer prefetch either), so a superseded request is never
    started again nor answered;
  * one user's actions end only that user's requests — a cancel or disconnect ends exactly the requests named,
    an engine finish ends none; a submit ends the user's older ones (`superseded`), itself (`shed`), or
    another user's prefetch (normal requests go first) — and delay no one beyond the ordering rule: a free
    slot never idles while a normal request waits, normal requests start in arrival order across users,
    prefetches only on spare capacity;
  * no queued request is predicted to miss the TTFT budget (invariant 5), and one that finds the engine idle
    starts at once;
  * the scheduler's queue, running set and per-user table hold exactly the live requests (bounded by users ×
    cap), and are empty once everything has ended; every request ends exactly once.
The baselines' modes (`fifo`, `priority`) run through the same machine: every request starts at once with its
engine priority (`priority`: the newest first, prefetches after), a submit ends at most itself (over
`admit_cap`, which bounds the live requests), and every request still ends exactly once.
"""
from __future__ import annotations

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from quickcode.backend.scheduler import (PASS_THROUGH, PREFETCH_BAND, End, Job, RateModel, Reason, Scheduler, SchedulerConfig,
                                         Start)

USERS = ("u0", "u1", "u2", "u3", "u4", "u5")
SESSIONS = tuple(f"{u}/s{i}" for u in USERS for i in (0, 1))


class SchedulerMachine(RuleBasedStateMachine):
    """The caller's view: `state[key]` is queued | running | ended; `ends[key]` counts terminal events."""

    def __init__(self):
        super().__init__()
        self.s: Scheduler | None = None
        self.now = 0.0
        self.n = 0
        self.jobs: dict[tuple[str, int], Job] = {}       # every job submitted, by key
        self.order: list[tuple[str, int]] = []           # keys in submit order
        self.state: dict[tuple[str, int], str] = {}
        self.ends: dict[tuple[str, int], int] = {}
        self.how: dict[tuple[str, int], str] = {}

    # ── set-up
    @initialize(max_running=st.integers(1, 3), cap=st.integers(1, 3), share=st.sampled_from([0.25, 0.5, 1.0]),
                budget_s=st.sampled_from([0.05, 0.2, 5.0]), shed=st.booleans(),
                mode=st.sampled_from(["latency", "latency", "latency", "fifo", "priority"]),
                admit_cap=st.sampled_from([0, 1, 2, 4]))
    def configure(self, max_running, cap, share, budget_s, shed, mode, admit_cap):
        cfg = SchedulerConfig(mode=mode, max_running=max_running, per_user_inflight=cap, ttft_budget_s=budget_s,
                              prefetch_share=share, shed_enabled=shed, admit_cap=admit_cap)
        rates = RateModel(prefill_tok_s=10_000.0, decode_tok_s=100.0, output_fill=0.25)
        self.s = Scheduler(cfg, rates)

    @property
    def cfg(self) -> SchedulerConfig:
        return self.s.cfg

    @property
    def ours(self) -> bool:
        return self.s is not None and self.cfg.mode not in PASS_THROUGH

    @property
    def prefetch_cap(self) -> int:
        return max(1, int(self.cfg.max_running * self.cfg.prefetch_share))

    def live(self, state: str | None = None) -> list[tuple[str, int]]:
        return [k for k in self.order if (self.state[k] == state if state else self.state[k] != "ended")]

    def user(self, key) -> str:
        return self.jobs[key].user

    # ── applying the scheduler's answer, action by action, against the caller's view
    def apply(self, actions, cause: str, key=None, user: str | None = None) -> None:
        for a in actions:
            assert a.key in self.state, f"an action for a request never submitted: {a}"
            j = self.jobs[a.key]
            if isinstance(a, Start):
                self.check_start(j, a)
                self.state[a.key] = "running"
                continue
            assert isinstance(a, End)
            assert self.state[a.key] != "ended", f"{a.key} ended twice"
            assert a.was_running == (self.state[a.key] == "running"), a
            if cause in ("cancel", "disconnect"):
                assert a.reason == Reason.CANCELLED and a.key == key, f"{cause} of {key} ended {a}"
            elif cause == "finished":
                raise AssertionError(f"an engine finish ended another request: {a}")
            elif cause == "tick":
                assert self.ours and a.reason == Reason.SHED and not a.was_running, a
            elif not self.ours:   # a baseline's submit ends only itself, over the admission cap
                assert a == End(key, Reason.SHED, False) and self.cfg.admit_cap == len(self.live()) - 1, a
            else:   # a submit by `user` of `key`
                if a.reason == Reason.SUPERSEDED:
                    assert j.user == user and j.seq < self.jobs[key].seq, a
                    assert j.prefetch or not self.jobs[key].prefetch, "a prefetch superseded a normal request"
                elif a.reason == Reason.SHED:
                    assert a.key == key or j.prefetch, f"{user}'s submit shed another's normal request {a}"
                else:
                    raise AssertionError(f"a submit cancelled {a}")
            self.finish(a.key, a.reason.value)

    def check_start(self, j: Job, a: Start) -> None:
        assert self.state[j.key] == "queued", f"{j.key} started twice, or after it ended"
        if self.cfg.mode == "priority":        # vLLM orders by it, lower first: the newest first
            assert a.engine_priority == (PREFETCH_BAND if j.prefetch else 0) - j.seq
            assert all(a.engine_priority < self.s._engine_priority(self.jobs[k]) for k in self.live()
                       if self.jobs[k].prefetch == j.prefetch and k != j.key)
            return
        assert a.engine_priority == (1 if j.prefetch else 0)
        if not self.ours:
            return
        running = self.live("running")
        assert len(running) < self.cfg.max_running, "a start past max_running"
        queued_normal = [k for k in self.live("queued") if not self.jobs[k].prefetch]
        if j.prefetch:
            assert not queued_normal, "a prefetch started while a normal request waits"
            assert len(running) < self.prefetch_cap, "a prefetch started past its share of the slots"
            earlier = [k for k in self.live("queued") if self.jobs[k].prefetch and self.jobs[k].seq < j.seq]
        else:
            earlier = [k for k in queued_normal if self.jobs[k].seq < j.seq]
        assert not earlier, f"{j.key} started before the earlier arrivals {earlier}"

    def finish(self, key, how: str) -> None:
        self.state[key] = "ended"
        self.ends[key] = self.ends.get(key, 0) + 1
        self.how[key] = how

    # ── rules
    @rule(session=st.sampled_from(SESSIONS), prefetch=st.booleans(), prompt=st.integers(1, 3000),
          max_tokens=st.integers(1, 64))
    def submit(self, session, prefetch, prompt, max_tokens):
        user = session.split("/")[0]
        key = (session, self.n)
        self.n += 1
        j = Job(key, user, prompt, max_tokens, prefetch=prefetch)
        self.jobs[key], self.state[key] = j, "queued"
        self.order.append(key)
        idle_but_own = not any(self.user(k) != user for k in self.live())   # nothing of anyone else
        actions = self.s.submit(j, self.now)
        self.apply(actions, "submit", key, user)
        if not self.ours:
            assert self.state[key] == "running" or self.how[key] == "shed", "a baseline queued a request"
        elif not prefetch and idle_but_own:
            assert self.state[key] == "running", "a normal request that found the engine idle did not start"

    @precondition(lambda self: self.order)
    @rule(pick=st.integers(0, 200))
    def cancel(self, pick):
        key = self.order[pick % len(self.order)] if self.order and pick < 150 else ("nobody/s0", -pick)
        was_live = key in self.state and self.state[key] != "ended"
        actions = self.s.cancel(key, self.now)
        if not was_live:
            assert actions == [], "a cancel of an ended or unknown id did something"
        else:
            assert End(key, Reason.CANCELLED, self.state[key] == "running") in actions
        self.apply(actions, "cancel", key)

    @precondition(lambda self: self.s is not None and self.s.jobs)
    @rule(session=st.sampled_from(SESSIONS))
    def disconnect(self, session):
        for key in [k for k in self.live() if k[0] == session]:
            if self.state[key] != "ended":
                actions = self.s.cancel(key, self.now)
                assert actions and actions[0] == End(key, Reason.CANCELLED, self.state[key] == "running")
                self.apply(actions, "disconnect", key)
        assert not any(k[0] == session for k in self.s.jobs)

    @precondition(lambda self: self.s is not None and self.s.running)
    @rule(pick=st.integers(0, 10), failed=st.booleans())
    def engine_ends_one(self, pick, failed):
        """The engine finished a running request (stop/length), or it failed in the engine."""
        running = self.live("running")
        key = running[pick % len(running)]
        self.finish(key, "failed" if failed else "answered")
        self.apply(self.s.finished(key, self.now), "finished")

    @precondition(lambda self: self.s is not None and self.s.running)
    @rule()
    def engine_dies(self):
        for key in self.live("running"):
            self.finish(key, "failed")
            self.apply(self.s.finished(key, self.now), "finished")

    @precondition(lambda self: self.s is not None and self.s.running)
    @rule(pick=st.integers(0, 10), tokens=st.integers(1, 8))
    def progress(self, pick, tokens):
        running = self.live("running")
        key = running[pick % len(running)]
        self.s.progress(key, self.s.running[key].generated + tokens)

    @precondition(lambda self: self.order)
    @rule(dt_s=st.sampled_from([0.001, 0.01, 0.05, 0.2, 1.0]))
    def advance(self, dt_s):
        self.now += dt_s
        self.apply(self.s.tick(self.now), "tick")

    # ── invariants after every step
    @invariant()
    def views_agree_and_state_is_bounded(self):
        if self.s is None:
            return
        assert set(self.s.running) == set(self.live("running"))
        assert list(self.s.queue) == self.live("queued")               # the queue keeps arrival order
        assert set(self.s.jobs) == set(self.live())
        users = {self.user(k) for k in self.live()}
        assert set(self.s.by_user) == users, "the per-user table holds a user with nothing live"
        if self.ours:
            assert len(self.s.jobs) <= len(USERS) * max(1, self.cfg.per_user_inflight)
        else:
            assert not self.s.queue, "a baseline holds a queue of its own"
            assert not self.cfg.admit_cap or len(self.s.jobs) <= self.cfg.admit_cap

    @invariant()
    def slots_and_per_user_caps(self):
        if not self.ours:
            return
        assert len(self.live("running")) <= self.cfg.max_running
        for u in USERS:
            mine = [k for k in self.live() if self.user(k) == u]
            assert len(mine) <= max(1, self.cfg.per_user_inflight)
            assert sum(1 for k in mine if not self.jobs[k].prefetch) <= 1
            assert sum(1 for k in mine if self.jobs[k].prefetch) <= 1

    @invariant()
    def newest_first_per_user(self):
        if not self.ours:
            return
        newest: dict[tuple[str, bool], int] = {}       # (user, prefetch) → seq of the user's newest of that kind
        for j in self.jobs.values():
            newest[j.user, j.prefetch] = max(newest.get((j.user, j.prefetch), 0), j.seq)
        for k in self.live():
            j = self.jobs[k]
            assert newest.get((j.user, False), 0) <= j.seq, f"{k} is live behind a newer normal request"
            assert not j.prefetch or newest[j.user, True] == j.seq, f"{k} is live behind a newer prefetch"

    @invariant()
    def no_slot_idles_and_no_queued_request_will_miss_the_budget(self):
        if not self.ours:
            return
        running, queued = self.live("running"), self.live("queued")
        if any(not self.jobs[k].prefetch for k in queued):
            assert len(running) == self.cfg.max_running, "a slot idles while a normal request waits"
            assert not any(self.jobs[k].prefetch for k in running), "a prefetch holds a slot a normal one waits for"
        elif queued:
            assert len(running) >= self.prefetch_cap, "a prefetch waits while its share of the slots is free"
        if self.cfg.shed_enabled:
            assert self.s._forecast(self.now, self.cfg.ttft_budget_s)[1] == [], "a queued request will be late"

    def teardown(self):
        """Drain: the engine finishes what runs, time moves on; then every request has ended exactly once."""
        if self.s is None:
            return
        for _ in range(10 * (len(self.order) + 1)):
            if not self.live():
                break
            for key in self.live("running"):
                self.finish(key, "answered")
                self.apply(self.s.finished(key, self.now), "finished")
            self.now += 0.05
            self.apply(self.s.tick(self.now), "tick")
        assert self.ends == {k: 1 for k in self.order}, "a request ended twice or never"
        assert not self.s.jobs and not self.s.queue and not self.s.running and not self.s.by_user
        superseded = [k for k in self.order if self.how[k] == "superseded"]
        assert not any(self.how[k] == "answered" for k in superseded)


SchedulerMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=50, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
TestScheduler = SchedulerMachine.TestCase
