"""Time for the `FakeEngine`: `RealClock`, and `ManualClock` — virtual time a test moves by hand, so a request
can be held running for as long as the test needs, on any machine."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """Virtual time: a sleeper wakes only when `advance` moves the time to its deadline. Thread-safe: a test
    may advance it from another thread than the server's event loop."""

    def __init__(self, start_s: float = 0.0):
        self._now_s = start_s
        self._lock = threading.Condition()
        self._sleepers: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now_s

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            heapq.heappush(self._sleepers, (self._now_s + seconds, next(self._seq), loop, fut))
            self._lock.notify_all()
        await fut

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now_s += seconds
            due = []
            while self._sleepers and self._sleepers[0][0] <= self._now_s:
                due.append(heapq.heappop(self._sleepers))
        for _, _, loop, fut in due:
            loop.call_soon_threadsafe(_wake, fut)

    def step(self, seconds: float, sleepers: int = 1, timeout_s: float = 5.0) -> None:
        """Advance once at least `sleepers` are asleep on this clock: a sleep that registers after an
        `advance` counts from the new time, so a test that advances before the engine went to sleep would wait
        forever."""
        with self._lock:
            if not self._lock.wait_for(lambda: self._pending() >= sleepers, timeout_s):
                raise TimeoutError(f"fewer than {sleepers} sleepers on the clock after {timeout_s} s")
        self.advance(seconds)

    def _pending(self) -> int:
        return sum(1 for *_, fut in self._sleepers if not fut.done())

    @property
    def sleepers(self) -> int:
        with self._lock:
            return self._pending()


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
