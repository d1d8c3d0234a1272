"""The language server's only source of time: reading it, sleeping, timeouts and timers.

Every module of lsp_client takes a `Clock` instead of reading `time` or calling `asyncio.timeout` /
`loop.call_later` itself, so the keystroke path runs in virtual time in tests (`VirtualClock`: time moves only
when a test says so, or by the amount a sleep asks for) and in real time in the editor (`RealClock`).
Times are seconds of a monotonic clock (`now_s`).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Awaitable, Callable, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float: ...
    async def sleep(self, s: float) -> None: ...
    async def timeout(self, aw: Awaitable[T], s: float) -> T: ...      # raises TimeoutError after `s`
    def later(self, s: float, fn: Callable[[], None]) -> None: ...


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, s: float) -> None:
        await asyncio.sleep(s)

    async def timeout(self, aw: Awaitable[T], s: float) -> T:
        # not asyncio.wait_for: on Python 3.11 it swallows a cancel that lands as `aw` finishes (it returns the
        # result), and a $/cancelRequest then never ends the editor's request
        async with asyncio.timeout(max(0.0, s)):
            return await aw

    def later(self, s: float, fn: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_later(s, fn)


REAL = RealClock()


class VirtualClock:
    """Time that moves only by `advance(s)` — or by a sleep's own length when `sleeps_advance` (a sleeping
    keystroke path then runs at once, as if the pause had passed). Timeouts and timers fire when time passes
    them; an awaitable that finishes first wins."""

    def __init__(self, start_s: float = 0.0, *, sleeps_advance: bool = True):
        self.t = start_s
        self.sleeps_advance = sleeps_advance
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        """Move time forward by `s`, running every timer it passes (in time order)."""
        end = self.t + max(0.0, s)
        while self._timers and self._timers[0][0] <= end:
            at, _, fn = heapq.heappop(self._timers)
            self.t = max(self.t, at)
            fn()
        self.t = end

    def later(self, s: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (self.t + max(0.0, s), next(self._seq), fn))

    async def sleep(self, s: float) -> None:
        if self.sleeps_advance:
            self.advance(s)
            await asyncio.sleep(0)
            return
        done = asyncio.get_running_loop().create_future()
        self.later(s, lambda: done.done() or done.set_result(None))
        await done

    async def timeout(self, aw: Awaitable[T], s: float) -> T:
        task = asyncio.ensure_future(aw)
        expired = asyncio.get_running_loop().create_future()
        self.later(s, lambda: expired.done() or expired.set_result(None))
        try:
            await asyncio.wait([task, expired], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            return task.result()
        task.cancel()
        raise TimeoutError
