"""Adaptive debounce: how long to wait after the last keystroke before asking the backend.

delay = clamp(max(base, rhythm × typical gap between keys) − latency_weight × backend latency, min, max):
a fast typist mid-burst is not interrupted, a slow backend is compensated (as Tabby's agent does), and at a
likely pause point (prefetch.py) the wait is the minimum. Time is passed in by the caller (virtual in tests).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AdaptiveDebounce:
    base_ms: float = 50.0
    min_ms: float = 0.0
    max_ms: float = 1000.0
    adaptive: bool = True
    rhythm: float = 1.3              # wait this multiple of the user's usual gap between keys
    latency_weight: float = 0.5
    alpha: float = 0.2               # EWMA weight of a new observation
    pause_gap_ms: float = 1500.0     # gaps longer than this are pauses, not typing rhythm
    gap_ms: float | None = None      # EWMA of gaps between keystrokes
    latency_ms: float | None = None  # EWMA of backend time to first chunk
    last_key_ms: float | None = None

    def keystroke(self, now_ms: float) -> None:
        if self.last_key_ms is not None:
            gap = now_ms - self.last_key_ms
            if 0 < gap < self.pause_gap_ms:
                self.gap_ms = gap if self.gap_ms is None else self.gap_ms + self.alpha * (gap - self.gap_ms)
        self.last_key_ms = now_ms

    def latency(self, ms: float) -> None:
        self.latency_ms = ms if self.latency_ms is None else self.latency_ms + self.alpha * (ms - self.latency_ms)

    def delay_ms(self, pause_point: bool = False) -> float:
        if pause_point:
            return self.min_ms
        if not self.adaptive:
            return self.base_ms
        d = max(self.base_ms, self.rhythm * (self.gap_ms or 0.0)) - self.latency_weight * (self.latency_ms or 0.0)
        return min(self.max_ms, max(self.min_ms, d))

    def wait_ms(self, now_ms: float, pause_point: bool = False) -> float:
        """What is left to wait now: the delay counts from the last keystroke, so a client that already
        debounced (Neovim asks 200 ms after typing stops) is not made to wait twice."""
        since = now_ms - self.last_key_ms if self.last_key_ms is not None else float("inf")
        return max(0.0, self.delay_ms(pause_point) - since)
