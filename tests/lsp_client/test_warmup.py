"""KV warm-ups (prefill-only requests at spare capacity) go where the next prompts will need their head cached:
the first window of a file just opened, the place of the first edit, and the window the prefix is about to
move to (virtual time, a fake channel)."""
from __future__ import annotations

import asyncio
import random

from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.session import Session
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.context import build, first_window_end
from quickcode.protocol import Priority
from tests.lsp_client.test_session_property import URI, FakeChannel

LINE = "    value = compute(item, index)  # a line of forty-odd chars\n"


def _session(**cfg) -> tuple[Session, FakeChannel]:
    chan = FakeChannel(random.Random(0))
    c = Session(ClientConfig(predictor=False, learn_pauses=False, snippets=False, telemetry=False, **cfg), chan,
                clock=VirtualClock(), rng=random.Random(0).random)
    return c, chan


def _warmups(chan: FakeChannel) -> list:
    return [m for m in chan.msgs.values() if m.prefill_only]


def test_the_first_window_ends_at_a_line_end_and_a_short_file_is_warmed_whole():
    text = LINE * 100
    end = first_window_end(text, 3000)
    assert end <= 3000 and text[end] == "\n" and "\n" not in text[end + 1:3001]
    assert first_window_end("x = 1\n", 3000) == len("x = 1\n")


async def test_opening_a_file_warms_its_first_window_as_a_plain_prefix():
    c, chan = _session()
    text = LINE * 100
    c.on_open(URI, "/t.py", "python", text)
    (w,) = _warmups(chan)
    assert w.priority is Priority.PREFETCH and w.max_tokens == 1
    assert w.prefix == text[:first_window_end(text, 3000)] and len(w.prefix) > 2900
    assert not w.suffix.split("\n", 1)[0].strip()     # at a line end: the prompt a cursor there would send


async def test_the_first_edit_warms_the_place_it_reveals_once_and_a_nearby_one_does_not():
    c, chan = _session()
    text = LINE * 200
    c.on_open(URI, "/t.py", "python", text)
    cursor = len(LINE) * 150                            # far below the first window
    typed = text[:cursor] + "x" + text[cursor:]
    c.on_change(URI, typed, cursor + 1)
    first_edit = _warmups(chan)[1:]
    assert [w.prefix for w in first_edit] == [build(typed, cursor + 1, "python", "/t.py", prefix_max_chars=3000,
                                                    suffix_max_chars=800, quantum=16).prefix]
    again = typed[:cursor + 1] + "y" + typed[cursor + 1:]
    c.on_change(URI, again, cursor + 2)
    assert len(_warmups(chan)) == 2


async def test_a_window_about_to_move_is_prefilled_once_ahead_of_the_move():
    c, chan = _session(window_warm_chars=400)
    doc = LINE * 80
    c.on_open(URI, "/t.py", "python", doc)
    opened = len(_warmups(chan))
    here = build(doc, len(doc), "python", "/t.py", prefix_max_chars=3000, suffix_max_chars=800, quantum=16)
    soon = build(doc, len(doc), "python", "/t.py", prefix_max_chars=2600, suffix_max_chars=800, quantum=16)
    assert soon.prefix_start > here.prefix_start        # this cursor is within 400 chars of a move
    asked = asyncio.create_task(c.complete(URI, len(doc), explicit=True))
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(_warmups(chan)) == opened                # not beside the request: it would wait and be superseded
    rid = next(r for r, m in chan.msgs.items() if not m.prefill_only)
    chan.feed(rid, 1000)                                # the user's request ends: now the engine is free
    await asyncio.wait_for(asyncio.shield(asked), 1)
    for _ in range(10):
        await asyncio.sleep(0)
    warm = _warmups(chan)[opened:]
    assert [w.prefix for w in warm] == [soon.prefix] and warm[0].priority is Priority.PREFETCH
    # the user types on: the prompt after the move starts where the warm-up did, and nothing is warmed twice
    typed = doc + "    more = 1\n" * 40
    moved = build(typed, len(typed), "python", "/t.py", prefix_max_chars=3000, suffix_max_chars=800, quantum=16)
    assert moved.prefix_start == soon.prefix_start and moved.prefix.startswith(soon.prefix)
    c.on_change(URI, doc + "    ", len(doc) + 4)
    again = asyncio.create_task(c.complete(URI, len(doc) + 4, explicit=True))
    for _ in range(10):
        await asyncio.sleep(0)
    for r, m in list(chan.msgs.items()):
        if not m.prefill_only and r != rid:
            chan.feed(r, 1000)
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(_warmups(chan)) == opened + 1
    again.cancel()


async def test_no_window_warm_up_far_from_a_move_or_when_turned_off():
    for cfg, lines in (({}, 20), ({"window_warm_chars": 0}, 80)):
        c, chan = _session(**cfg)
        doc = LINE * lines
        c.on_open(URI, "/t.py", "python", doc)
        opened = len(_warmups(chan))
        asked = asyncio.create_task(c.complete(URI, len(doc), explicit=True))
        for _ in range(10):
            await asyncio.sleep(0)
        (rid,) = [r for r, m in chan.msgs.items() if not m.prefill_only]
        chan.feed(rid, 1000)
        for _ in range(10):
            await asyncio.sleep(0)
        assert len(_warmups(chan)) == opened and len(chan.msgs) == opened + 1
        asked.cancel()
