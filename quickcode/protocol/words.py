"""What a word of completion text is, for both sides of the wire.

The language server shows a suggestion word by word (`first_word`), and a request can ask the server to end it
once its first words are written (`Complete.max_words`, `words_end`): tokens past them would not be shown.
A word: the whitespace before it (a line break and indentation included), punctuation before it, the word, and
the punctuation right after it (`self.`, `append(`, `x, `).
"""
from __future__ import annotations

import re

_WORD = re.compile(r"\s*[^\w\s]*\w*[^\w\s]*")


def first_word(text: str) -> str:
    """The next word of `text` with the whitespace and punctuation around it (`first_word("self.x = 1")` is
    `"self."`); the whole text if it is one word."""
    m = _WORD.match(text)
    head = m.group(0) if m else ""
    return head if head.strip() else text


def words_end(text: str, n: int) -> int | None:
    """Where the first `n` words of `text` end, once they are complete (a character after them is written:
    `words_end("self.x", 1)` is 5); None while the n-th may still grow (`words_end("self", 1)`)."""
    pos = 0
    for _ in range(n):
        m = _WORD.match(text, pos)
        if m.end() >= len(text):
            return None
        pos = m.end()
    return pos
