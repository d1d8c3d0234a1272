"""A next edit's place in the document: the backend's `Replace` (offsets in the editable region,
quickcode/protocol/edit_window.py) → a range of the document, kept only inside the region. Offsets are Python
string indices."""
from __future__ import annotations

from dataclasses import dataclass

from quickcode.protocol import Replace
from quickcode.protocol.edit_window import Region


@dataclass(frozen=True)
class NextEdit:
    start: int           # document[start:end] becomes `text`
    end: int
    text: str
    id: str              # names it in telemetry (the accept command)
    on_text: str         # the document text it applies to (compared by identity, then by value)


def placed(region: Region, answer: Replace, text: str, rid: str) -> NextEdit | None:
    """The backend's answer as an edit of `text`, or None: outside the region, or no change."""
    size = region.end - region.start
    if not 0 <= answer.start_chars <= answer.end_chars <= size:
        return None
    start, end = region.start + answer.start_chars, region.start + answer.end_chars
    if text[start:end] == answer.text:
        return None
    return NextEdit(start, end, answer.text, rid, text)
