"""The completion service: validate → tokenize → schedule → stream from the engine → end exactly once.

Every request is keyed by (session id, client id): ids are scoped to their session, so no client can name,
cancel or read another session's request. Frames go to a `Sink` (a WebSocket session, or the OpenAI
endpoint) through a synchronous, ordered `send`, so ending a request never races its own chunks.

Invariant: each accepted request gets exactly one terminal frame (`done`, or `error` with its id), and its
engine request is aborted if it ends for any reason other than the engine finishing it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from quickcode.backend import best_of, logs, metrics, next_edit
from quickcode.backend.checks import check_complete, check_edit
from quickcode.backend.edit_prompt import edit_prompt
from quickcode.backend.engine import Engine
from quickcode.backend.fim import Healed, complete_prompt
from quickcode.backend.live_request import Request, Sink
from quickcode.backend.model_info import context_chars, model_info, prompt_budget_tokens
from quickcode.backend.ratelimit import TokenBuckets
from quickcode.backend.scheduler import End, Job, RateModel, Reason, Scheduler, SchedulerConfig, Start
from quickcode.backend.settings import Settings
from quickcode.backend.telemetry import TelemetryRecorder
from quickcode.backend.tenancy import Tenancy
from quickcode.protocol import (Chunk, Complete, Done, Edit, Error, ErrorCode, FinishReason, Priority,
                                ProtocolError, Replace)
from quickcode.protocol.words import words_end

log = logging.getLogger("quickcode.service")
_VLLM_FINISH = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH, "abort": FinishReason.CANCELLED}
_END_REASON = {Reason.SUPERSEDED: FinishReason.SUPERSEDED, Reason.SHED: FinishReason.SHED,
               Reason.CANCELLED: FinishReason.CANCELLED}


class CompletionService:
    def __init__(self, settings: Settings, engine: Engine):
        self.s = settings
        self.engine = engine
        self.sched = Scheduler(SchedulerConfig(
            mode=settings.scheduler, max_running=settings.max_running,
            per_user_inflight=settings.per_user_inflight,
            ttft_budget_s=settings.ttft_budget_ms / 1000, prefetch_share=settings.prefetch_max_running_share,
            shed_enabled=settings.shed_enabled, admit_cap=settings.admit_cap), RateModel())
        self.requests: dict[tuple[str, str], Request] = {}
        self.limits = TokenBuckets(settings.rate_limit_per_s, settings.rate_limit_burst)
        self.chars_per_token = model_info(settings.target_path).chars_per_token
        self.telemetry = TelemetryRecorder(settings.telemetry_rate_per_s, settings.telemetry_burst)
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task | None = None
        self._prefill_free_s = 0.0  # when the engine last finished a prefill: prefills run one after another
        self._prefill_sample = [0.0, 0, 0.0]   # [begin, uncached tokens, end] not yet given to the rate model
        self.closing = False
        # user → cache salt of their tenant; the app sets it from the tokens and `cache_isolation`. Every way
        # in (WebSocket, OpenAI and other HTTP endpoints) goes through submit(), so none can skip the salt.
        self.salt_for: Callable[[str], str | None] = Tenancy("user", {}).cache_salt
        self.user_label: Callable[[str], str] = lambda user: "open"   # per-user metrics' label (the app's)
        metrics.LIVE.set_function(lambda: len(self.requests))

    # ── lifecycle
    def start(self) -> None:
        self._ticker = asyncio.create_task(self._tick_loop(), name="scheduler-tick")

    async def close(self) -> None:
        self.closing = True
        if self._ticker:
            self._ticker.cancel()
        for req in list(self.requests.values()):
            self._end(req, FinishReason.CANCELLED, abort=True)

    @property
    def live_count(self) -> int:
        return len(self.requests)

    @property
    def prompt_budget_tokens(self) -> int:
        """Prompt tokens per request: within the model's (trained) context, less room for the completion; the
        same for a warm-up and the completion after it. 0 while the engine's context is not known."""
        if not self.engine.max_model_len:
            return 0
        return prompt_budget_tokens(self.s.max_prompt_tokens, self.engine.max_model_len,
                                    self.s.reserve_output_tokens)

    @property
    def context_chars(self) -> int:
        """Characters of prefix + suffix a client should send (the welcome's `context_chars`; 0: unknown)."""
        return context_chars(self.prompt_budget_tokens, self.chars_per_token)

    # ── client events
    def submit(self, sink: Sink, session_id: str, user: str, msg: Complete | Edit, t_recv: float,
               prompt_ids: list[int] | None = None, route: str = "ws") -> None:
        """Validate and schedule `msg` (a completion, or a next edit: the same scheduler, supersede and
        shedding); a refusal raises ProtocolError (the caller sends it as an error frame). `prompt_ids`: a
        prompt the client templated itself (its own FIM tokens, compat endpoints), used as is; `route`: the
        HTTP path it came by (the access log's)."""
        key = (session_id, msg.id)
        self._validate(key, session_id, user, msg)
        t0 = time.perf_counter()
        template = self.engine.template
        budget = self.prompt_budget_tokens
        if isinstance(msg, Edit):       # the region is written again whole: room for all of it in the context
            room = self.engine.max_model_len - msg.max_tokens if self.engine.max_model_len else budget
            ids = edit_prompt(msg, self.engine.tokenizer, template.bos_id, min(budget, room))
            return self._schedule(Request(key, f"{session_id}:{msg.id}", sink, msg, user, ids, t_recv, 0.0,
                                          cache_salt=self.salt_for(user), route=route),
                                  t0, Job(key, user, len(ids), msg.max_tokens,
                                          prefetch=msg.priority == Priority.PREFETCH))
        max_tokens = 1 if msg.prefill_only else msg.max_tokens
        healed = ""
        if prompt_ids is not None:
            if len(prompt_ids) > budget:
                raise ProtocolError(
                    ErrorCode.PROMPT_TOO_LONG,
                    f"a pre-templated prompt of {len(prompt_ids)} tokens exceeds {budget}", msg.id)
            ids = list(prompt_ids)
        else:
            ids, healed = complete_prompt(msg, self.s, self.engine.tokenizer, template, budget)
        req = Request(key, f"{session_id}:{msg.id}", sink, msg, user, ids, t_recv, 0.0,
                      healed=Healed(healed), cache_salt=self.salt_for(user), route=route)
        prefetch = msg.priority == Priority.PREFETCH or msg.prefill_only
        job = best_of.job(key, user, msg, len(ids), prefetch) if best_of.wanted(msg) else \
            Job(key, user, len(ids), max_tokens, prefetch=prefetch)
        self._schedule(req, t0, job)

    def _schedule(self, req: Request, t0: float, job: Job) -> None:
        """`req` (tokenized since `t0`) is live: the scheduler decides when it runs."""
        now = time.perf_counter()
        req.tokenize_ms, req.t_queued = (now - t0) * 1000, now
        metrics.TOKENIZE.observe(now - t0)
        self.requests[req.key] = req
        self._apply(self.sched.submit(job, now))
        self._wake.set()

    def cancel(self, session_id: str, rid: str) -> None:
        """A cancel for an id this session does not have (finished, or never sent) is ignored: races are
        normal."""
        if (session_id, rid) in self.requests:
            self._apply(self.sched.cancel((session_id, rid), time.perf_counter()))

    def drop_session(self, session_id: str) -> None:
        """The connection is gone: end (and abort) everything it had, sending nothing."""
        for key in [k for k in self.requests if k[0] == session_id]:
            req = self.requests[key]
            self._apply(self.sched.cancel(key, time.perf_counter()))
            if not req.ended:
                self._end(req, FinishReason.CANCELLED, abort=True)

    # ── internals
    def _validate(self, key, session_id: str, user: str, msg: Complete | Edit) -> None:
        if self.closing:
            raise ProtocolError(ErrorCode.SHUTTING_DOWN, "the server is shutting down", msg.id)
        if not self.engine.ready:
            raise ProtocolError(ErrorCode.ENGINE_UNAVAILABLE, self.engine.error or "engine not ready", msg.id)
        if key in self.requests:
            raise ProtocolError(ErrorCode.DUPLICATE_ID,
                                f"request {msg.id!r} is still running in this session", msg.id)
        check_edit(msg, self.s) if isinstance(msg, Edit) else check_complete(msg, self.s)
        if sum(1 for k in self.requests if k[0] == session_id) >= self.s.max_requests_per_session:
            raise ProtocolError(ErrorCode.RATE_LIMITED, "too many requests in flight in this session", msg.id)
        if not self.limits.take(user):
            raise ProtocolError(ErrorCode.RATE_LIMITED,
                                f"more than {self.s.rate_limit_per_s:g} requests/s for this user", msg.id)

    def _apply(self, actions) -> None:
        for a in actions:
            req = self.requests.get(a.key)
            if req is None or req.ended:
                continue
            if isinstance(a, Start):
                req.t_start = time.perf_counter()
                metrics.QUEUE.observe(req.t_start - req.t_queued)
                req.task = asyncio.create_task(self._run(req, a.engine_priority), name=req.engine_id)
            elif isinstance(a, End):
                self._end(req, _END_REASON[a.reason], abort=a.was_running)
        self._gauges()

    async def _run(self, req: Request, priority: int) -> None:
        msg = req.msg
        finish, stopped = FinishReason.STOP, False
        if isinstance(msg, Edit):
            return await self._run_edit(req, priority)
        if best_of.wanted(msg):
            return await self._run_best_of(req, priority)
        try:
            healed = req.healed.pending if self.s.heal_token else ""   # the engine keeps to it (heal_mask.py)
            # writing the healed text again may take as many tokens as it took typed: they come on top (a
            # merged token leaves them to the text after it; docs/decisions.md#heal-budget)
            max_tokens = 1 if msg.prefill_only else msg.max_tokens + (
                len(self.engine.tokenizer.encode(healed, add_special_tokens=False).ids) if healed else 0)
            async for d in self.engine.generate(req.engine_id, req.prompt_ids, max_tokens,
                                                msg.stop, msg.temperature, priority, req.cache_salt, healed):
                now = self._delta_seen(req, d)
                text = req.healed.feed(d.text)
                if text is None:                 # the model did not write the healed text: nothing to show
                    metrics.HEAL_DISAGREED.inc()  # (never with heal_token's mask, but under speculation)
                    self._end(req, FinishReason.STOP, abort=True)
                    self._apply(self.sched.finished(req.key, time.perf_counter()))
                    return
                if text and not msg.prefill_only:
                    if req.t_first_chunk is None:
                        req.t_first_chunk = now
                        metrics.TTFT.observe(now - req.t_recv)
                    req.sink.send(Chunk(id=msg.id, text=text))
                self.sched.progress(req.key, req.output_tokens)
                if d.finish_reason:
                    finish = _VLLM_FINISH.get(d.finish_reason, FinishReason.STOP)
                    req.spec_proposed, req.spec_accepted = d.spec_draft_tokens, d.spec_accepted_tokens
                elif msg.max_words and text:
                    req.written += text
                    if words_end(req.written, msg.max_words) is not None:
                        stopped = True          # the words asked for are written: the engine stops here
                        break
        except asyncio.CancelledError:
            raise  # ended by _end (superseded, cancelled, shed, shutdown): it sent the terminal frame
        except Exception as e:
            return self._engine_failed(req, e)
        if req.output_tokens > 1 and req.t_first is not None:
            self.sched.rates.observe_decode(req.output_tokens - 1, req.t_last - req.t_first)
        if not msg.prefill_only and finish in (FinishReason.STOP, FinishReason.LENGTH):
            self.sched.rates.observe_output(req.output_tokens, msg.max_tokens)
        self._end(req, finish, abort=stopped)
        self._apply(self.sched.finished(req.key, time.perf_counter()))

    def _delta_seen(self, req: Request, d) -> float:
        """Time and count one streamed delta of `req` (the prefill sample on its first); the time now."""
        now = time.perf_counter()
        if req.t_first is None:
            req.t_first = now
            req.cached_tokens = d.num_cached_tokens
            self._observe_prefill(req, len(req.prompt_ids) - d.num_cached_tokens, now)
            self.sched.first_token(req.key, now)
        elif req.t_second is None:
            req.t_second = now
        # a remote engine says the cached count on the last delta only (its prefill sample above
        # counted the whole prompt, as the scheduler's forecast does)
        req.cached_tokens = max(req.cached_tokens, d.num_cached_tokens)
        req.t_last = now
        req.output_tokens += d.num_tokens
        return now

    async def _run_edit(self, req: Request, priority: int) -> None:
        """A next edit (quickcode/backend/next_edit.py): one `replace` (none: no edit), then `done`."""
        try:   # (a CancelledError passes: ended by _end, which sent the terminal frame)
            change, finish, stopped = await next_edit.rewrite(
                self.engine, req.msg, req.engine_id, req.prompt_ids, priority, req.cache_salt,
                lambda d: (self._delta_seen(req, d), self.sched.progress(req.key, req.output_tokens)))
        except Exception as e:
            return self._engine_failed(req, e)
        if req.output_tokens > 1 and req.t_first is not None:
            self.sched.rates.observe_decode(req.output_tokens - 1, req.t_last - req.t_first)
        if change is not None:
            req.t_first_chunk = time.perf_counter()
            req.sink.send(Replace(id=req.msg.id, start_chars=change[0], end_chars=change[1], text=change[2]))
        self._end(req, finish, abort=stopped)
        self._apply(self.sched.finished(req.key, time.perf_counter()))

    async def _run_best_of(self, req: Request, priority: int) -> None:
        """The best of several lines (quickcode/backend/best_of.py), sent whole."""
        try:   # (a CancelledError passes: ended by _end, which sent the terminal frame)
            text, req.output_tokens = await best_of.best_line(
                self.engine, req.msg, req.prompt_ids, req.engine_id, priority, req.cache_salt,
                req.healed.pending, self.s.heal_token)
        except Exception as e:
            return self._engine_failed(req, e)
        req.t_first = req.t_last = req.t_first_chunk = time.perf_counter()
        if text:
            metrics.TTFT.observe(req.t_first_chunk - req.t_recv)
            req.sink.send(Chunk(id=req.msg.id, text=text))
        self._end(req, FinishReason.STOP, abort=False)
        self._apply(self.sched.finished(req.key, time.perf_counter()))

    def _engine_failed(self, req: Request, e: Exception) -> None:
        """The engine died or refused: a typed error for this request, the service lives on."""
        log.warning("request %s failed in the engine: %s", req.engine_id, e)
        error = Error(id=req.msg.id, code=ErrorCode.ENGINE_UNAVAILABLE,
                      message=f"engine failed: {type(e).__name__}")
        self._end(req, FinishReason.ERROR, abort=True, error=error)
        self._apply(self.sched.finished(req.key, time.perf_counter()))

    def _observe_prefill(self, req: Request, uncached: int, now: float) -> None:
        """Feed the scheduler's serial-prefill model: this prefill began when the previous one ended (or when
        the request entered the engine). First tokens that come out of the same engine step (within 2 ms)
        were prefilled together: they make one sample."""
        sample = self._prefill_sample
        if now - sample[2] <= 0.002:
            sample[1] += uncached
            sample[2] = now
        else:
            if sample[1]:
                self.sched.rates.observe_prefill(sample[1], sample[2] - sample[0])
            sample[:] = [max(req.t_start, self._prefill_free_s), uncached, now]
        self._prefill_free_s = now

    def _end(self, req: Request, reason: FinishReason, *, abort: bool, error: Error | None = None) -> None:
        if req.ended:
            return
        req.ended = True
        self.requests.pop(req.key, None)
        if req.task is not None and not req.task.done() and req.task is not asyncio.current_task():
            req.task.cancel()  # AsyncLLM aborts the engine request when its consumer is cancelled
        if abort and req.t_start is not None:
            asyncio.get_running_loop().create_task(self.engine.abort(req.engine_id))
        timing = req.timing()
        prefill_s = req.t_first - req.t_start if req.t_first is not None and req.t_start is not None else None
        metrics.request_ended(reason.value, self.user_label(req.user), timing, prefill_s,
                              self.s.ttft_budget_ms)
        if self.s.access_log:
            logs.access(req.engine_id, req.user, req.route, error.code if error else reason.value, timing,
                        (req.t_first_chunk - req.t_recv) * 1000 if req.t_first_chunk else 0.0)
        if error is not None:
            metrics.ERRORS.labels(metrics.error_label(error.code)).inc()
            req.sink.send(error)
        else:
            req.sink.send(Done(id=req.msg.id, finish_reason=reason, timing=timing))

    def _gauges(self) -> None:
        metrics.QUEUED.set(len(self.sched.queue))
        metrics.QUEUED_TOKENS.set(self.sched.queued_prompt_tokens)
        metrics.RUNNING.set(len(self.sched.running))
        metrics.LATENESS.set(self.sched.lateness.factor)

    async def _tick_loop(self) -> None:
        """Re-check queued requests against the TTFT budget while anything waits (5 ms resolution)."""
        while True:
            if not self.sched.queue:
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(0.005)
            try:
                self._apply(self.sched.tick(time.perf_counter()))
            except Exception:  # never let the ticker die: it is what keeps the queue bounded
                log.exception("scheduler tick failed")

