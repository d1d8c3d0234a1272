"""Which backend endpoint to use: the nearest healthy one by measured round-trip time, with failover (a
failed endpoint cools down with backoff) and failback (a clearly nearer healthy endpoint wins again)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Endpoint:
    url: str
    order: int
    rtt_ms: float | None = None      # best recent probe (None: not measured yet)
    failures: int = 0
    down_until_s: float = 0.0

    def healthy(self, now_s: float) -> bool:
        return now_s >= self.down_until_s


class EndpointChooser:
    def __init__(self, urls: list[str], failback_ratio: float = 0.7, max_cooldown_s: float = 30.0):
        if not urls:
            raise ValueError("at least one backend endpoint is needed")
        self.endpoints = {u: Endpoint(u, i) for i, u in enumerate(dict.fromkeys(urls))}
        self.failback_ratio = failback_ratio
        self.max_cooldown_s = max_cooldown_s

    def record_rtt(self, url: str, rtt_ms: float) -> None:
        e = self.endpoints[url]
        e.rtt_ms = rtt_ms if e.rtt_ms is None else 0.5 * e.rtt_ms + 0.5 * rtt_ms
        e.failures, e.down_until_s = 0, 0.0

    def record_failure(self, url: str, now_s: float) -> None:
        e = self.endpoints[url]
        e.failures += 1
        e.down_until_s = now_s + min(self.max_cooldown_s, 0.5 * 2 ** (e.failures - 1))

    def record_success(self, url: str) -> None:
        e = self.endpoints[url]
        e.failures, e.down_until_s = 0, 0.0

    def _rank(self, e: Endpoint, now_s: float):
        return (not e.healthy(now_s), e.rtt_ms is None, e.rtt_ms or 0.0, e.order)

    def best(self, now_s: float) -> str:
        """The endpoint to connect to now (if all are down, the one that comes back first)."""
        healthy = [e for e in self.endpoints.values() if e.healthy(now_s)]
        if not healthy:
            return min(self.endpoints.values(), key=lambda e: e.down_until_s).url
        return min(healthy, key=lambda e: self._rank(e, now_s)).url

    def better_than(self, current: str, now_s: float) -> str | None:
        """A healthy endpoint clearly nearer than `current` (fail back), else None."""
        cur = self.endpoints[current]
        if cur.rtt_ms is None:
            return None
        best = self.best(now_s)
        b = self.endpoints[best]
        if best != current and b.rtt_ms is not None and b.rtt_ms < self.failback_ratio * cur.rtt_ms:
            return best
        return None

    def snapshot(self) -> list[dict]:
        return [{"url": e.url, "rtt_ms": None if e.rtt_ms is None else round(e.rtt_ms, 2), "failures": e.failures}
                for e in self.endpoints.values()]
