"""What the simulated developer takes of a ghost text (pure logic, no I/O): the kinds of developer.

  whole   takes a suggestion only when all of it is what they were about to type (Tab), else nothing
  word    the same when all of it is right; otherwise takes its right words with accept-next-word (VS
          Code's Ctrl+Right, `editor.action.inlineSuggest.acceptNextWord`; Neovim and JetBrains have the
          same), pressed while the next word is still right: the longest prefix that is right and ends where
          a word step ends — but not whitespace alone: VS Code's first press takes the whitespace before a
          word by itself, and when the word after it is wrong the developer takes nothing (they type Space or
          Enter as for any wrong suggestion; the editor indents a new line)

A word step is VS Code's (src/vs/editor/contrib/inlineCompletions/browser/model/inlineCompletionsModel.ts,
acceptNextWord): in the ghost text still to accept, find the first word of the language's word definition
(Python has none of its own: the default, a number like `-1.5` or a run of anything but separators and
whitespace); a word at the start is taken to its end, else the text up to the word; and if a whitespace run
ends before that, only up to the end of that run.
"""
from __future__ import annotations

import re

DEVELOPERS = ("whole", "word")

_SEPARATORS = "`~!@#$%^&*()-=+[{]}\\|;:'\",.<>/?"        # VS Code's USUAL_WORD_SEPARATORS
# VS Code's DEFAULT_WORD_REGEXP; JavaScript's \d and \w are ASCII, its \s is Unicode (as Python's)
WORD = re.compile(r"(-?[0-9]*\.[0-9][A-Za-z0-9_]*)|([^" + re.escape(_SEPARATORS) + r"\s]+)")
SPACE = re.compile(r"\s+")


def next_word_len(text: str) -> int:
    """Characters one accept-next-word takes of `text` (the ghost text still to accept); ≥ 1 unless empty."""
    word = WORD.search(text)
    n = len(text) if word is None else (word.end() if word.start() == 0 else word.start())
    space = SPACE.search(text)
    if space is not None and space.end() < n:
        n = space.end()
    return n


def word_stops(text: str) -> list[int]:
    """Where accept-next-word pressed again and again stops in `text`: increasing, the last is len(text)."""
    stops, at = [], 0
    while at < len(text):
        at += next_word_len(text[at:])
        stops.append(at)
    return stops


def accept_steps(text: str, chars: int) -> list[tuple[str, int]]:
    """Taking the first `chars` of `text` (a word stop) with accept-next-word: per press, the text it inserts
    and the length accepted so far (what VS Code reports to the extension after each press)."""
    stops = [s for s in word_stops(text) if s <= chars]
    return [(text[a:b], b) for a, b in zip([0, *stops], stops)]


def accepted_len(text: str, rest: str, developer: str) -> int:
    """Characters of the ghost text `text` the developer takes when `rest` is what they are about to type:
    all of it when it is all right (either kind); for the word developer, else the longest run of word steps
    that is right and more than whitespace; 0 when there is none (a wrong first word)."""
    if developer not in DEVELOPERS:
        raise ValueError(f"developer: one of {DEVELOPERS} (got {developer!r})")
    if rest.startswith(text):
        return len(text)
    if developer == "whole":
        return 0
    taken = 0
    for stop in word_stops(text):
        if not rest.startswith(text[:stop]):
            break
        taken = stop
    return taken if text[:taken].strip() else 0
