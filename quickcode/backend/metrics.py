"""Prometheus metrics of the backend (one process-wide set, in the default registry beside vLLM's own).

Every label set is bounded by construction: finish reasons and error codes are enums (`error_label` maps
anything else to `other`), languages come from quickcode/protocol/languages.py, GC generations are 0..2, users
are the tokens file's (`UserLabels`: at most MAX_USER_LABELS, then `other`; an open server counts all as
`open`). No label value is ever a string a client chose.

Engine-wide speculative-decoding and prefix-cache figures are read from EngineStats at scrape time. Only
counters, gauges of the present and histograms are exported: no lifetime ratio (`*_rate`), which would hide
the last hour under the process's whole life — ratios are PromQL over counters, in the dashboard
(deploy/grafana/quickcode.json: `rate(hits) / rate(queries)`).
"""
from __future__ import annotations

import asyncio
import gc
import itertools
import time
from typing import Callable

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from quickcode.protocol import ErrorCode, Timing

_LAT_BUCKETS_S = (.005, .01, .02, .03, .05, .075, .1, .15, .2, .3, .5, .75, 1, 2, 5, 10)
_TPOT_BUCKETS_S = (.001, .002, .004, .006, .008, .01, .015, .02, .03, .05, .1, .2)

TTFT = Histogram("quickcode_ttft_seconds", "Frame received → first chunk sent", buckets=_LAT_BUCKETS_S)
QUEUE = Histogram("quickcode_queue_seconds", "Time in the admission queue",
                  buckets=(.0001, .0005, .001, .0025) + _LAT_BUCKETS_S)   # most requests wait well under 1 ms
PREFILL = Histogram("quickcode_engine_ttft_seconds", "Engine submit → first token (prefill)",
                    buckets=_LAT_BUCKETS_S)
TPOT = Histogram("quickcode_time_per_output_token_seconds", "Generation time per output token",
                 buckets=_TPOT_BUCKETS_S)
E2E = Histogram("quickcode_e2e_seconds", "Frame received → done sent", buckets=_LAT_BUCKETS_S)
TOKENIZE = Histogram("quickcode_tokenize_seconds", "Prompt tokenization",
                     buckets=(.0001, .0002, .0005, .001, .002, .005, .01))
REQUESTS = Counter("quickcode_requests_total", "Requests by finish reason", ["finish_reason"])
WITHIN_SLO = Counter("quickcode_requests_within_slo_total",
                     "Served requests whose first chunk met the TTFT budget")
ERRORS = Counter("quickcode_errors_total", "Typed errors sent, by code", ["code"])
OUTPUT_TOKENS = Counter("quickcode_output_tokens_total", "Tokens streamed to clients")
HEAL_DISAGREED = Counter("quickcode_heal_disagreed_total",
                         "Healed requests whose output did not write the healed text again (ended empty)")
HEAL_STEPS = Counter("quickcode_heal_steps_total",
                     "One-token requests a speculating engine ran to write healed text again")
SESSIONS = Gauge("quickcode_sessions", "Open WebSocket sessions")
QUEUED = Gauge("quickcode_queued_requests", "Requests waiting in the admission queue")
QUEUED_TOKENS = Gauge("quickcode_queued_prompt_tokens", "Prompt tokens waiting in the admission queue")
RUNNING = Gauge("quickcode_running_requests", "Requests in the engine")
LATENESS = Gauge("quickcode_ttft_forecast_lateness",
                 "Recent first tokens ÷ their admission forecast (high quantile)")
TELEMETRY = Counter("quickcode_completion_events_total",
                    "Client telemetry by event and language (a fixed set of ids, else 'other')",
                    ["event", "language"])
TELEMETRY_DROPPED = Counter("quickcode_telemetry_dropped_total", "Telemetry frames over a user's rate limit")
SHOWN_CHARS = Counter("quickcode_shown_chars_total", "Characters of completions shown")
ACCEPTED_CHARS = Counter("quickcode_accepted_chars_total",
                         "Characters of completions accepted (full or partial)")
READY = Gauge("quickcode_engine_ready", "1 when the engine serves requests")
LIVE = Gauge("quickcode_live_requests", "Requests accepted and not yet ended (queued or running)")
_LAG_BUCKETS_S = (.0005, .001, .002, .003, .005, .0075, .01, .015, .02, .05, .1, .25, .5, 1)
LOOP_LAG = Histogram("quickcode_event_loop_lag_seconds", "How late the event loop wakes a 10 ms sleep",
                     buckets=_LAG_BUCKETS_S)
LOOP_LAG_CPU = Histogram("quickcode_event_loop_lag_cpu_seconds",
                         "The part of that lag the loop's thread spent on the CPU (its own work, not waiting "
                         "for a core the OS gave to another process)", buckets=_LAG_BUCKETS_S)
LOOP_TASKS = Gauge("quickcode_event_loop_tasks",
                   "asyncio tasks alive on the server's event loop (set by the lag probe about once a "
                   "second): flat under steady load, growing when tasks leak")
GC_PAUSE = Histogram("quickcode_gc_pause_seconds",
                     "Pauses of Python's cyclic garbage collector, by generation",
                     ["generation"], buckets=_LAG_BUCKETS_S)
USER_REQUESTS = Counter("quickcode_user_requests_total",
                        "Requests ended, by user (the tokens file's; `open` on a server without tokens)",
                        ["user"])
AUTH_TOKENS = Gauge("quickcode_auth_tokens", "API tokens in force (the tokens file's and auth_tokens)")
AUTH_RELOADS = Counter("quickcode_auth_tokens_reloads_total",
                       "Versions of the tokens file installed (ok), or refused with the previous tokens kept",
                       ["result"])
