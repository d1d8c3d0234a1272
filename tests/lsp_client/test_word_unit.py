"""The suggestion shown word by word (suggestion_unit "word", the default): a word is shown as soon as it is
settled, the next ones come from the same request as each is taken, and a line start asks for one line
(virtual time, a fake channel)."""
from __future__ import annotations

import asyncio
import random

import pytest

from quickcode.lsp_client import postprocess as pp
from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.session import Session
from quickcode.protocol.words import words_end
from tests.support.cursor import at
from tests.lsp_client.test_hot_streak_waste import BEFORE, _settle
from tests.lsp_client.test_session_property import URI, FakeChannel


@pytest.mark.parametrize("text, word", [
    ("self.assertEqual(x, y)", "self."), ("assertEqual(x, y)", "assertEqual("), ("x, y)", "x,"), (" y)", " y)"),
    ("return total", "return"), ("\n    total = 1", "\n    total"), (".append(x)", ".append("), ("foo", "foo"),
])
def test_the_next_word_carries_the_whitespace_and_punctuation_around_it(text, word):
    assert pp.first_word(text) == word



@pytest.mark.parametrize("text, n, end", [
    ("self.x = 1", 1, 5), ("self.x = 1", 2, 6), ("self.x = 1", 3, 8), ("self.x = 1", 4, None), ("self", 1, None),
    ("self.", 1, None), ("", 1, None), ("\n    total = 1", 1, 10), ("  ", 1, None), ("foo(a", 1, 4),
])
def test_words_end_once_a_character_after_them_is_written(text, n, end):
    """The server's `max_words` stop (quickcode/protocol/words.py): the same words the client shows, complete only when a
    character after them has arrived."""
    assert words_end(text, n) == end
    if end is not None:
        assert text[:end] == "".join(_words(text, n)) and pp.first_word(text) == text[:words_end(text, 1)]


def _words(text: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        w = pp.first_word(text)
        out.append(w)
        text = text[len(w):]
    return out


def test_a_word_is_final_once_a_character_after_it_arrived_and_never_waits_for_the_patience():
    _, _, ctx = at("x = ║\n")
    sh = pp.shape(ctx)
    assert pp.showable("compute", sh, finished=False, patient=False, unit="word") == ("", False)
    assert pp.showable("compute(", sh, finished=False, patient=False, unit="word") == ("compute(", True)
    assert pp.showable("compute(a, b)\n", sh, finished=False, patient=False, unit="word") == ("compute(", True)
    assert pp.showable("total", sh, finished=True, patient=False, unit="word") == ("total", True)
    # the line unit: the same stream shows nothing before it is final or the patience is spent
    assert pp.showable("compute(a, ", sh, finished=False, patient=False, unit="block") == ("", False)
    assert pp.showable("compute(a, ", sh, finished=False, patient=True, unit="block") == ("compute(a,", False)


def _session(unit: str = "word") -> tuple[Session, FakeChannel, VirtualClock]:
    chan = FakeChannel(random.Random(0))
    clock = VirtualClock()
    cfg = ClientConfig(predictor=False, learn_pauses=False, snippets=False, warmup=False, telemetry=False,
                       prefetch=False, suggestion_unit=unit)
    c = Session(cfg, chan, clock=clock, rng=random.Random(0).random)
    c.on_open(URI, "/t.py", "python", BEFORE)
    return c, chan, clock


async def _ask(c: Session, chan: FakeChannel, text: str, plan: str | None = None):
    ask = asyncio.create_task(c.complete(URI, len(text), explicit=True))
    await _settle()
    if plan is not None:
        rid = f"r{chan.n}"
        chan.planned[rid] = plan
        return ask, rid
    return ask, None


async def test_each_word_taken_brings_the_next_from_the_same_request():
    c, chan, clock = _session()
    ask, rid = await _ask(c, chan, BEFORE, "add(a, b) + 1\n    return total\n")
    chan.feed(rid, 4)                                  # "add(": the first word is settled at once
    s = await ask
    assert s is not None and s.text == "add(" and clock.now() == 0.0   # no patience waited (virtual time)
    text = BEFORE
    for word, then in (("add(", "a,"), ("a,", " b)"), (" b)", " +"), (" +", " 1")):
        assert s.text == word
        text += word                                   # the word is taken (Tab), and the editor asks again
        c.on_change(URI, text, len(text))
        c.on_accepted(s.id, len(word))
        chan.feed(rid, 3)
        s = await c.complete(URI, len(text), explicit=True)
        assert s is not None and s.text == then
    assert len(chan.msgs) == 1                         # one backend request for the whole line
    assert c.stats.served_cache + c.stats.served_inflight == 4


PLAN = "total = a + b\n    total += 1\n    return total\n"
LINE_START = BEFORE[: -len("total = ")]                 # the start of an indented line: a block place


async def _asked_at_the_line_start(unit: str):
    """A session of suggestion unit `unit` asked at LINE_START, its request about to stream PLAN."""
    c, chan, _ = _session(unit)
    c.on_change(URI, LINE_START, len(LINE_START))
    ask, rid = await _ask(c, chan, LINE_START, PLAN)
    return c, chan, ask, rid


async def test_a_line_start_asks_for_one_line_word_by_word_and_its_generation_stops_at_the_lines_end():
    c, chan, ask, rid = await _asked_at_the_line_start("word")
    chan.feed(rid, 6)
    s = await ask
    assert s is not None and s.text == "total"
    chan.feed(rid, 12)                                 # the first line is complete, the next one begun
    await _settle()
    assert rid not in chan.running() and c.stats.stopped_early == 1   # one line was asked for: stopped
    # the block unit, same stream: the block goes on (and nothing is shown before it ends or the patience)
    c, chan, ask, rid = await _asked_at_the_line_start("block")
    chan.feed(rid, 18)
    await _settle()
    assert rid in chan.running() and not ask.done()
    ask.cancel()


async def test_the_line_unit_shows_the_first_line_whole_at_a_line_start_and_stops_the_generation_there():
    c, chan, ask, rid = await _asked_at_the_line_start("line")
    chan.feed(rid, 18)                                 # the first line is complete, the next one begun
    s = await ask
    assert s is not None and s.text == "total = a + b"
    await _settle()
    assert rid not in chan.running() and c.stats.stopped_early == 1   # one line was asked for: stopped


async def test_the_block_unit_shows_the_whole_line_once_it_is_final():
    c, chan, _ = _session("block")
    ask, rid = await _ask(c, chan, BEFORE, "add(a, b) + 1\n    return total\n")
    chan.feed(rid, 14)
    s = await ask
    assert s is not None and s.text == "add(a, b) + 1"


def test_a_setting_outside_its_choices_is_refused():
    cfg = ClientConfig()
    assert cfg.update({"suggestionUnit": "sentence"}) == ["suggestionUnit"] and cfg.suggestion_unit == "word"
    assert cfg.update({"suggestionUnit": "block"}) == [] and cfg.suggestion_unit == "block"
    assert cfg.update({"suggestionUnit": "line"}) == [] and cfg.suggestion_unit == "line"
