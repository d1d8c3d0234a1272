"""Next-edit prompts in Zeta's layout, and the model's rewritten region → the smallest replacement.

The prompt is, in this order: an instruction, the document's recent edits as unified-diff hunks (oldest
first), then the excerpt — the text before the editable region, the region with the cursor marked, the text
after it — and the response opened with the region's start marker. The order keeps the cached head stable
while the user types: the instruction never changes, an older edit is final (only the newest one grows while
the user types in one place), and only the excerpt changes on every keystroke. Each part is tokenized on its
own, so a part's ids never depend on what follows it (the engine's prefix cache matches whole blocks).

The model answers with the region written again, up to the end marker; what it kept of the old region at the
start and at the end is taken off (`replacement`), so the answer is one range of the region and its new text.
"""
from __future__ import annotations

from tokenizers import Tokenizer

from quickcode.backend.eol import to_lf
from quickcode.backend.segments import keep_head, keep_tail
from quickcode.protocol import Edit, ErrorCode, ProtocolError

REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"
CURSOR = "<|user_cursor_is_here|>"
INSTRUCTION = ("### Instruction:\nYou are a code completion assistant. Analyze the user's edits, then "
               "rewrite the editable region of the excerpt as the user will edit it next, at the cursor or "
               "near it.\n\n### User Edits:\n\n")


def event_text(path: str, hunk: str) -> str:
    """One recent edit as the prompt shows it: the file, then its hunk in a diff block."""
    return f'User edited "{path}":\n```diff\n{hunk if hunk.endswith(chr(10)) else hunk + chr(10)}```\n\n'


def region_text(region: str, cursor_chars: int) -> str:
    """The editable region between its markers, with the cursor marked in it."""
    body = region[:cursor_chars] + CURSOR + region[cursor_chars:]
    return f"{REGION_START}\n{body}{'' if body.endswith(chr(10)) else chr(10)}{REGION_END}\n"


def edit_prompt(msg: Edit, tok: Tokenizer, bos_id: int | None, budget_tokens: int) -> list[int]:
    """The prompt ids of `msg` within `budget_tokens`: the region whole (refused when it alone does not fit),
    then the newest edits that fit, then as much of the text before and after the region as is left (lines
    nearest the region kept)."""
    def enc(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    head = ([bos_id] if bos_id is not None else []) + enc(INSTRUCTION)
    fence = enc(f"### User Excerpt:\n\n```{msg.path}\n")
    region = enc(region_text(to_lf(msg.region), msg.cursor_chars))
    tail = enc("```\n\n### Response:\n" + REGION_START + "\n")
    left = budget_tokens - len(head) - len(fence) - len(region) - len(tail)
    if left < 0:
        raise ProtocolError(ErrorCode.PROMPT_TOO_LONG,
                            f"the editable region does not fit the prompt budget of {budget_tokens} tokens",
                            msg.id)
    events: list[list[int]] = []
    for hunk in reversed(msg.events):                 # newest first: the oldest are the first to go
        ids = enc(event_text(msg.path, to_lf(hunk)))
        if len(ids) > left // 2:                      # edits take at most half of what the excerpt leaves
            break
        events.append(ids)
        left -= len(ids)
    before = keep_tail(tok, to_lf(msg.before), left * 3 // 4) if msg.before else []
    after = keep_head(tok, to_lf(msg.after), left - len(before)) if msg.after else []
    return [*head, *(i for ids in reversed(events) for i in ids), *fence, *before, *region, *after, *tail]


class RegionAnswer:
    """The model's streamed answer: the rewritten region, read until its end marker — or until it has settled:
    after writing something other than the old region, it is copying the old region again (a whole line of
    it, found once in what follows the change). The rest is then the old region's rest, so one edit is
    known without waiting for the model to copy it out (`SETTLE_CHARS` lines of at least that many visible
    characters; a shorter line is not proof enough)."""

    __slots__ = ("text", "closed", "old", "settled_rest")
    SETTLE_CHARS = 8

    def __init__(self, old_region: str | None = None):
        self.text, self.closed = "", False
        self.old = None if old_region is None else to_lf(old_region)
        self.settled_rest: str | None = None       # the old region's text after the line it copies again

    def feed(self, piece: str) -> bool:
        """Add streamed text; True once the end marker is written or the answer settled (nothing after it is
        needed)."""
        if not self.closed:
            self.text += piece
            self.closed = REGION_END in self.text or self._settled()
        return self.closed

    def _settled(self) -> bool:
        if self.old is None or not self.text.endswith("\n"):
            return False
        new = self.text.replace(CURSOR, "")
        head = _common_head(self.old, new)
        if head == len(new):                                   # still copying: nothing written yet
            return False
        line = new[new.rfind("\n", 0, len(new) - 1) + 1:]
        start = len(new) - len(line)
        if start <= head or len(line.strip()) < self.SETTLE_CHARS:   # the changed line itself, or too short
            return False
        at = self.old.find(line, head)
        if at < 0 or self.old.find(line, at + 1) >= 0 or (at > 0 and self.old[at - 1] != "\n"):
            return False
        self.settled_rest = self.old[at + len(line):]
        return True

    def region(self, old_region: str) -> str | None:
        """The new region in `old_region`'s line ends (None: the model never closed it, so it is no answer);
        the cursor marker it may have written again is dropped, and the newline the prompt added after a
        region without one."""
        if not self.closed:
            return None
        if self.settled_rest is not None:
            new = to_lf(self.text.replace(CURSOR, "")) + self.settled_rest
        else:
            new = to_lf(self.text[:self.text.index(REGION_END)].replace(CURSOR, ""))
        if not old_region.endswith("\n") and new.endswith("\n"):
            new = new[:-1]
        return new.replace("\n", "\r\n") if "\r\n" in old_region else new


def replacement(old: str, new: str) -> tuple[int, int, str] | None:
    """The smallest range of `old` and its text that make `new` (start, end, text), or None: no change.
    The common head is taken first, then the common tail of what is left."""
    if old == new:
        return None
    start = _common_head(old, new)
    tail = _common_head(old[start:][::-1], new[start:][::-1])
    return start, len(old) - tail, new[start:len(new) - tail]


def _common_head(a: str, b: str) -> int:
    """Length of the longest common start of `a` and `b` (slices compared whole: halving, no loop per
    character)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