SESSIONS_REVOKED = Counter("quickcode_sessions_revoked_total",
                           "WebSocket sessions closed because their token left the tokens file")
for _result in ("ok", "refused"):
    AUTH_RELOADS.labels(_result)
for _reason in ("stop", "length", "cancelled", "superseded", "shed", "error"):
    REQUESTS.labels(_reason)   # every finish reason is exported from the start, at 0
_ERROR_CODES = frozenset(c.value for c in ErrorCode)


def request_ended(reason: str, user_label: str, timing: Timing, prefill_s: float | None,
                  ttft_budget_ms: float) -> None:
    """Count and time one ended request (each ends exactly once: service.py `_end`); `prefill_s` None when
    the engine gave it no token."""
    REQUESTS.labels(reason).inc()
    USER_REQUESTS.labels(user_label).inc()
    E2E.observe(timing.total_ms / 1000)
    OUTPUT_TOKENS.inc(timing.output_tokens)
    if prefill_s is not None:
        PREFILL.observe(prefill_s)
        if timing.ttft_ms + timing.queue_ms <= ttft_budget_ms:
            WITHIN_SLO.inc()
    if timing.output_tokens > 1:   # then a first and a last token were seen: generate_ms spans them
        TPOT.observe(timing.generate_ms / 1000 / (timing.output_tokens - 1))


def error_label(code: str) -> str:
    return code if code in _ERROR_CODES else "other"


MAX_USER_LABELS = 1000   # users with series of their own; beyond them (a huge tokens file) they share `other`


class UserLabels:
    """user → the `user` label: their name if the tokens know them (`known`), up to MAX_USER_LABELS names
    for the process's life; `open` when the server has no tokens."""

    def __init__(self, known: Callable[[str], bool], enabled: bool):
        self.known = known          # user -> do the tokens hold them now
        self.enabled = enabled
        self._given: set[str] = set()

    def __call__(self, user: str) -> str:
        if not self.enabled:
            return "open"
        if user in self._given:
            return user
        if len(self._given) < MAX_USER_LABELS and self.known(user):
            self._given.add(user)
            return user
        return "other"


async def probe_loop_lag(interval_s: float = 0.01, tasks_every: int = 100) -> None:
    """Sleep `interval_s` forever and record how late each wake-up is: the event loop's responsiveness; every
    `tasks_every` wake-ups, count the loop's tasks (`quickcode_event_loop_tasks`)."""
    loop = asyncio.get_running_loop()
    for n in itertools.count():
        if n % tasks_every == 0:
            LOOP_TASKS.set(len(asyncio.all_tasks(loop)))
        t0, cpu0 = loop.time(), time.thread_time()
        await asyncio.sleep(interval_s)
        lag_s = max(0.0, loop.time() - t0 - interval_s)
        LOOP_LAG.observe(lag_s)
        LOOP_LAG_CPU.observe(min(lag_s, time.thread_time() - cpu0))


_gc_started_s = 0.0


def _on_gc(phase: str, info: dict) -> None:
    global _gc_started_s
    if phase == "start":
        _gc_started_s = time.perf_counter()
    else:
        GC_PAUSE.labels(str(info.get("generation", "?"))[:1]).observe(time.perf_counter() - _gc_started_s)


def watch_gc() -> None:
    """Time every collection of the cyclic GC (a full one stops the event loop for as long as it runs)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


class EngineCollector:
    """Speculative-decoding and prefix-cache counters from the engine's own step statistics."""

    def __init__(self, stats_fn):
        self.stats_fn = stats_fn

    def collect(self):
        s = self.stats_fn()
        if s is None:
            return
        yield CounterMetricFamily("quickcode_spec_draft_tokens", "Draft tokens proposed",
                                  value=s.spec_draft_tokens)
        yield CounterMetricFamily("quickcode_spec_accepted_tokens", "Draft tokens accepted",
                                  value=s.spec_accepted_tokens)
        yield CounterMetricFamily("quickcode_prefix_cache_queries_tokens", "Prompt tokens looked up",
                                  value=s.prefix_queries)
        yield CounterMetricFamily("quickcode_prefix_cache_hits_tokens", "Prompt tokens found cached",
                                  value=s.prefix_hits)
        yield GaugeMetricFamily("quickcode_engine_running", "Requests running in vLLM", value=s.num_running)
        yield GaugeMetricFamily("quickcode_engine_waiting", "Requests waiting in vLLM", value=s.num_waiting)
        finished = CounterMetricFamily("quickcode_engine_finished_requests",
                                       "Requests the engine finished by itself "
                                       "(aborted ones are not counted)",
                                       labels=["finish_reason"])
        for reason in ("stop", "length"):
            finished.add_metric([reason], s.finished.get(reason, 0))
        yield finished
        yield CounterMetricFamily("quickcode_engine_steps",
                                  "Engine steps reported by vLLM (idle engine: no steps)", value=s.steps)


_collector: EngineCollector | None = None


def watch_engine(stats_fn) -> None:
    """Point the (single, process-wide) engine collector at the current engine's statistics."""
    global _collector
    if _collector is None:
        _collector = EngineCollector(stats_fn)
        REGISTRY.register(_collector)
    else:
        _collector.stats_fn = stats_fn


def serve_separately(bind: str):
    """Serve the default registry on its own `host:port` listener (no auth: a port only Prometheus reaches,
    e.g. the pod network behind a NetworkPolicy), so scrapes work with API tokens on. Returns the server
    (`.shutdown()` stops it)."""
    from prometheus_client import start_http_server

    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics_bind wants host:port, got {bind!r}")
    server, _thread = start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0")
    return server
