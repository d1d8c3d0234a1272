"""The rest of the word being typed, from the document's own identifiers — no backend request.

Mid-word, the model is asked on a prompt that ends inside a token and rarely finishes the word, while the
identifier is usually one the document already has (`self.w` → `idth`): the most frequent identifier of the
prompt window that extends the typed letters is most often what comes next (docs/decisions.md#doc-words).
So there the language server shows that rest at once and asks nothing; where the document has no such
identifier, the backend is asked as before.

Pure: the caller passes the text around the cursor (the request's context window; at most `SCAN_BEFORE_CHARS`
before the word and `SCAN_AFTER_CHARS` after the cursor are read).
"""
from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_TAIL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_WORD_CHAR = re.compile(r"\w")
SCAN_BEFORE_CHARS, SCAN_AFTER_CHARS = 8000, 2000   # bounded work per keystroke, whatever the window settings


def word_rest(prefix: str, suffix: str, min_chars: int) -> str:
    """What completes the identifier before the cursor ("" for nothing): the most frequent identifier of
    `prefix` + `suffix` that extends the at least `min_chars` characters typed of it (ties: the one seen last
    before the cursor), unless the typed word itself is as frequent (it is likely complete) or the cursor is
    inside a word (`suffix` goes on with word characters). 0: off."""
    tail = _WORD_TAIL.search(prefix[-80:]) if min_chars > 0 else None
    if tail is None or len(tail.group(0)) < min_chars or _WORD_CHAR.match(suffix[:1]):
        return ""
    typed, start = tail.group(0), len(prefix) - len(tail.group(0))
    counts: dict[str, int] = {}
    last: dict[str, int] = {}
    around = ((prefix[max(0, start - SCAN_BEFORE_CHARS):start], True), (suffix[:SCAN_AFTER_CHARS], False))
    for text, before in around:
        for m in _IDENT.finditer(text):
            w = m.group(0)
            if w.startswith(typed):
                counts[w] = counts.get(w, 0) + 1
                last[w] = m.start() if before else last.get(w, -1)
    longer = [(n, last[w], w) for w, n in counts.items() if len(w) > len(typed)]
    if not longer:
        return ""
    n, _, best = max(longer)
    return "" if counts.get(typed, 0) >= n else best[len(typed):]
