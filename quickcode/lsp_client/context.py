"""Document + cursor offset → the prefix/suffix windows sent to the backend.

Windows are cut at line boundaries and move in steps of `quantum` lines, so from one keystroke to the next
the prompt only grows at the cursor: the backend's prefix cache keeps hitting. A line longer than a window
(minified code, data) is cut inside it: the prefix starts at a multiple of `LONG_LINE_STEP` characters into
its line (again stable while typing), the suffix ends `suffix_max_chars` after the cursor — so every window,
and everything built from it (line parts, cache keys, prompts), is bounded on any line length. Offsets here
are Python string indices; the LSP position (UTF-16 by default) is converted by the caller (pygls' codec).
"""
from __future__ import annotations

from dataclasses import dataclass


LONG_LINE_STEP = 256   # a prefix window inside a long line starts at a multiple of this into the line


@dataclass(frozen=True)
class Context:
    prefix: str          # window text before the cursor (starts at a line start, unless its line is too long)
    suffix: str          # window text after the cursor (ends at a line end, unless its line is too long)
    line_prefix: str     # the cursor line before the cursor, within the window
    line_suffix: str     # the cursor line after the cursor, within the window
    language: str
    path: str
    prefix_start: int = 0   # document offset where `prefix` begins (the cursor is at prefix_start + len(prefix))
    suffix_cut: bool = False    # the suffix window ends inside a line (its line is longer than the window)

    @property
    def suffix_head(self) -> str:
        """Rest of the cursor line and the next line: what must not change for a cached completion to stay valid."""
        first = self.suffix.find("\n")
        if first < 0:
            return self.suffix
        second = self.suffix.find("\n", first + 1)
        return self.suffix if second < 0 else self.suffix[:second]

    @property
    def head_cut(self) -> bool:
        """The suffix head ends where the window cut a long line, not at a line end."""
        return self.suffix_cut and self.suffix_head == self.suffix


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def prefix_start(text: str, cursor: int, max_chars: int, quantum: int) -> int:
    """First offset of the prefix window: the earliest line start whose line number is a multiple of
    `quantum` and that keeps the window within `max_chars` (or the cursor line start if none fits)."""
    if cursor <= max_chars:
        return 0
    start = text.find("\n", cursor - max_chars) + 1
    line_start_of_cursor = _line_start(text, cursor)
    if start == 0 or start > line_start_of_cursor:
        return line_start_of_cursor
    line_no = text.count("\n", 0, start)
    skip = (-line_no) % quantum
    for _ in range(skip):
        nxt = text.find("\n", start) + 1
        if nxt == 0 or nxt > line_start_of_cursor:
            return line_start_of_cursor
        start = nxt
    return start


def first_window_end(text: str, max_chars: int) -> int:
    """Where to warm a document just opened (the editor does not say where its cursor is): the end of the last
    line that fits the first prefix window. Every cursor inside that window then finds its prompt's head in
    the engine's prefix cache; a short file is warmed whole."""
    if len(text) <= max_chars:
        return len(text)
    end = text.rfind("\n", 0, max_chars + 1)
    return end if end > 0 else max_chars


def suffix_end(text: str, cursor: int, max_chars: int, max_lines: int = 60) -> int:
    """End of the suffix window: whole lines after the cursor line, counted from the cursor line so the
    window does not move while the user types within a line."""
    end = text.find("\n", cursor)
    if end < 0:
        return len(text)
    limit = cursor + max_chars
    for _ in range(max_lines):
        nxt = text.find("\n", end + 1)
        if nxt < 0:
            return len(text) if len(text) <= limit else end
        if nxt > limit:
            return end
        end = nxt
    return end


def window_chars(cfg, welcome) -> tuple[int, int]:
    """(prefix, suffix) window sizes: the settings `cfg.prefix_max_chars`/`suffix_max_chars`, within the
    characters the server's model reads (`welcome.context_chars`; no welcome or 0 = unknown: the settings as
    they are). The suffix keeps at most a quarter, as the server's prompt budget gives it; the prefix the rest.
    A window the server would cut moves its start with every line typed, and the prefix cache misses each time."""
    context_chars = welcome.context_chars if welcome is not None else 0
    if context_chars <= 0:
        return cfg.prefix_max_chars, cfg.suffix_max_chars
    suffix = min(cfg.suffix_max_chars, context_chars // 4)
    return max(1, min(cfg.prefix_max_chars, context_chars - suffix)), suffix


def build(text: str, cursor: int, language: str, path: str, *, prefix_max_chars: int, suffix_max_chars: int,
          quantum: int) -> Context:
    cursor = max(0, min(cursor, len(text)))
    prefix_max_chars, suffix_max_chars = max(1, prefix_max_chars), max(0, suffix_max_chars)
    p0 = prefix_start(text, cursor, prefix_max_chars, max(1, quantum))
    if cursor - p0 > prefix_max_chars:          # the cursor line alone is longer than the window: cut inside it
        step = min(LONG_LINE_STEP, prefix_max_chars)
        p0 += ((cursor - prefix_max_chars - p0) // step + 1) * step
    natural = suffix_end(text, cursor, suffix_max_chars)
    s1 = min(natural, cursor + suffix_max_chars)
    ls = max(_line_start(text, cursor), p0)
    le = text.find("\n", cursor, s1)
    le = s1 if le < 0 else le
    return Context(prefix=text[p0:cursor], suffix=text[cursor:s1], line_prefix=text[ls:cursor],
                   line_suffix=text[cursor:le], language=language, path=path, prefix_start=p0, suffix_cut=s1 < natural)
