"""Raw model text → what the editor shows.

One line when the cursor is mid-line or after ordinary code; a block (until the indentation returns to the
level it started from) at the start of a line or after a block opener. The part that duplicates the text
after the cursor is trimmed, a closing bracket the suffix already supplies is not repeated, and empty,
whitespace-only or repetitive text is dropped, and so is text that would make the cursor's line a copy of the
line above or the line below it (as Continue drops a first line that rewrites the line above): a small model
often writes a neighbouring line again, and in code that is almost never what comes next
(docs/decisions.md#neighbour-copy). `cut` also says when the
shown text is final, so the stream can be stopped early (the rest of the generation is cancelled on the
backend).

`showable` is what to show of it, by the client's suggestion unit: the whole line or block, or its next word
(`first_word`, quickcode/protocol/words.py: the words after it come one by one as each is accepted) — a
developer takes a suggestion whole, and with a small model the first word is right far more often than the
line (docs/decisions.md#suggestion-unit).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from quickcode.lsp_client.context import Context
from quickcode.protocol.words import first_word

_PAIRS = {")": "(", "]": "[", "}": "{"}
_OPENERS = set(_PAIRS.values())
_BLOCK_OPENER = re.compile(r"[:{(\[]\s*$")
_CLOSERS_ONLY = set(")]}\"'`;,: ")
_WORD_TAIL = re.compile(r"\w+$")
# a unit of 2+ characters 4+ times in a row, one of 6+ characters 3+ times ("the number of the number of the
# number of"), or one character 8+ times; runs of whitespace are indentation or alignment, not loops
_REPEAT_UNIT = re.compile(r"(.{2,}?)\1{3,}|(.{6,}?)\2{2,}|(.)\3{7,}", re.S)
_NEIGHBOUR_CHARS = 4096     # how far the lines around the cursor are looked for (bounded on any line length)


@dataclass(frozen=True)
class Shape:
    multiline: bool
    indent: int                 # continuation lines need at least this indentation...
    strict: bool                # ...or more than it (after a block opener)
    line_prefix: str
    line_suffix: str
    suffix_lines: tuple[str, ...]   # the next non-empty lines after the cursor line, stripped
    max_lines: int
    line_above: str = ""        # the nearest non-blank lines before and after the cursor line, indentation kept
    line_below: str = ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def shape(ctx: Context, max_lines: int = 8) -> Shape:
    lp, ls = ctx.line_prefix, ctx.line_suffix
    rest = ls.strip()
    below = [x.rstrip() for x in ctx.suffix[:_NEIGHBOUR_CHARS].split("\n")[1:] if x.strip()]
    following = tuple(x.strip() for x in below[:3])
    before = ctx.prefix[max(0, len(ctx.prefix) - len(lp) - _NEIGHBOUR_CHARS): len(ctx.prefix) - len(lp)]
    above = next((x.rstrip() for x in reversed(before.split("\n")) if x.strip()), "")
    near = {"line_above": above, "line_below": below[0] if below else ""}
    if rest and not set(rest) <= _CLOSERS_ONLY:
        return Shape(False, 0, False, lp, ls, following, 1, **near)            # mid-line: one line
    if not lp.strip() and not rest:
        return Shape(True, len(lp), False, lp, ls, following, max_lines, **near)   # fresh (indented) line: a block
    if _BLOCK_OPENER.search(lp) and not rest:
        return Shape(True, _indent(lp), True, lp, ls, following, max_lines, **near)  # after `:` / `{`: its body
    return Shape(False, 0, False, lp, ls, following, 1, **near)


def copies_a_neighbour(text: str, sh: Shape) -> bool:
    """`text` shown at the cursor would make the cursor's line the line above or the line below it, character
    for character (indentation included: closing brackets stacked at different depths are not copies), and
    that line has a letter or digit (a bare `#` of a comment block, a `)` or `---` repeat for good reason: the
    one copy the typing benchmark's recorded sessions accepted was a `#` line)."""
    first, nl, _ = text.partition("\n")
    line = (sh.line_prefix + first + ("" if nl else sh.line_suffix)).rstrip()
    return line in (sh.line_above, sh.line_below) and any(c.isalnum() for c in line)


def _balance(line_prefix: str, text: str, line_suffix: str) -> str:
    """Cut before a closer that matches nothing opened on this line when the suffix already starts with it."""
    stack = [c for c in _open_brackets(line_prefix)]
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "\"'`":
            quote = ch
        elif ch in _OPENERS:
            stack.append(ch)
        elif ch in _PAIRS:
            if stack and stack[-1] == _PAIRS[ch]:
                stack.pop()
            elif line_suffix.lstrip().startswith(ch):
                return text[:i]
    return text


def _open_brackets(s: str) -> list[str]:
    stack: list[str] = []
    quote = None
    for ch in s:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in _OPENERS:
            stack.append(ch)
        elif ch in _PAIRS and stack and stack[-1] == _PAIRS[ch]:
            stack.pop()
    return stack


def _trim_suffix_overlap(text: str, line_suffix: str) -> str:
    """Drop the end of `text` that the text after the cursor repeats (e.g. `a, b)` before `)`)."""
    ls = line_suffix.rstrip()
    for k in range(min(len(ls), len(text)), 0, -1):
        if text.endswith(ls[:k]):
            return text[: len(text) - k]
    return text


def trim_repetition(text: str) -> tuple[str, bool]:
    """(text without its looping tail, whether a loop was found). A line (or a pair of lines) said again
    right after keeps its first copy; a unit repeated within a line (not whitespace: indentation and
    alignment are not loops) keeps what came before it; if the loop is most of the text (or nothing sensible
    is left), nothing is kept."""
    lines = text.split("\n")
    stripped = [x.strip() for x in lines]
    for i in range(len(lines) - 1):
        for period in (1, 2):            # a line, or a pair of lines, said again
            if i + 2 * period <= len(lines) and stripped[i] and \
                    stripped[i:i + period] == stripped[i + period:i + 2 * period]:
                head = "\n".join(lines[: i + period])
                return (head if head.strip() else ""), True
    start = 0
    for line in lines:                   # within lines: the search is quadratic in the length searched
        m = next((m for m in _REPEAT_UNIT.finditer(line) if m.group(0).strip()), None)
        if m and len(m.group(0)) >= 8:
            head = text[: start + m.start()]
            if len(m.group(0)) >= 0.5 * len(text.strip()) or not head.strip():
                return "", True
            return head.rstrip(), True
        start += len(line) + 1
    return text, False


def cut(raw: str, sh: Shape, finished: bool) -> tuple[str, bool]:
    """(text to show now, final). Not final: more chunks may still change it (keep streaming)."""
    if not sh.multiline:
        nl = raw.find("\n")
        line = raw if nl < 0 else raw[:nl]
        final = finished or nl >= 0
        text = _trim_suffix_overlap(_balance(sh.line_prefix, line, sh.line_suffix), sh.line_suffix).rstrip()
        text, looped = trim_repetition(text)
        return (text if text.strip() else ""), final or looped
    lines = raw.split("\n")
    complete = lines if finished else lines[:-1]
    out: list[str] = []
    final = finished
    for i, line in enumerate(complete):
        if i > 0 and line.strip():
            ind = _indent(line)
            if ind < sh.indent or (sh.strict and ind <= sh.indent) or line.strip() in sh.suffix_lines:
                final = True                      # the block ended, or the suffix follows from here
                break
        out.append(line)
        if sum(1 for x in out if x.strip()) >= sh.max_lines:
            final = True
            break
    if not final and not finished and len(lines) > 1 and lines[-1].strip():
        ind = _indent(lines[-1])            # a partial line already shows its indentation
        final = ind < sh.indent or (sh.strict and ind <= sh.indent)
    text = "\n".join(out).rstrip()
    if not out and not finished:
        return "", False
    text, looped = trim_repetition(text)
    final = final or looped
    if not text.strip():
        return "", final
    if "\n" not in text:
        text = _trim_suffix_overlap(_balance(sh.line_prefix, text, sh.line_suffix), sh.line_suffix)
    return text, final


def early(raw: str, sh: Shape) -> str:
    """What a stream still being written can show already (its patience is spent): its complete lines and
    the settled words of the line being written — the word being written may still grow, and a ghost text
    must only ever grow by what the user types through, never change under them."""
    text, final = cut(raw, sh, finished=False)
    if final:
        return text
    head, nl, last = raw.rpartition("\n")
    return cut(head + nl + _WORD_TAIL.sub("", last), sh, finished=True)[0]


def showable(raw: str, sh: Shape, finished: bool, patient: bool, unit: str = "block") -> tuple[str, bool]:
    """(text to show now, final) for a stream at `sh`. unit "block": the line or block (`cut`), and while it is
    still being written, once `patient` (its patience spent), its settled words (`early`). unit "word": its
    first word, final as soon as a character after it has arrived (no patience: the word will not change)."""
    text, final = cut(raw, sh, finished)
    done = final or finished
    if unit == "word":
        settled = text if done else early(raw, sh)
        word = first_word(settled) if settled else ""
        if word and copies_a_neighbour(word, sh):
            return "", True
        return (word, True) if settled else ("", done)
    if not done:
        text = early(raw, sh) if patient else ""
    if text and copies_a_neighbour(text, sh):
        return "", True
    return text, done
