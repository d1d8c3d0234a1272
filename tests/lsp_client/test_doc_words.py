"""The rest of a word from the document's own identifiers (`doc_words_min_chars`, docwords.py): mid-word,
shown at once with no backend request; where the document has none, the backend is asked as before; an
explicit request always asks (virtual time, a fake channel)."""
from __future__ import annotations


import pytest

from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.docwords import SCAN_AFTER_CHARS, SCAN_BEFORE_CHARS, word_rest
from quickcode.lsp_client.session import Session
from tests.lsp_client.test_hot_streak_waste import BEFORE
from tests.lsp_client.test_session_property import URI, FakeChannel
from tests.lsp_client.test_skip_word_chars import _session as _quiet_session, _typed_and_asked


@pytest.mark.parametrize("prefix, suffix, n, rest", [
    ("width = 1\nif self.wi", "", 2, "dth"),                      # the identifier the document has
    ("width = 1\nif self.w", "", 2, ""),                          # fewer letters typed than asked for
    ("width = 1\nif self.w", "", 1, "idth"),
    ("wrap(x)\nwidth = 1\nwrap(y)\nif self.w", "", 1, "rap"),     # the most frequent of them
    ("wide = 1\nwidth = 1\nif self.wi", "", 2, "dth"),            # a tie: the one seen last
    ("w = width\nw = 2\nx = w", "", 1, ""),                       # the typed word is as frequent: complete
    ("width = 1\nif self.wi", "dth = 2", 2, ""),                  # the cursor inside a word
    ("if self.wi", "\nwidth = 1\n", 2, "dth"),                    # after the cursor too
    ("width = 1\nif self.wi", "", 0, ""),                         # off
    ("width = 1\nx = 1", "", 1, ""),                              # a digit ends no identifier
    ("width = 1\nx = wi", "", 2, "dth"),
    ("", "", 2, ""),
])
def test_the_rest_of_the_word_from_the_document(prefix, suffix, n, rest):
    assert word_rest(prefix, suffix, n) == rest


def test_only_a_bounded_window_around_the_cursor_is_read():
    far = "width = 1\n" + "x = 1\n" * (SCAN_BEFORE_CHARS // 6)          # beyond the window before the word
    assert word_rest(far + "if self.wi", "", 2) == ""
    assert word_rest("if self.wi", "x\n" * SCAN_AFTER_CHARS + "width = 1\n", 2) == ""
    assert word_rest("width = 1\n" + "x = 1\n" * 100 + "if self.wi", "", 2) == "dth"


def test_the_setting_is_range_checked():
    cfg = ClientConfig()
    assert cfg.doc_words_min_chars == 1                               # the default (bench typing)
    assert cfg.update({"docWordsMinChars": -1}) == ["docWordsMinChars"] and cfg.doc_words_min_chars == 1
    assert cfg.update({"docWordsMinChars": 2}) == [] and cfg.doc_words_min_chars == 2


def _session(n: int) -> tuple[Session, FakeChannel]:
    return _quiet_session(skip=0, doc_words=n)          # on "...def add(a, b):\n    total = "


async def test_mid_word_the_document_completes_the_word_and_nothing_is_asked():
    c, chan = _session(2)
    s = await (await _typed_and_asked(c, BEFORE + "to"))
    assert s is not None and s.text == "tal" and s.source == "document" and s.id.startswith("doc")
    assert chan.n == 0 and c.stats.served_document == 1 and c.stats.backend_requests == 0
    assert sum(c.stats.decisions().values()) == c.stats.requests
    c.on_accepted(s.id)                                  # its accept is counted like any suggestion's
    assert c.outcomes.counts["accepted"] == 1


async def test_where_the_document_has_no_such_word_or_too_few_letters_the_backend_is_asked():
    c, chan = _session(2)
    ask = await _typed_and_asked(c, BEFORE + "t")        # one letter: fewer than 2
    assert chan.n == 1 and c.stats.served_document == 0
    ask.cancel()
    ask = await _typed_and_asked(c, BEFORE + "zq")       # no identifier starts with "zq"
    assert chan.n == 2 and c.stats.served_document == 0
    ask.cancel()


async def test_off_or_explicit_it_asks_the_backend():
    for n, explicit in ((0, False), (2, True)):
        c, chan = _session(n)
        ask = await _typed_and_asked(c, BEFORE + "to", explicit)
        assert chan.n == 1 and c.stats.served_document == 0
        ask.cancel()
