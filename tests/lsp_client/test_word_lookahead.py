"""A bounded look-ahead by the word unit (`word_max_tokens`): a request generates the next word or two, not the
rest of the line (bench typing: 72 % of the decoded tokens were the tail of a line beyond the words shown); the
word after them is asked for anew where it starts (virtual time, a fake channel)."""
from __future__ import annotations

import random
from types import SimpleNamespace

from quickcode.lsp_client.clock import VirtualClock
from quickcode.lsp_client.config import ClientConfig, decode_tokens, max_words
from quickcode.lsp_client.session import Session
from quickcode.protocol import Done, FinishReason
from tests.lsp_client.test_hot_streak_waste import BEFORE, _settle
from tests.lsp_client.test_session_property import URI, FakeChannel
from tests.lsp_client.test_word_unit import _ask


def test_the_bound_applies_to_the_word_unit_only_and_never_to_a_warm_up():
    word, block = ClientConfig(word_max_tokens=6), ClientConfig(word_max_tokens=6, suggestion_unit="block")
    assert decode_tokens(word, None) == 6 and decode_tokens(block, None) == 64
    assert decode_tokens(ClientConfig(word_max_tokens=0), None) == 64         # 0: the whole line, as before
    assert decode_tokens(ClientConfig(), None) == 2                           # the default (bench typing)
    assert decode_tokens(word, None, prefill_only=True) == 1
    assert decode_tokens(ClientConfig(word_max_tokens=6), SimpleNamespace(max_tokens=4)) == 4   # the server's
    assert ClientConfig().update({"wordMaxTokens": -1}) == ["wordMaxTokens"]                    # limit first



def test_word_max_words_is_sent_by_the_word_unit_only_and_never_with_a_warm_up():
    assert max_words(ClientConfig()) == 1                                     # the default (bench typing)
    assert max_words(ClientConfig(word_max_words=0)) == 0                     # 0: no word stop
    assert max_words(ClientConfig(word_max_words=2)) == 2
    assert max_words(ClientConfig(word_max_words=2, suggestion_unit="block")) == 0
    assert max_words(ClientConfig(word_max_words=2), prefill_only=True) == 0
    assert ClientConfig().update({"wordMaxWords": 65}) == ["wordMaxWords"]


async def test_a_request_carries_word_max_words():
    c, chan = _session(word_max_words=1)
    ask, rid = await _ask(c, chan, BEFORE, "add(a")               # the server stops after the first word
    chan.feed(rid, 5)
    chan.streams[rid]._push(Done(id=rid, finish_reason=FinishReason.STOP))
    s = await ask
    assert chan.msgs[rid].max_words == 1 and s.text == "add("


async def test_the_next_word_past_the_bound_is_asked_for_where_it_starts():
    c, chan = _session(word_max_tokens=3)
    ask, rid = await _ask(c, chan, BEFORE, "add(a,")             # what 3 tokens of "add(a, b) + 1" are
    chan.feed(rid, 6)
    chan.streams[rid]._push(Done(id=rid, finish_reason=FinishReason.LENGTH))
    s = await ask
    assert chan.msgs[rid].max_tokens == 3 and s.text == "add("
    text = BEFORE + "add("                                      # taken; the next word is in the same request
    c.on_change(URI, text, len(text))
    c.on_accepted(s.id, len(s.text))
    s = await c.complete(URI, len(text), explicit=True)
    assert s is not None and s.text == "a," and len(chan.msgs) == 1
    text += "a,"                                                # taken: past the bound, a new request here
    c.on_change(URI, text, len(text))
    c.on_accepted(s.id, len(s.text))
    ask, rid2 = await _ask(c, chan, text, " b)")
    chan.feed(rid2, 3)
    s = await ask
    assert rid2 != rid and chan.msgs[rid2].prefix.endswith("add(a,") and chan.msgs[rid2].max_tokens == 3
    assert s is not None and s.text == " b)"


async def test_a_look_ahead_typed_through_to_its_end_while_it_finishes_asks_anew_instead_of_answering_nothing():
    """The editor asks where the bounded generation's text ends, before its end has arrived: the running request
    is reused, then ends with nothing beyond — a new request is made there (bench typing: 'self,' after
    'def __exit__(' answered empty in 8 ms with word_max_tokens 4)."""
    c, chan = _session(cache=False, word_max_tokens=3)
    ask, rid = await _ask(c, chan, BEFORE, "add(a")
    chan.feed(rid, 4)                                           # "add(": its 3 tokens, the end not yet told
    text = BEFORE + "add("                                      # the user typed it meanwhile
    c.on_change(URI, text, len(text))
    await ask
    again, _ = await _ask(c, chan, text)
    assert len(chan.msgs) == 1 and not again.done()             # waiting on the running request
    chan.streams[rid]._push(Done(id=rid, finish_reason=FinishReason.LENGTH))
    await _settle()
    assert len(chan.msgs) == 2 and not again.done()             # it ended with nothing more: asked anew
    rid2 = f"r{chan.n}"
    chan.planned[rid2] = "a, b)"
    chan.feed(rid2, 5)
    s = await again
    assert s is not None and s.text == "a," and chan.msgs[rid2].prefix.endswith("add(")


def _session(**cfg) -> tuple[Session, FakeChannel]:
    """A session on a fake channel in virtual time, nothing but the asked request in play, BEFORE open."""
    chan = FakeChannel(random.Random(0))
    c = Session(ClientConfig(predictor=False, learn_pauses=False, snippets=False, warmup=False, telemetry=False,
                             prefetch=False, **cfg), chan, clock=VirtualClock(), rng=random.Random(0).random)
    c.on_open(URI, "/t.py", "python", BEFORE)
    return c, chan
