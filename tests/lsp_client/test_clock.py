"""Virtual time for the keystroke path: timeouts and timers fire when time passes them, never by the wall clock;
an abandoned request's grace period runs on it too."""
from __future__ import annotations

import asyncio
import random

import pytest

from quickcode.lsp_client.clock import REAL, VirtualClock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.session import Session
from tests.lsp_client.test_session_property import URI, FakeChannel


async def test_a_timeout_fires_only_when_virtual_time_passes_it():
    clock, ev = VirtualClock(), asyncio.Event()
    waiting = asyncio.create_task(clock.timeout(ev.wait(), 0.5))
    await asyncio.sleep(0.01)                          # real time passes: nothing fires
    clock.advance(0.4)
    await asyncio.sleep(0)
    assert not waiting.done()
    clock.advance(0.1)
    with pytest.raises(TimeoutError):
        await waiting


async def test_what_finishes_first_wins_and_timers_run_in_time_order():
    clock, ev, fired = VirtualClock(), asyncio.Event(), []
    waiting = asyncio.create_task(clock.timeout(ev.wait(), 10))
    await asyncio.sleep(0)
    ev.set()
    assert await waiting is True
    clock.later(0.3, lambda: fired.append(("b", clock.now())))
    clock.later(0.1, lambda: fired.append(("a", clock.now())))
    clock.advance(1)
    assert fired == [("a", 0.1), ("b", 0.3)] and clock.now() == 1


async def test_a_sleep_waits_for_time_unless_sleeps_advance():
    clock = VirtualClock(sleeps_advance=False)
    nap = asyncio.create_task(clock.sleep(0.2))
    await asyncio.sleep(0)
    assert not nap.done()
    clock.advance(0.2)
    await nap
    fast = VirtualClock()
    await fast.sleep(0.2)
    assert fast.now() == 0.2


async def test_an_abandoned_request_the_user_typed_on_from_is_stopped_after_the_grace_in_virtual_time():
    clock, chan = VirtualClock(), FakeChannel(random.Random(0))
    s = Session(ClientConfig(predictor=False, warmup=False, snippets=False, telemetry=False, state_dir=""), chan,
                clock=clock)
    text = "def add(a, b):\n    return "
    s.on_open(URI, "/t.py", "python", text)
    ask = asyncio.create_task(s.complete(URI, len(text), explicit=True))
    for _ in range(5):
        await asyncio.sleep(0)
    (rid,) = chan.running()
    chan.planned[rid] = "a + b\n"
    s.on_change(URI, text + "a", len(text) + 1)        # typed what the model will write ...
    ask.cancel()                                        # ... and the editor cancelled its request
    for _ in range(5):
        await asyncio.sleep(0)
    clock.advance(0.29)
    assert rid in chan.running()                        # kept for the request the keystroke brings
    clock.advance(0.02)
    for _ in range(5):
        await asyncio.sleep(0)
    assert rid not in chan.running() and s.stats.cancelled == 1


@pytest.mark.parametrize("clock", [REAL, VirtualClock()], ids=["real", "virtual"])
async def test_a_cancel_that_lands_as_the_awaited_finishes_still_cancels(clock):
    """$/cancelRequest cancels the handler while it waits on `clock.timeout`; if the awaited event fires in the
    same few loop turns, the cancel must still win (Python 3.11's asyncio.wait_for returned the result instead
    and the editor's request ran on until the flight ended: a CI failure of test_lsp_cancel)."""
    for turns in range(6):
        ev = asyncio.Event()
        waiting = asyncio.create_task(clock.timeout(ev.wait(), 10))
        await asyncio.sleep(0)
        ev.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        if waiting.done():                              # the wait finished before the cancel: nothing to race
            continue
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
