"""A next edit's place in the document: the editable region around the cursor (the lines the edit may change)
and the text shown around it, the `Edit` request made of them, and the backend's `Replace` (offsets in the
region) → a range of the document, kept only inside the region. Offsets are Python string indices."""
from __future__ import annotations

from dataclasses import dataclass

from quickcode.protocol import Edit, Replace


@dataclass(frozen=True)
class Region:
    start: int           # the region's first character in the document (a line start)
    end: int             # after its last line's line end (or the document's end)
    cursor: int          # the cursor, in the document


@dataclass(frozen=True)
class NextEdit:
    start: int           # document[start:end] becomes `text`
    end: int
    text: str
    id: str              # names it in telemetry (the accept command)
    on_text: str         # the document text it applies to (compared by identity, then by value)


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


def placed(region: Region, answer: Replace, text: str, rid: str) -> NextEdit | None:
    """The backend's answer as an edit of `text`, or None: outside the region, or no change."""
    size = region.end - region.start
    if not 0 <= answer.start_chars <= answer.end_chars <= size:
        return None
    start, end = region.start + answer.start_chars, region.start + answer.end_chars
    if text[start:end] == answer.text:
        return None
    return NextEdit(start, end, answer.text, rid, text)
