"""Client telemetry (what users did with shown completions) into bounded metrics, rate-limited per user.

Telemetry is advisory and costs the client nothing to send, so it is bounded three ways: the language label
comes from a fixed set (quickcode/protocol/languages.py), character counts are clamped to what one completion
can be, and each user's frames pass a token bucket; a frame over the limit is dropped silently (counted).
"""
from __future__ import annotations

import time

from quickcode.backend import metrics
from quickcode.backend.ratelimit import TokenBuckets
from quickcode.protocol import Telemetry, TelemetryEvent
from quickcode.protocol.languages import language_label

MAX_COMPLETION_CHARS = 16_384   # far above a 256-token completion; a larger count is a lie, clamped


class TelemetryRecorder:
    def __init__(self, rate_per_s: float, burst: int, clock=time.monotonic):
        self.limits = TokenBuckets(rate_per_s, burst, clock=clock)

    def record(self, user: str, t: Telemetry) -> bool:
        """Count `t` for `user`; False (and nothing counted but the drop) when the user is over the limit."""
        if not self.limits.take(user):
            metrics.TELEMETRY_DROPPED.inc()
            return False
        metrics.TELEMETRY.labels(t.event.value, language_label(t.language)).inc()
        if t.event == TelemetryEvent.SHOWN:
            metrics.SHOWN_CHARS.inc(min(max(0, t.shown_chars), MAX_COMPLETION_CHARS))
        elif t.event in (TelemetryEvent.ACCEPTED, TelemetryEvent.PARTIAL):
            metrics.ACCEPTED_CHARS.inc(min(max(0, t.accepted_chars), MAX_COMPLETION_CHARS))
        return True
