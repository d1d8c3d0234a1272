"""Admission scheduling in front of vLLM: pure logic over plain data and a caller-supplied clock.

Invariants (checked by tests/test_scheduler.py with virtual time):
  1. Per user, a NORMAL request supersedes every older live request of that user (queued or running); a
     PREFETCH supersedes only the user's older prefetches. Superseded requests end with `superseded`, and a
     running one is aborted in the engine (the caller acts on `End(..., was_running=True)`).
  2. A user never has more than `per_user_inflight` live requests: the oldest give way (superseded).
  3. At most `max_running` requests are in the engine. A queued NORMAL request always starts before any
     queued PREFETCH; prefetches start only while the engine is below `prefetch_share` of its slots, and a
     running prefetch is evicted (`shed`) when a normal request is waiting for its slot.
  4. Queued normal requests start in arrival order across users. Since each user has at most one live
     normal request (1.), one fast typist holds at most one place in the queue and cannot starve others.
  5. A request whose predicted time to first token (queued prompt tokens ahead / measured prefill rate,
     plus the wait for a slot, plus its own prefill) exceeds the TTFT budget is answered at once with an
     empty completion (`shed`), at admission or later while it waits: the queue never grows past what can
     be served within the budget.
  6. Every submitted request ends exactly once (one `End`, or the caller's own `finished`/`cancel`).
In `fifo` mode (the baseline) none of this applies: every request starts at once, in arrival order.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Hashable

Key = Hashable


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


@dataclass(frozen=True)
class Start:
    key: Key
    engine_priority: int             # vLLM `priority=` (lower first): normal 0, prefetch 1


@dataclass(frozen=True)
class End:
    key: Key
    reason: Reason
    was_running: bool                # True: the engine request must be aborted


Action = Start | End


@dataclass
class SchedulerConfig:
    mode: str = "latency"            # "latency" | "fifo"
    max_running: int = 4
    per_user_inflight: int = 2
    ttft_budget_s: float = 0.2
    prefetch_share: float = 0.5
    shed_enabled: bool = True


@dataclass
class RateModel:
    """Measured engine speed (EWMA). Prefill in prompt tokens/s; decode in tokens/s of one running request."""
    prefill_tok_s: float = 20_000.0
    decode_tok_s: float = 100.0
    alpha: float = 0.2
    samples: int = field(default=0)

    def observe_prefill(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            self.prefill_tok_s += self.alpha * (tokens / seconds - self.prefill_tok_s)
            self.samples += 1

    def observe_decode(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            self.decode_tok_s += self.alpha * (tokens / seconds - self.decode_tok_s)


class Scheduler:
    def __init__(self, cfg: SchedulerConfig, rates: RateModel | None = None):
        self.cfg = cfg
        self.rates = rates or RateModel()
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
        """Wait for a slot + prefill of everything queued ahead of `job` + its own prefill."""
        ahead = 0
        for j in self.queue.values():
            if j is job:
                break
            if not j.prefetch:
                ahead += j.prompt_tokens
        slot_wait = 0.0
        busy = len(self.running) - sum(1 for j in self.running.values() if j.prefetch and not job.prefetch)
        if busy >= self.cfg.max_running:
            remaining = min(max(1, j.max_tokens - j.generated) for j in self.running.values())
            slot_wait = remaining / self.rates.decode_tok_s
        waited = now - job.arrival_s
        return waited + slot_wait + (ahead + job.prompt_tokens) / self.rates.prefill_tok_s

    # ── events
    def submit(self, job: Job, now: float) -> list[Action]:
        self._seq += 1
        job.seq, job.arrival_s = self._seq, now
        self.jobs[job.key] = job
        self.by_user.setdefault(job.user, OrderedDict())[job.key] = job
        self.queue[job.key] = job
        if self.cfg.mode == "fifo":
            return self._start_ready(now)
        actions: list[Action] = []
        older = [j for j in self.by_user[job.user].values() if j is not job and (not job.prefetch or j.prefetch)]
        for j in older:
            actions.append(self._end(j, Reason.SUPERSEDED))
        live = [j for j in self.by_user[job.user].values() if j is not job]
        for j in live[: max(0, len(live) + 1 - self.cfg.per_user_inflight)]:
            actions.append(self._end(j, Reason.SUPERSEDED))
        if self.cfg.shed_enabled and self.predicted_ttft_s(job, now) > self.cfg.ttft_budget_s and not self._would_start(job):
            actions.append(self._end(job, Reason.SHED))
        return actions + self._start_ready(now)

    def cancel(self, key: Key, now: float) -> list[Action]:
        job = self.jobs.get(key)
        if job is None:
            return []
        return [self._end(job, Reason.CANCELLED), *self._start_ready(now)]

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
        if self.cfg.mode == "fifo" or not self.cfg.shed_enabled:
            return self._start_ready(now)
        actions: list[Action] = [self._end(j, Reason.SHED) for j in list(self.queue.values())
                                 if self.predicted_ttft_s(j, now) > self.cfg.ttft_budget_s]
        return actions + self._start_ready(now)

    # ── internals
    def _would_start(self, job: Job) -> bool:
        """True if `job` starts immediately (nothing ahead of it and a free slot)."""
        if job.prefetch:
            return False
        normals_ahead = any(not j.prefetch for j in self.queue.values() if j.seq < job.seq)
        return not normals_ahead and self._normal_slots_free() > 0

    def _normal_slots_free(self) -> int:
        evictable = sum(1 for j in self.running.values() if j.prefetch)
        return self.cfg.max_running - len(self.running) + evictable

    def _start_ready(self, now: float) -> list[Action]:
        actions: list[Action] = []
        if self.cfg.mode == "fifo":
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
        return Start(job.key, 1 if job.prefetch else 0)

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
