"""How a client shapes a next-edit request (`Edit`): the editable region around the cursor, the text shown
around it, and a recent edit as the unified-diff hunk the prompt shows. Shared by the language server, which
sends them, and the edit model's training data, which must show the model the very same shapes. Offsets are
Python string indices."""
from __future__ import annotations

from dataclasses import dataclass

from quickcode.protocol.messages import Edit


@dataclass(frozen=True)
class Region:
    start: int           # the region's first character in the document (a line start)
    end: int             # after its last line's line end (or the document's end)
    cursor: int          # the cursor, in the document


def region_around(text: str, cursor: int, lines: int, max_chars: int) -> Region | None:
    """The cursor's line and up to `lines` lines above and below it, fewer while over `max_chars` (None: the
    cursor's line alone is longer). A cursor past the text (a position beyond it) is at its end."""
    cursor = min(max(cursor, 0), len(text))
    for n in range(lines, -1, -1):
        start = text.rfind("\n", 0, cursor) + 1
        for _ in range(n):
            start = text.rfind("\n", 0, start - 1) + 1 if start > 0 else 0
        end = cursor
        for _ in range(n + 1):
            nl = text.find("\n", end)
            end = len(text) if nl < 0 else nl + 1
        if end - start <= max_chars:
            return Region(start, end, cursor)
    return None

def edit_request(rid: str, text: str, region: Region, events: list[str], language: str, path: str,
                 context_chars: int, max_tokens: int, max_prompt_chars: int = 0) -> Edit:
    """The `Edit` for `region` of `text`: `context_chars` before and after it (whole lines where they are cut;
    both shortened to fit `max_prompt_chars` when the server says it), the recent edits as hunks."""
    room = context_chars
    if max_prompt_chars:
        left = max_prompt_chars - (region.end - region.start) - sum(map(len, events))
        room = max(0, min(room, left // 2))
    before = text[max(0, region.start - room):region.start]
    after = text[region.end:region.end + room]
    if region.start > room:                       # cut: from the first line start in the window
        before = before[before.find("\n") + 1:] if "\n" in before else ""
    if region.end + room < len(text):             # cut: up to the last line end in the window
        after = after[:after.rfind("\n") + 1]
    return Edit(id=rid, region=text[region.start:region.end], cursor_chars=region.cursor - region.start,
                before=before, after=after, events=events, language=language, path=path,
                max_tokens=max_tokens)


def hunk_text(start_line: int, old: str, new: str) -> str:
    """Lines `start_line`.. (zero-based, whole lines) `old` → `new` as a unified-diff hunk (one-based line
    numbers; a side with no lines starts before its line)."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    head = (f"@@ -{start_line + (1 if old_lines else 0)},{len(old_lines)} "
            f"+{start_line + (1 if new_lines else 0)},{len(new_lines)} @@\n")
    return head + "".join(f"-{x}\n" for x in old_lines) + "".join(f"+{x}\n" for x in new_lines)
