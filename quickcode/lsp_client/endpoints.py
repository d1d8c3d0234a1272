"""Which backend endpoint to use: the nearest healthy one by measured round-trip time, with failover (a
failed endpoint cools down with backoff) and failback (a clearly nearer healthy endpoint wins again); and the
measuring itself (`probe_all`: WebSocket pings to every endpoint)."""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import websockets
from websockets.asyncio.client import connect

from quickcode.lsp_client.clock import Clock

log = logging.getLogger("quickcode.channel")

PROBE_TIMEOUT_S = 3.0        # for a probe's connection and for each of its pings


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


async def probe(url: str, headers: dict, clock: Clock) -> float | None:
    """Round-trip time to `url` in ms (best of three WebSocket pings), None if unreachable."""
    try:
        async with connect(url, additional_headers=headers, open_timeout=PROBE_TIMEOUT_S,
                           compression=None, close_timeout=0.5, ping_interval=None) as ws:
            best = None
            for _ in range(3):
                t0 = clock.now()
                await clock.timeout(await ws.ping(), PROBE_TIMEOUT_S)
                rtt = (clock.now() - t0) * 1000
                best = rtt if best is None else min(best, rtt)
            return best
    except (OSError, asyncio.TimeoutError, websockets.WebSocketException):
        return None


async def probe_all(chooser: EndpointChooser, headers: dict, clock: Clock) -> list[str]:
    """Probe every endpoint of `chooser` at once and record each RTT or failure there: the URLs that failed."""
    urls = list(chooser.endpoints)
    rtts = await asyncio.gather(*(probe(u, headers, clock) for u in urls))
    now = clock.now()
    for url, rtt in zip(urls, rtts):
        if rtt is None:
            chooser.record_failure(url, now)
        else:
            chooser.record_rtt(url, rtt)
    log.info("endpoint RTTs: %s", chooser.snapshot())
    return [url for url, rtt in zip(urls, rtts) if rtt is None]
