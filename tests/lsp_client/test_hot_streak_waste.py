"""Lines beyond the text to show are generated only for text someone saw (the hot streak), never for a
request nobody was shown: those tokens would be for nobody (virtual time, a fake channel)."""
from __future__ import annotations

import asyncio
import random

from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.session import Session
from quickcode.lsp_client.config import ClientConfig
from tests.lsp_client.test_session_property import URI, FakeChannel

BEFORE = "import os\n\n\ndef add(a, b):\n    total = "


def _session(plan: str) -> tuple[Session, FakeChannel, VirtualClock]:
    chan = FakeChannel(random.Random(0))
    submit = chan.submit

    def planned_submit(msg):
        s = submit(msg)
        chan.planned[msg.id] = plan
        return s
    chan.submit = planned_submit
    clock = VirtualClock()
    cfg = ClientConfig(predictor=False, learn_pauses=False, snippets=False, warmup=False, telemetry=False,
                       hot_streak_lines=3,          # the hot streak is off by default (bench typing: waste)
                       suggestion_unit="block")     # lines and blocks shown whole (the word unit: test_word_unit)
    c = Session(cfg, chan, clock=clock, rng=random.Random(0).random)
    c.on_open(URI, "/t.py", "python", BEFORE)
    return c, chan, clock


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_shown_text_streams_on_for_the_next_lines():
    c, chan, _ = _session("a + b\n    return total\n\n\nfor i in range(10):\n")
    ask = asyncio.create_task(c.complete(URI, len(BEFORE), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    chan.feed(rid, 6)                                  # "a + b\n": the line to show is final
    s = await ask
    assert s is not None and s.text == "a + b"
    await _settle()
    assert rid in chan.running()                       # shown: the next lines are kept coming (hot streak)
    chan.feed(rid, 100)
    await _settle()
    assert c.stats.tokens_never_shown == 0


async def test_text_nobody_was_shown_stops_once_final_and_is_kept_for_the_next_request():
    c, chan, clock = _session("a + b\n    return total\n\n\nfor i in range(10):\n")
    ask = asyncio.create_task(c.complete(URI, len(BEFORE), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    text = BEFORE + "a"                                # the user types on (what the model will write) ...
    c.on_change(URI, text, len(text))
    ask.cancel()                                       # ... and the editor cancels its request for the old place
    await _settle()
    assert rid in chan.running()                       # kept a moment for the request the keystroke brings
    chan.feed(rid, 6)                                  # the line is final while nobody waits on it
    await _settle()
    assert rid not in chan.running() and c.stats.stopped_early == 1    # no hot-streak lines for nobody
    s = await c.complete(URI, len(text), explicit=True)
    assert s is not None and s.text == " + b" and s.source == "cache"  # its text was kept: served, not wasted
    assert len(chan.msgs) == 1


async def test_a_block_still_being_written_shows_its_complete_lines_after_the_patience():
    c, chan, clock = _session("a + b\n")
    block = "import os\n\n\ndef add(a, b):\n    "       # after a block opener: a multi-line suggestion
    c.on_change(URI, block, len(block))
    chan.planned.clear()
    ask = asyncio.create_task(c.complete(URI, len(block), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    chan.planned[rid] = "total = a + b\n    total += 1\n    return total\n\n\nprint(add(1, 2))\n"
    chan.feed(rid, 14)                                 # one complete line; the block goes on
    await _settle()
    assert not ask.done()                              # within the patience: wait for the whole block
    clock.advance(c.cfg.block_patience_ms / 1000 + 0.01)
    chan.feed(rid, 4)                                  # the next chunk finds the patience spent
    s = await asyncio.wait_for(ask, 1)
    assert s is not None and s.text == "total = a + b"
    await _settle()
    assert rid in chan.running() and c.stats.tokens_never_shown == 0   # shown: the rest streams on, for later


async def test_a_line_still_being_written_shows_its_settled_words_after_the_patience_and_streams_on():
    c, chan, clock = _session("compute_total(values, weights)\n    return total\n")
    ask = asyncio.create_task(c.complete(URI, len(BEFORE), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    chan.feed(rid, 17)                                 # "compute_total(val": the line goes on
    await _settle()
    assert not ask.done()                              # within the patience: wait for the whole line
    clock.advance(c.cfg.line_patience_ms / 1000 + 0.01)
    chan.feed(rid, 2)                                  # "ue": the next chunk finds the patience spent
    s = await asyncio.wait_for(ask, 1)
    assert s is not None and s.text == "compute_total("    # the settled words; "value" may still grow
    await _settle()
    assert rid in chan.running()                       # shown: the rest of the line streams on
    text = BEFORE + "compute_total(v"                  # the user types through the ghost text ...
    c.on_change(URI, text, len(text))
    chan.feed(rid, 14)                                 # ... while the line ends
    s = await c.complete(URI, len(text), explicit=True)
    assert s is not None and s.text == "alues, weights)" and s.source == "inflight"
    assert len(chan.msgs) == 1 and c.stats.tokens_never_shown == 0


async def test_without_line_patience_a_line_shows_only_once_final():
    c, chan, clock = _session("compute_total(values, weights)\n")
    c.cfg.line_patience_ms = 0
    ask = asyncio.create_task(c.complete(URI, len(BEFORE), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    chan.feed(rid, 17)
    clock.advance(0.5)
    chan.feed(rid, 2)
    await _settle()
    assert not ask.done()
    chan.feed(rid, 100)
    s = await asyncio.wait_for(ask, 1)
    assert s is not None and s.text == "compute_total(values, weights)"


async def _shown_early(plan: str, fed: int):
    """Ask with `plan` streaming; feed `fed` characters once the patience is spent: (session, channel, request
    id, the moreText notices, what was shown)."""
    c, chan, clock = _session(plan)
    more: list[tuple[str, int]] = []
    c.pump.on_more = lambda uri, offset: more.append((uri, offset))
    ask = asyncio.create_task(c.complete(URI, len(BEFORE), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    clock.advance(c.cfg.line_patience_ms / 1000 + 0.01)
    chan.feed(rid, fed)
    s = await asyncio.wait_for(ask, 1)
    return c, chan, rid, more, s


async def test_text_shown_early_tells_the_editor_once_the_rest_is_in_and_the_next_ask_gets_it_whole():
    c, chan, rid, more, s = await _shown_early("compute_total(values, weights)\n    return total\n", 19)
    assert s is not None and s.text == "compute_total("    # "compute_total(value": the patience spent
    chan.feed(rid, 5)                                  # the line goes on: nothing new to tell yet
    await _settle()
    assert more == []
    chan.feed(rid, 8)                                  # "...weights)\n": the line is complete
    await _settle()
    assert more == [(URI, len(BEFORE))]                # once
    s = await c.complete(URI, len(BEFORE), explicit=True)    # the editor asks again, the document unchanged
    assert s is not None and s.text == "compute_total(values, weights)" and len(chan.msgs) == 1
    chan.feed(rid, 100)
    await _settle()
    assert more == [(URI, len(BEFORE))]


async def test_no_more_text_notice_once_the_user_moved_on():
    c, chan, rid, more, s = await _shown_early("compute_total(values, weights)\n", 19)
    assert s is not None and s.text == "compute_total("
    text = BEFORE + "comp"                             # typed on, through the ghost text: the editor asks by itself
    c.on_change(URI, text, len(text))
    chan.feed(rid, 100)
    await _settle()
    assert more == []


async def test_a_line_that_turns_out_to_loop_is_not_announced():
    c, chan, rid, more, s = await _shown_early("a + a + a + a + a + a + a\n", 8)
    assert s is not None and s.text == "a + a +"           # "a + a + ": its settled words are shown
    chan.feed(rid, 100)                                # the whole line is a loop: nothing better to show
    await _settle()
    assert more == []


async def test_typing_through_a_shown_line_is_a_cache_hit_while_its_generation_streams_on():
    """A suggestion shown final goes into the prefix cache at once (item 3: typing through a shown completion
    is served with no request), not only when its generation ends."""
    c, chan, _ = _session("a + b\n    return total\n\n\nfor i in range(10):\n")
    ask = asyncio.create_task(c.complete(URI, len(BEFORE), explicit=True))
    await _settle()
    rid = next(iter(chan.msgs))
    chan.feed(rid, 6)
    assert (await ask).text == "a + b"
    await _settle()
    assert rid in chan.running()                       # the hot-streak lines are still coming
    text = BEFORE + "a "
    c.on_change(URI, text, len(text))
    s = await c.complete(URI, len(text), explicit=True)
    assert s is not None and s.text == "+ b" and s.source == "cache"
    assert len(chan.msgs) == 1 and rid in chan.running()
