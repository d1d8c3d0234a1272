"""No request a letter into a word (`skip_word_chars`): the prompt would end inside a token and the model
completes the lone letter as a whole name (bench typing: `if s` → `:`, `i` → ` =`; 135 of 959 requests, 2 of
451 characters accepted). The cache and running requests still answer there; an explicit request always asks
(virtual time, a fake channel)."""
from __future__ import annotations

import asyncio
import random

import pytest

from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.places import chars_into_word
from quickcode.lsp_client.session import Session
from tests.lsp_client.test_hot_streak_waste import BEFORE, _settle
from tests.lsp_client.test_session_property import URI, FakeChannel


@pytest.mark.parametrize("line_prefix, n", [
    ("    total = s", 1), ("    if se", 2), ("x = self.w", 1), ("foo(a_1", 3), ("    ", 0), ("x = ", 0),
    ("f(x)", 0), ("", 0), ("y" * 500, 80),
])
def test_the_characters_into_the_word_before_the_cursor(line_prefix, n):
    assert chars_into_word(line_prefix) == n


def test_the_setting_is_range_checked():
    cfg = ClientConfig()
    assert cfg.skip_word_chars == 1                                   # the default (bench typing)
    assert cfg.update({"skipWordChars": -1}) == ["skipWordChars"] and cfg.skip_word_chars == 1
    assert cfg.update({"skipWordChars": 65}) == ["skipWordChars"] and cfg.skip_word_chars == 1
    assert cfg.update({"skipWordChars": 0}) == [] and cfg.skip_word_chars == 0


def _session(skip: int, doc_words: int = 0) -> tuple[Session, FakeChannel]:
    """A session on BEFORE with only the mid-word settings of these tests on (also
    tests/lsp_client/test_doc_words.py)."""
    chan = FakeChannel(random.Random(0))
    cfg = ClientConfig(predictor=False, learn_pauses=False, adaptive_debounce=False, snippets=False,
                       warmup=False, telemetry=False, prefetch=False, skip_word_chars=skip,
                       doc_words_min_chars=doc_words)
    c = Session(cfg, chan, clock=VirtualClock(), rng=random.Random(0).random)
    c.on_open(URI, "/t.py", "python", BEFORE)
    return c, chan


async def _typed_and_asked(c: Session, text: str, explicit: bool = False) -> asyncio.Task:
    c.on_change(URI, text, len(text))
    task = asyncio.create_task(c.complete(URI, len(text), explicit=explicit))
    await _settle()
    return task


async def test_no_request_one_letter_into_a_word_but_one_at_the_second():
    c, chan = _session(1)
    ask = await _typed_and_asked(c, BEFORE + "s")
    assert await ask is None and chan.n == 0 and c.stats.skipped_place == 1
    ask = await _typed_and_asked(c, BEFORE + "su")
    assert chan.n == 1 and not ask.done()                  # two letters in: asked
    chan.planned["r1"] = "m(a)\n"
    chan.feed("r1", 5)
    s = await ask
    assert s is not None and s.text == "m(" and c.stats.skipped_place == 1
    assert sum(c.stats.decisions().values()) == c.stats.requests      # each request ended one way


async def test_off_it_asks_there_and_an_explicit_request_always_asks():
    c, chan = _session(0)
    ask = await _typed_and_asked(c, BEFORE + "s")
    assert chan.n == 1 and c.stats.skipped_place == 0
    ask.cancel()
    c, chan = _session(1)
    ask = await _typed_and_asked(c, BEFORE + "s", explicit=True)
    assert chan.n == 1 and c.stats.skipped_place == 0
    ask.cancel()


async def test_the_cache_still_answers_one_letter_into_a_word():
    c, chan = _session(1)
    ask = await _typed_and_asked(c, BEFORE)                 # after "= ": asked
    chan.planned["r1"] = "sum(a, b)\n"
    chan.feed("r1", 10)
    s = await ask
    assert s is not None and s.text == "sum("
    ask = await _typed_and_asked(c, BEFORE + "s")            # typed through its first letter: from the cache
    s = await ask
    assert s is not None and s.text == "um(" and chan.n == 1 and c.stats.skipped_place == 0
