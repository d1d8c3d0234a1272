"""Each document's recent edits as compact diffs, and the cursor's recent places: what a next-edit request
shows the model of what the user has been doing.

An edit is the whole lines it changed, before and after (`EditEvent`, a unified-diff hunk), found by the
common head and tail of the text before and after a change — so incremental and full sync give the same
events. Keystrokes that keep changing the lines the last edit wrote are one edit (Zed's Zeta coalesces them
so): typing a word is one event, not one per letter.

Invariants (tests/lsp_client/test_edits.py, fuzzed): per document at most `max_events` events of at most
`max_chars` characters in all, and at most `max_docs` documents; replaying the kept events, oldest first, onto
the text before the oldest of them gives the document's text now. What does not fit is forgotten from the
oldest end; one edit larger than the whole bound restarts the history at the text after it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from lru import LRU

from quickcode.protocol.edit_window import hunk_text


@dataclass(frozen=True)
class EditEvent:
    """Lines `start_line`.. of the older text (`old`, whole lines with their line ends) became `new`."""
    start_line: int
    old: str
    new: str

    @property
    def chars(self) -> int:
        return len(self.old) + len(self.new)

    def hunk(self) -> str:
        """As a unified-diff hunk (quickcode/protocol/edit_window.py)."""
        return hunk_text(self.start_line, self.old, self.new)

    def apply(self, text: str) -> str:
        """This edit made on `text` (ValueError if `text` does not hold its old lines there)."""
        start = line_offset(text, self.start_line)
        if start is None or not text.startswith(self.old, start):
            raise ValueError("the text does not hold this edit's old lines")
        return text[:start] + self.new + text[start + len(self.old):]


@dataclass
class DocEdits:
    events: deque[EditEvent]
    cursors: deque[tuple[int, int]]     # (line, column in characters), newest last
    chars: int = 0


class EditHistory:
    def __init__(self, max_events: int = 16, max_chars: int = 4000, max_docs: int = 32, max_cursors: int = 8):
        self.max_events, self.max_chars, self.max_cursors = max_events, max_chars, max_cursors
        self.docs: LRU = LRU(max(1, max_docs))   # uri → DocEdits, the least recently edited dropped first

    def record(self, uri: str, old: str, new: str) -> EditEvent | None:
        """The document `uri` changed from `old` to `new`: its edit, kept (coalesced with the last one when it
        changes only lines that one wrote); None when nothing changed."""
        event = line_diff(old, new)
        if event is None:
            return None
        doc = self._doc(uri)
        if doc.events and (merged := coalesce(doc.events[-1], event)) is not None \
                and merged.chars <= self.max_chars:
            doc.chars -= doc.events.pop().chars
            if merged.old == merged.new:                # typed and taken back: no edit left
                return None
            event = merged
        if event.chars > self.max_chars:             # larger than the whole bound: the history starts here
            doc.events.clear()
            doc.chars = 0
            return None
        doc.events.append(event)
        doc.chars += event.chars
        while len(doc.events) > self.max_events or doc.chars > self.max_chars:
            doc.chars -= doc.events.popleft().chars
        return event

    def cursor(self, uri: str, line: int, column: int) -> None:
        """The cursor was at (line, column in characters) of `uri`; a repeat of the last place is not kept."""
        cursors = self._doc(uri).cursors
        if not cursors or cursors[-1] != (line, column):
            cursors.append((line, column))

    def events(self, uri: str) -> list[EditEvent]:
        doc = self.docs.get(uri)
        return [] if doc is None else list(doc.events)

    def cursors(self, uri: str) -> list[tuple[int, int]]:
        doc = self.docs.get(uri)
        return [] if doc is None else list(doc.cursors)

    def forget(self, uri: str) -> None:
        if uri in self.docs:
            del self.docs[uri]

    def _doc(self, uri: str) -> DocEdits:
        doc = self.docs.get(uri)
        if doc is None:
            doc = self.docs[uri] = DocEdits(deque(), deque(maxlen=max(1, self.max_cursors)))
        return doc


def line_diff(old: str, new: str) -> EditEvent | None:
    """The whole lines that differ between `old` and `new` (None: the same text)."""
    if old is new or old == new:
        return None
    head = common_head(old, new)
    tail = common_tail(old, new, min(len(old), len(new)) - head)    # the common tail, after the head
    start = old.rfind("\n", 0, head) + 1                      # the changed lines start at a line start
    old_end, new_end = len(old) - tail, len(new) - tail
    grow = 0                                                  # ... and end at a line end on both sides
    if not (_line_edge(old, old_end) and _line_edge(new, new_end)):
        cut = old.find("\n", old_end)                         # (the common tail: the same in both)
        grow = len(old) - old_end if cut < 0 else cut + 1 - old_end
    return EditEvent(old.count("\n", 0, start), old[start:old_end + grow], new[start:new_end + grow])


def _line_edge(text: str, pos: int) -> bool:
    return pos in (0, len(text)) or text[pos - 1] == "\n"


def coalesce(last: EditEvent, event: EditEvent) -> EditEvent | None:
    """`last` then `event` as one edit, when `event` changes only lines `last` wrote (None: not so)."""
    if event.start_line < last.start_line:
        return None
    offset = line_offset(last.new, event.start_line - last.start_line)
    if offset is None or offset == len(last.new) or not last.new.startswith(event.old, offset):
        return None
    rest = last.new[offset + len(event.old):]
    return EditEvent(last.start_line, last.old, last.new[:offset] + event.new + rest)


def line_offset(text: str, line: int) -> int | None:
    """Where line `line` (zero-based) of `text` starts; its end when it has exactly `line` line ends and none
    after; None beyond."""
    pos = 0
    for _ in range(line):
        nl = text.find("\n", pos)
        if nl < 0:
            return None
        pos = nl + 1
    return pos


BLOCK = 4096     # characters compared at a time while the texts agree (one comparison in C, no big copies)


def common_head(a: str, b: str) -> int:
    """Length of the longest common start of `a` and `b`: block by block, then halving inside the block."""
    n, pos = min(len(a), len(b)), 0
    while pos + BLOCK <= n and a.startswith(b[pos:pos + BLOCK], pos):
        pos += BLOCK
    lo, hi = pos, min(n, pos + BLOCK)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[pos:mid], pos):
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_tail(a: str, b: str, limit: int) -> int:
    """Length of the longest common end of `a` and `b`, at most `limit`: as `common_head`, from the end."""
    n, k, la, lb = min(len(a), len(b), limit), 0, len(a), len(b)
    while k + BLOCK <= n and a.endswith(b[lb - k - BLOCK:lb - k], 0, la - k):
        k += BLOCK
    lo, hi = k, min(n, k + BLOCK)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.endswith(b[lb - mid:lb - k], 0, la - k):
            lo = mid
        else:
            hi = mid - 1
    return lo
