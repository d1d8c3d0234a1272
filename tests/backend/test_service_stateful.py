"""The completion service's request lifecycle over random interleavings (hypothesis stateful testing), on the
`FakeEngine` and a `ManualClock`: what the scheduler's own machine (test_scheduler_stateful.py) cannot see —
frames, engine aborts, disconnects and engine failures.

Three users with two sessions each submit normal and prefetch requests (a user with live requests supersedes
them), cancel (live, ended and unknown ids), disconnect (the session reconnects under a new id); the engine
writes tokens as virtual time advances and finishes by itself, fails one request, or dies. Checked after every
step, on the frames each session's sink received and on what the engine reports:
  * every accepted request gets exactly one terminal frame, no frame after it, and only in its own session;
  * a request ended for any reason but the engine finishing it is aborted in the engine; nothing runs in the
    engine for a request the service no longer has, and never more than `max_running` at once;
  * one user's actions end only that user's requests (a submit: `superseded` for its older ones; a cancel or
    disconnect: `cancelled` for exactly the ids named), and an engine failure only the failed request;
  * each user's newest request is served before the older ones: no request is answered (`stop`/`length`) after
    a newer normal request of its user was accepted (a prefetch: a newer prefetch);
  * when everything has ended the service, its scheduler and the engine hold nothing.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import time

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from quickcode.backend.fake_engine import FakeEngine, ManualClock
from quickcode.backend.service import CompletionService
from quickcode.protocol import Chunk, Complete, Done, Error, ErrorCode, FinishReason, Priority, ProtocolError
from tests.conftest import fake_settings

USERS = ("u0", "u1", "u2")
SLOTS = tuple(f"{u}/s{i}" for u in USERS for i in (0, 1))     # a user's editors; each reconnects under a new id
PREFIXES = ("import os\n", "def f(x):\n    ", "class A:\n    def g(self):\n        ", "x = [")
TOKEN_S = 0.01                                                 # the engine's time to the first and each next token
TERMINAL = (Done, Error)


@functools.cache
def loaded_engine() -> FakeEngine:
    """One started engine whose tokenizer and template every example's engine takes (loaded once)."""
    engine = FakeEngine(fake_settings())
    engine.start()
    return engine


class Sink:
    def __init__(self, session_id: str):
        self.session_id = session_id
        self.frames: list = []

    def send(self, msg) -> None:
        self.frames.append(msg)


class ServiceMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.svc: CompletionService | None = None
        self.engine: FakeEngine | None = None
        self.generation = dict.fromkeys(SLOTS, 0)
        self.sinks: dict[str, Sink] = {}                  # session id → its sink (closed ones stay, to check)
        self.accepted: dict[tuple[str, str], dict] = {}  # (session, id) → user, prefetch, order of acceptance
        self.order = itertools.count()
        self.seen: dict[tuple[str, str], int] = {}       # frames already checked per request

    @initialize(max_running=st.integers(1, 3), cap=st.integers(1, 2), share=st.sampled_from([0.5, 1.0]),
                tokens=st.integers(1, 6))
    def start(self, max_running, cap, share, tokens):
        # no shedding by time here (the service reads the wall clock): the scheduler's machine checks it
        s = fake_settings(max_running=max_running, per_user_inflight=cap, prefetch_max_running_share=share,
                          ttft_budget_ms=1e9, rate_limit_per_s=1e6, rate_limit_burst=10 ** 6)
        self.engine = FakeEngine(s, script=lambda prompt: [f" t{i}" for i in range(tokens)], ttft_s=TOKEN_S,
                                 per_token_s=TOKEN_S, clock=self.clock, max_running=32)
        self.engine.start_like(loaded_engine())
        self.svc = CompletionService(s, self.engine)

    # ── driving the event loop
    def run(self, fn):
        async def go():
            out = fn()
            await self.settle()
            return out
        return self.loop.run_until_complete(go())

    async def settle(self) -> None:
        """Let every task run until nothing moves (no frame, engine state or request task changes for a while)."""
        last, quiet = None, 0
        for _ in range(5000):
            await asyncio.sleep(0)
            now = (sum(len(s.frames) for s in self.sinks.values()),
                   tuple(r.state for r in self.engine.requests.values()),
                   tuple(r.task is None or r.task.done() for r in self.svc.requests.values()))
            quiet = quiet + 1 if now == last else 0
            last = now
            if quiet >= 10:
                return
        raise AssertionError("the service never settled")

    def session(self, slot: str) -> str:
        return f"{slot}#{self.generation[slot]}"

    def sink(self, slot: str) -> Sink:
        sid = self.session(slot)
        return self.sinks.setdefault(sid, Sink(sid))

    def new_terminals(self) -> list[tuple[tuple[str, str], object]]:
        """Terminal frames since the last step (checked: each request's frames are well-formed)."""
        out = []
        for sid, sink in self.sinks.items():
            by_id: dict[str, list] = {}
            for m in sink.frames:
                by_id.setdefault(m.id, []).append(m)
            for rid, frames in by_id.items():
                key = (sid, rid)
                assert key in self.accepted, f"a frame for {rid!r} reached session {sid}, which never sent it"
                ends = [i for i, m in enumerate(frames) if isinstance(m, TERMINAL)]
                assert len(ends) <= 1, f"{key} got {len(ends)} terminal frames"
                assert not ends or ends[0] == len(frames) - 1, f"{key} got a frame after its terminal one"
                if ends and self.seen.get(key, 0) <= ends[0]:
                    out.append((key, frames[ends[0]]))
                self.seen[key] = len(frames)
        return out

    def settled(self, cause: str, **what) -> None:
        """Check the terminal frames this step produced against its cause."""
        for key, m in self.new_terminals():
            info = self.accepted[key]
            info["end"] = m
            if isinstance(m, Error):
                assert m.code == ErrorCode.ENGINE_UNAVAILABLE, m
                assert cause == "die" or (cause == "fail" and key == what["key"]), f"{cause} errored {key}"
                continue
            reason = m.finish_reason
            if reason == FinishReason.SUPERSEDED:
                assert cause == "submit" and info["user"] == what["user"], f"{cause} superseded {key}"
                assert info["prefetch"] or not what["prefetch"], "a prefetch superseded a normal request"
            elif reason == FinishReason.CANCELLED:
                named = key == what.get("key") or key[0] == what.get("sid")
                assert cause in ("cancel", "disconnect") and named, f"{cause} {what} cancelled {key}"
            elif reason == FinishReason.SHED:
                # no shedding by time here: only the per-user cap, or a running prefetch evicted by a normal one
                assert cause == "submit" and (key == what["key"] or info["prefetch"]), f"{cause} shed {key}"
            else:
                assert reason in (FinishReason.STOP, FinishReason.LENGTH), m
                assert cause == "advance", f"{cause} answered {key}"   # the engine writes only as time moves
                newer = [i for i in self.accepted.values() if i["user"] == info["user"] and i["n"] > info["n"]
                         and (not i["prefetch"] or info["prefetch"])]
                assert not newer, f"{key} answered after a newer request of its user"

    # ── rules
    @rule(slot=st.sampled_from(SLOTS), prefetch=st.booleans(), prefix=st.sampled_from(PREFIXES),
          max_tokens=st.integers(1, 8))
    def submit(self, slot, prefetch, prefix, max_tokens):
        user, sid = slot.split("/")[0], self.session(slot)
        rid = f"r{next(self.order)}"
        msg = Complete(id=rid, prefix=prefix, max_tokens=max_tokens,
                       priority=Priority.PREFETCH if prefetch else Priority.NORMAL)
        key = (sid, rid)
        self.accepted[key] = {"user": user, "prefetch": prefetch, "n": int(rid[1:]), "end": None}

        def go():
            try:
                self.svc.submit(self.sink(slot), sid, user, msg, time.perf_counter())
            except ProtocolError as e:       # refused: only by a dead engine here
                assert e.code == ErrorCode.ENGINE_UNAVAILABLE and self.engine.dead, e
                del self.accepted[key]
        self.run(go)
        self.settled("submit", user=user, prefetch=prefetch, key=key)

    @precondition(lambda self: self.accepted)
    @rule(pick=st.integers(0, 100))
    def cancel(self, pick):
        keys = list(self.accepted)
        sid, rid = keys[pick % len(keys)] if pick < 80 else (self.session(SLOTS[pick % len(SLOTS)]), "never-sent")
        self.run(lambda: self.svc.cancel(sid, rid))
        self.settled("cancel", key=(sid, rid))

    @precondition(lambda self: self.accepted)
    @rule(slot=st.sampled_from(SLOTS))
    def disconnect(self, slot):
        sid = self.session(slot)
        self.run(lambda: self.svc.drop_session(sid))
        self.settled("disconnect", sid=sid)
        assert not any(k[0] == sid for k in self.svc.requests)
        self.generation[slot] += 1

    @precondition(lambda self: self.accepted)
    @rule(dt_s=st.sampled_from([TOKEN_S, 2 * TOKEN_S, 10 * TOKEN_S]))
    def advance(self, dt_s):
        self.run(lambda: self.clock.advance(dt_s))
        self.settled("advance")

    @precondition(lambda self: self.engine is not None and self.engine.live)
    @rule(pick=st.integers(0, 10))
    def fail(self, pick):
        req = self.engine.live[pick % len(self.engine.live)]
        sid, _, rid = req.id.rpartition(":")
        self.run(lambda: self.engine.fail(req.id))
        self.settled("fail", key=(sid, rid))

    @precondition(lambda self: self.engine is not None and self.engine.live and not self.engine.dead)
    @rule(really=st.integers(0, 3))
    def die(self, really):
        if really == 0:                      # rarely: after it every submit is refused
            self.run(self.engine.die)
            self.settled("die")

    # ── invariants
    @invariant()
    def engine_holds_only_live_requests_within_the_slots(self):
        if self.svc is None:
            return
        live_ids = {r.engine_id for r in self.svc.requests.values()}
        running = [r for r in self.engine.live if r.state == "running"]
        assert len(running) <= self.svc.sched.cfg.max_running
        assert not self.engine.stats.num_waiting
        orphans = [r.id for r in self.engine.live if r.id not in live_ids]
        assert not orphans, f"engine requests the service no longer has: {orphans}"
        for (sid, rid), info in self.accepted.items():
            end = info["end"]
            reqs = [r for r in self.engine.requests.values() if r.id == f"{sid}:{rid}"]
            if end is None or not reqs:
                continue
            (req,) = reqs
            if isinstance(end, Error):
                assert req.ended_by == "engine_died"
            elif end.finish_reason in (FinishReason.STOP, FinishReason.LENGTH):
                assert req.ended_by is None and req.finish_reason in ("stop", "length")
            else:
                assert req.finish_reason == "abort" or req.ended_by == "engine_died", (end, req)

    @invariant()
    def per_user_cap_and_the_service_and_scheduler_agree(self):
        if self.svc is None:
            return
        assert set(self.svc.requests) == set(self.svc.sched.jobs)
        for u in USERS:
            assert sum(1 for r in self.svc.requests.values() if r.user == u) <= self.svc.sched.cfg.per_user_inflight
        live = {k for k, i in self.accepted.items() if i["end"] is None}
        assert live == set(self.svc.requests), "a request ended without its terminal frame, or the reverse"

    def teardown(self):
        try:
            if self.svc is None:
                return
            for _ in range(200):
                if not self.svc.requests:
                    break
                self.run(lambda: self.clock.advance(10 * TOKEN_S))
                self.settled("advance")
            assert not self.svc.requests and not self.svc.sched.jobs and not self.svc.sched.by_user
            assert not self.engine.live and self.engine.stats.num_running == 0
            assert all(i["end"] is not None for i in self.accepted.values()), "a request never ended"
        finally:
            for t in asyncio.all_tasks(self.loop):
                t.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()


ServiceMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
TestService = ServiceMachine.TestCase
