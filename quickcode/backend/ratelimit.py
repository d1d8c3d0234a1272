"""Per-user token buckets (requests per second with a burst), over a caller-independent monotonic clock."""
from __future__ import annotations

import time

from lru import LRU


class TokenBuckets:
    def __init__(self, rate_per_s: float, burst: int, max_users: int = 100_000, clock=time.monotonic):
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.clock = clock
        self.buckets: LRU = LRU(max_users)  # user → (tokens, last_s); the least recent users are forgotten

    def take(self, user: str) -> bool:
        now = self.clock()
        tokens, last = self.buckets.get(user, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate_per_s)
        if tokens < 1.0:
            self.buckets[user] = (tokens, now)
            return False
        self.buckets[user] = (tokens - 1.0, now)
        return True
