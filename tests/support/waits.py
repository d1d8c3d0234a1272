"""Waiting on state in tests: poll a condition until it holds, or fail with "hung: …" after a generous bound.

The bound is a hang detector, never the thing a test asserts: how long a machine takes is printed where it is
worth knowing, and what a test proves is the state it waited for (a typed frame, a count, a process gone).
"""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, TypeVar

import pytest

T = TypeVar("T")
HANG_S = 60.0      # what "never happens" means in these tests: far beyond any wait on a loaded 2-core machine


def until(pred: Callable[[], T], what: str | Callable[[], str], *, hang_s: float = HANG_S,
          poll_s: float = 0.01) -> T:
    """`pred()`'s first truthy value; `pytest.fail("hung: <what>")` if there is none within `hang_s` (`what` may
    be a callable, for a message that reads logs only when it is needed)."""
    end = time.monotonic() + hang_s
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > end:
            _hung(what, hang_s)
        time.sleep(poll_s)


async def until_async(pred: Callable[[], Awaitable[T]], what: str | Callable[[], str], *, hang_s: float = HANG_S,
                      poll_s: float = 0.02) -> T:
    """`until` for an async condition (e.g. a language server's status command)."""
    end = time.monotonic() + hang_s
    while True:
        value = await pred()
        if value:
            return value
        if time.monotonic() > end:
            _hung(what, hang_s)
        await asyncio.sleep(poll_s)


def _hung(what: str | Callable[[], str], hang_s: float):
    pytest.fail(f"hung: {what() if callable(what) else what} (still not so after {hang_s:g} s)")
