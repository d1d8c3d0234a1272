"""Admission scheduling in front of vLLM: pure logic over plain data and a caller-supplied clock.

Invariants (checked with virtual time by tests/backend/test_scheduler.py, and over random interleavings of
submits, cancels, disconnects, engine finishes and failures by tests/backend/test_scheduler_stateful.py):
  1. Per user, a NORMAL request supersedes every older live request of that user (queued or running); a
     PREFETCH supersedes only the user's older prefetches. Superseded requests end with `superseded`, and a
     running one is aborted in the engine (the caller acts on `End(..., was_running=True)`).
  2. A user never has more than `per_user_inflight` (≥ 1) live requests. Given 1., a user holds at most one
     normal and one prefetch request; a prefetch never displaces a normal one, so over the cap (a cap of 1)
     the new prefetch itself is shed.
  3. At most `max_running` requests are in the engine. A queued NORMAL request always starts before any
     queued PREFETCH; prefetches start only while the engine is below `prefetch_share` of its slots, and a
     running prefetch is evicted (`shed`) when a normal request is waiting for its slot.
  4. Queued normal requests start in arrival order across users. Since each user has at most one live
     normal request (1.), one fast typist holds at most one place in the queue and cannot starve others.
  5. A request whose predicted time to first token (time waited, plus the wait for a slot, plus the prefill
     of the requests ahead of it and its own, each an engine step plus its prompt at the measured rate:
     quickcode/backend/rates.py) exceeds the TTFT budget is answered
     with an empty completion (`shed`), at admission or later while it waits: the queue never grows past
     what can be served within the budget. The prediction simulates the slots: running requests free
     theirs after their expected remaining tokens, queued ones take the earliest free slot in start order,
     and prefills run one after another (the engine's compute is shared); a prefill that overruns its
     estimate is expected to need another quarter of it. The prefills from the request's slot on are
     scaled by how late the first tokens of recently admitted requests came against their forecast
     (`Lateness`: prefills beside decoding sequences, batching). Only a request that finds the engine
     idle (nothing running but prefetches, which give way to it) is never shed: an idle engine serves even
     a prompt slower than the budget.
  6. Every submitted request ends exactly once (one `End`, or the caller's own `finished`/`cancel`).
The baselines (`quickcode bench overload`) pass every request to the engine at once, and none of this applies:
`fifo` in arrival order (one engine priority), `priority` with vLLM's priorities newest first (vLLM's own
scheduler orders its waiting queue by them). In both, `admit_cap` > 0 answers a request over that many live
ones `shed` at once (a bounded queue that says "busy").
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from typing import Hashable

from quickcode.backend.rates import Lateness, RateModel

Key = Hashable
PASS_THROUGH = ("fifo", "priority")   # modes that hand every request to the engine at once
PREFETCH_BAND = 1 << 40               # `priority` mode: each prefetch's engine priority is above the normals'


class Reason(StrEnum):
    SUPERSEDED = "superseded"
    SHED = "shed"
    CANCELLED = "cancelled"


@dataclass
class Job:
    key: Key
    user: str
    prompt_tokens: int
    max_tokens: int
    prefetch: bool = False
    arrival_s: float = 0.0
    seq: int = 0                     # arrival order, assigned by the scheduler
    running: bool = False
    started_s: float | None = None
    generated: int = 0               # tokens so far (running jobs), for the slot-wait estimate
    forecast_first_s: float | None = None   # its first token as forecast when it was admitted


@dataclass(frozen=True)
class Start:
    key: Key
    engine_priority: int             # vLLM `priority=` (lower first): normal 0, prefetch 1 (`priority`: -seq)


@dataclass(frozen=True)
class End:
    key: Key
    reason: Reason
    was_running: bool                # True: the engine request must be aborted


Action = Start | End


@dataclass
class SchedulerConfig:
    mode: str = "latency"            # "latency" | "fifo" | "priority"
    max_running: int = 4
    per_user_inflight: int = 2
    ttft_budget_s: float = 0.2
    prefetch_share: float = 0.5
    shed_enabled: bool = True
    admit_cap: int = 0               # fifo/priority: live requests beyond it are shed at once (0: no cap)


class Scheduler:
    def __init__(self, cfg: SchedulerConfig, rates: RateModel | None = None,
                 lateness: Lateness | None = None):
        self.cfg = cfg
        self.rates = rates or RateModel()
        self.lateness = lateness or Lateness()
        self.jobs: dict[Key, Job] = {}
        self.queue: OrderedDict[Key, Job] = OrderedDict()   # waiting, arrival order
        self.running: dict[Key, Job] = {}
        self.by_user: dict[str, OrderedDict[Key, Job]] = {}
        self._seq = 0

    # ── queries
    @property
    def queued_prompt_tokens(self) -> int:
        return sum(j.prompt_tokens for j in self.queue.values())

    def predicted_ttft_s(self, job: Job, now: float) -> float:
        """Predicted time from `job`'s arrival to its first token (see invariant 5); 0 if it is not queued."""
        first = self._forecast(now)[0].get(job.key)
        return 0.0 if first is None else first - job.arrival_s

    def _expected_tokens(self, job: Job) -> float:
        """Tokens `job` will still generate: the measured share of max_tokens, at least one more."""
        total = min(float(job.max_tokens), max(self.rates.output_fill * job.max_tokens, job.generated + 1.0))
        return max(1.0, total - job.generated)

    def _forecast(self, now: float, budget_s: float | None = None) -> tuple[dict[Key, float], list[Job]]:
        """Predicted first-token time of every queued job, simulating the slots in start order (normals in
        arrival order, then prefetches), and — given `budget_s` — the jobs that will miss it (the prefills
        from its slot on scaled by `lateness.factor`; the wait for a slot comes from the decode rate, measured
        as such). A late job is left out of the simulation (it will be
        shed), so its load does not count for the jobs behind it. A normal job that finds the engine idle (or
        running prefetches only) is never late: an idle engine serves even a slow prompt."""
        r = self.rates
        frees: list[float] = []          # when each slot frees up
        prefill_free = now               # when the engine is done with the prefills already under way
        for j in self.running.values():
            if j.prefetch:               # evicted as soon as a normal request waits for its slot
                frees.append(now)
                continue
            first = now
            if j.generated == 0:         # still in prefill; one that overran its estimate needs a bit more
                estimate = r.prefill_s(j.prompt_tokens)
                elapsed = now - (now if j.started_s is None else j.started_s)
                prefill_free += max(estimate - elapsed, 0.25 * estimate)
                first = prefill_free
            frees.append(first + self._expected_tokens(j) / r.decode_tok_s)
        frees += [now] * max(0, self.cfg.max_running - len(frees))
        heapq.heapify(frees)
        idle = all(j.prefetch for j in self.running.values())   # (a running prefetch gives way)
        firsts: dict[Key, float] = {}
        late: list[Job] = []
        order = ([j for j in self.queue.values() if not j.prefetch]
                 + [j for j in self.queue.values() if j.prefetch])
        for j in order:
            slot = max(frees[0], now)
            begin = max(slot, prefill_free)
            first = begin + r.prefill_s(j.prompt_tokens)
            firsts[j.key] = first
            if (budget_s is not None and slot + (first - slot) * self.lateness.factor - j.arrival_s > budget_s
                    and (j.prefetch or begin > now or not idle)):
                late.append(j)
                continue
            prefill_free = first
            heapq.heapreplace(frees, first + self._expected_tokens(j) / r.decode_tok_s)
        return firsts, late

    # ── events
    def submit(self, job: Job, now: float) -> list[Action]:
        self._seq += 1
        job.seq, job.arrival_s = self._seq, now
        self.jobs[job.key] = job
        self.by_user.setdefault(job.user, OrderedDict())[job.key] = job
        self.queue[job.key] = job
        if self.cfg.mode in PASS_THROUGH:
            if 0 < self.cfg.admit_cap < len(self.jobs):
                return [self._end(job, Reason.SHED)]
            return self._start_ready(now)
        actions: list[Action] = []
        older = [j for j in self.by_user[job.user].values()
                 if j is not job and (not job.prefetch or j.prefetch)]
        for j in older:
            actions.append(self._end(j, Reason.SUPERSEDED))
        # After 1. the user has this job and at most one older normal (when this job is a prefetch).
        if len(self.by_user[job.user]) > max(1, self.cfg.per_user_inflight):
            return actions + [self._end(job, Reason.SHED)]   # a prefetch never displaces a normal request
        firsts, late = self._forecast(now, self.cfg.ttft_budget_s if self.cfg.shed_enabled else None)
        actions += [self._end(j, Reason.SHED) for j in late]
        if job.key in self.queue and not job.prefetch:   # (the late left the forecast as they left the queue)
            job.forecast_first_s = firsts.get(job.key)
        return actions + self._start_ready(now)

    def cancel(self, key: Key, now: float) -> list[Action]:
        job = self.jobs.get(key)
        if job is None:
            return []
        return [self._end(job, Reason.CANCELLED), *self._start_ready(now)]

    def first_token(self, key: Key, now: float) -> None:
        """`key`'s first token came at `now`: how late it was against its admission forecast."""
        job = self.running.get(key)
        if job is not None and job.forecast_first_s is not None:
            self.lateness.observe(now - job.arrival_s, job.forecast_first_s - job.arrival_s)
            job.forecast_first_s = None

    def progress(self, key: Key, tokens: int) -> None:
        job = self.running.get(key)
        if job is not None:
            job.generated = tokens

    def finished(self, key: Key, now: float) -> list[Action]:
        """The engine ended `key` by itself (stop, length, error): free its slot."""
        job = self.jobs.get(key)
        if job is not None:
            self._forget(job)
        return self._start_ready(now)

    def tick(self, now: float) -> list[Action]:
        """Shed queued requests that can no longer get a first token within the budget."""
        if self.cfg.mode in PASS_THROUGH or not self.cfg.shed_enabled:
            return self._start_ready(now)
        return self._shed_late(now) + self._start_ready(now)

    # ── internals
    def _shed_late(self, now: float) -> list[Action]:
        """End (shed) every queued job predicted to miss the TTFT budget (see `_forecast`)."""
        return [self._end(j, Reason.SHED) for j in self._forecast(now, self.cfg.ttft_budget_s)[1]]

    def _start_ready(self, now: float) -> list[Action]:
        actions: list[Action] = []
        if self.cfg.mode in PASS_THROUGH:
            for job in list(self.queue.values()):
                actions.append(self._start(job, now))
            return actions
        for job in [j for j in self.queue.values() if not j.prefetch]:
            if len(self.running) >= self.cfg.max_running:
                victim = next((j for j in self.running.values() if j.prefetch), None)
                if victim is None:
                    break
                actions.append(self._end(victim, Reason.SHED))
            actions.append(self._start(job, now))
        prefetch_cap = max(1, int(self.cfg.max_running * self.cfg.prefetch_share))
        if not any(not j.prefetch for j in self.queue.values()):
            for job in [j for j in self.queue.values() if j.prefetch]:
                if len(self.running) >= prefetch_cap:
                    break
                actions.append(self._start(job, now))
        return actions

    def _start(self, job: Job, now: float) -> Start:
        del self.queue[job.key]
        job.running, job.started_s = True, now
        self.running[job.key] = job
        return Start(job.key, self._engine_priority(job))

    def _engine_priority(self, job: Job) -> int:
        if self.cfg.mode == "priority":     # newest first, every prefetch after every normal request
            return (PREFETCH_BAND if job.prefetch else 0) - job.seq
        return 1 if job.prefetch else 0

    def _end(self, job: Job, reason: Reason) -> End:
        was_running = job.running
        self._forget(job)
        return End(job.key, reason, was_running)

    def _forget(self, job: Job) -> None:
        self.jobs.pop(job.key, None)
        self.queue.pop(job.key, None)
        self.running.pop(job.key, None)
        user_jobs = self.by_user.get(job.user)
        if user_jobs is not None:
            user_jobs.pop(job.key, None)
            if not user_jobs:
                del self.by_user[job.user]
