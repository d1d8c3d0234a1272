"""What kind of place the cursor is at, read off the text before it on its line — the one classifier the
debounce (what a pause is learnt under), the pause points (ask without waiting) and the acceptance predictor
(a feature) all use.

`place_of` gives the fine kind; each user reads the grouping it needs from it (`Place.kind`, `Place.pause`,
`Place.char_class`), so they can never disagree about what is before the cursor.
"""
from __future__ import annotations

import re
from enum import Enum


class Place(Enum):
    #            value            debounce kind  pause   predictor class
    LINE = ("line", "line", True, "none")                 # nothing but indentation before the cursor
    OPEN = ("open", "open", True, "open")                 # ( [ {
    CLOSE = ("close", "close", False, "close")            # ) ] }
    DOT = ("dot", "dot", True, "dot")
    COLON = ("colon", "sep", True, "colon")               # (":=" is a colon-equals: see EQUALS)
    COMMA = ("comma", "sep", True, "comma")
    EQUALS = ("equals", "sep", True, "operator")          # = (also ==, :=, +=)
    ARROW = ("arrow", "other", True, "operator")          # -> or =>
    WORD = ("word", "word", False, "alpha")               # a letter or _
    DIGIT = ("digit", "word", False, "digit")
    QUOTE = ("quote", "other", False, "quote")
    OPERATOR = ("operator", "other", False, "operator")   # any other character
    SPACE_AFTER_WORD = ("space_after_word", "space", True, "space")   # a keyword or name just ended
    SPACE = ("space", "space", False, "space")            # after anything else

    def __init__(self, name: str, kind: str, pause: bool, char_class: str):
        self.kind = kind              # what the debounce learns gaps under (debounce.py)
        self.pause = pause            # where people usually stop typing and wait: ask without waiting
        self.char_class = char_class  # the predictor's feature (predictor.py)


CHAR_CLASSES = ("alpha", "digit", "space", "open", "close", "operator", "quote", "dot", "colon", "comma", "none")
_SINGLE = {"(": Place.OPEN, "[": Place.OPEN, "{": Place.OPEN, ")": Place.CLOSE, "]": Place.CLOSE,
           "}": Place.CLOSE, ".": Place.DOT, ":": Place.COLON, ",": Place.COMMA, "=": Place.EQUALS,
           "'": Place.QUOTE, '"': Place.QUOTE, "`": Place.QUOTE}
_WORD_THEN_SPACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s\Z")
_TAIL_CHARS = 80    # how far back a word before the space is looked for (bounded work on any line length)
_WORD_TAIL = re.compile(r"\w+\Z")


def place_of(line_prefix: str) -> Place:
    """The kind of place a cursor with `line_prefix` (its line, up to the cursor) before it is at."""
    if not line_prefix.strip():
        return Place.LINE
    ch = line_prefix[-1]
    if ch in _SINGLE:
        return _SINGLE[ch]
    if ch.isspace():
        return Place.SPACE_AFTER_WORD if _WORD_THEN_SPACE.search(line_prefix[-_TAIL_CHARS:]) else Place.SPACE
    if line_prefix.endswith(("->", "=>")):
        return Place.ARROW
    if ch.isalpha() or ch == "_":
        return Place.WORD
    if ch.isdigit():
        return Place.DIGIT
    return Place.OPERATOR


def chars_into_word(line_prefix: str) -> int:
    """How many word characters (letters, digits, _) come right before the cursor (0: not in a word; counted
    up to `_TAIL_CHARS`)."""
    m = _WORD_TAIL.search(line_prefix[-_TAIL_CHARS:])
    return len(m.group(0)) if m else 0
