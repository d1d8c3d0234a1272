"""Never stale: an answer is checked against the document as it is when it is sent, not as it was asked.

A request names a cursor in the document as the editor had it when it asked; by the time the answer goes out
the user may have typed on (Neovim does not cancel while typing; a busy event loop reads the edits late). If
what happened since is typing at that cursor — the document is the old text with something inserted there —
the cursor moved by what was typed, and a suggestion the user typed into is still good for its rest, at the
new cursor. Anything else (typed something else, deleted, edited elsewhere before the cursor, moved text
around) leaves nothing to answer. Offsets are Python string indices into the document text.
"""
from __future__ import annotations

from dataclasses import replace

from quickcode.lsp_client.documents import Suggestion
from quickcode.lsp_client.edit_region import NextEdit


def moved_cursor(text_then: str, cursor_then: int, text_now: str) -> int | None:
    """Where the cursor is in `text_now` if the only change since `text_then` is text typed at `cursor_then`
    (None: any other change)."""
    if text_now is text_then or text_now == text_then:
        return cursor_then
    grown = len(text_now) - len(text_then)
    if grown <= 0 or not 0 <= cursor_then <= len(text_then):
        return None
    if text_now.startswith(text_then[:cursor_then]) and text_now.endswith(text_then[cursor_then:]):
        return cursor_then + grown
    return None


def rebase(text_then: str, cursor_then: int, suggestion: str, text_now: str) -> tuple[str, int] | None:
    """`suggestion` (to insert at `cursor_then` in `text_then`) as it applies to `text_now`: (what is left of it,
    the cursor it goes at) — None when the document moved away from it or it was typed to its end."""
    cursor = moved_cursor(text_then, cursor_then, text_now)
    if cursor is None:
        return None
    typed = text_now[cursor_then:cursor]
    if not suggestion.startswith(typed) or len(typed) >= len(suggestion):
        return None
    return suggestion[len(typed):], cursor


def settled(s: Suggestion, text_now: str) -> Suggestion | None:
    """`s` as it applies to `text_now`: itself on the text it was made on (by identity), its rest at the
    cursor the user typed on to, or None (the document moved away from it, or it was typed to its end)."""
    if text_now is s.on_text:
        return s
    moved = rebase(s.on_text, s.offset, s.text, text_now)
    return None if moved is None else replace(s, text=moved[0], offset=moved[1], on_text=text_now)


def settled_edit(e: NextEdit, text_now: str) -> NextEdit | None:
    """A next edit as it applies to `text_now`: itself on the text it was made on; an insertion the user typed
    into, its rest at the cursor typed on to; else None — the user typed something else, so the edit (made
    from the text and the edits as they were) is dropped."""
    if text_now is e.on_text or text_now == e.on_text:
        return e
    moved = rebase(e.on_text, e.start, e.text, text_now) if e.start == e.end else None
    if moved is None:
        return None
    return replace(e, text=moved[0], start=moved[1], end=moved[1], on_text=text_now)
