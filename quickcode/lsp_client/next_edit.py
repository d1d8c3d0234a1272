"""Next-edit suggestions: each document's edit history kept from its changes, and the asking — the editable
region around the cursor and the recent edits sent as one `edit` over the channel, its `replace` placed in the
document and checked against the document as it is when it is answered (fresh.py `settled_edit`).

Invariant (tests/lsp_client/test_next_edit.py): an edit is returned only inside the region around the cursor
it was asked at, and only on the document it was made on (or an insertion typed into, its rest); a change to
the document while the edit is being asked cancels it (the user typed something else: its answer is dropped).
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from quickcode.lsp_client import fresh
from quickcode.lsp_client.clock import Clock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.documents import Doc
from quickcode.lsp_client.edit_region import NextEdit, edit_request, placed, region_around
from quickcode.lsp_client.edits import EditHistory
from quickcode.lsp_client.stream import Unavailable
from quickcode.protocol import Done

MAX_DOCS = 32      # documents whose edit history is kept (the least recently edited forgotten first)


class NextEdits:
    def __init__(self, cfg: ClientConfig, channel, clock: Clock, docs: dict[str, Doc]):
        self.channel, self.clock, self.docs = channel, clock, docs
        self.history = EditHistory(max_docs=MAX_DOCS)
        self.running: dict[str, str] = {}      # uri → the id of the edit being asked for it
        # asked; then answered (shown), none (no edit), stale (the document moved on), typed_away (cancelled by
        # an edit), late (past the deadline), failed (an error or a lost connection); unavailable: not asked
        self.counts = dict.fromkeys(("asked", "answered", "none", "stale", "typed_away", "late", "failed",
                                     "unavailable"), 0)
        self.configure(cfg)

    def configure(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self.history.max_events = cfg.next_edit_history_edits
        self.history.max_chars = cfg.next_edit_history_chars

    # ── document events
    def changed(self, uri: str, old: str, new: str, cursor: int | None) -> None:
        """An edit of `uri`: kept in its history; the edit being asked for it is cancelled (typed away)."""
        if not self.cfg.next_edit:
            return
        self.history.record(uri, old, new)
        if cursor is not None:
            self.cursor(uri, new, cursor)
        rid = self.running.pop(uri, None)
        if rid is not None:
            self.counts["typed_away"] += 1
            self.channel.cancel(rid)

    def cursor(self, uri: str, text: str, offset: int) -> None:
        if self.cfg.next_edit:
            line_start = text.rfind("\n", 0, offset) + 1
            self.history.cursor(uri, text.count("\n", 0, line_start), offset - line_start)

    def closed(self, uri: str) -> None:
        self.history.forget(uri)
        rid = self.running.pop(uri, None)
        if rid is not None:
            self.channel.cancel(rid)

    # ── asking
    async def suggest(self, uri: str, text_then: str, cursor_then: int,
                      caught_up: Callable[[], Awaitable[None]]) -> NextEdit | None:
        """The next edit at `cursor_then` of `text_then` (the document as the request was read), or None:
        off, nothing to change, not in time, or the document changed since (by the time it is answered)."""
        doc = self.docs.get(uri)
        if doc is None or not self.cfg.next_edit or not self.cfg.language_enabled(doc.language) \
                or (doc.text is not text_then and doc.text != text_then):
            return None
        self.cursor(uri, doc.text, cursor_then)
        text = doc.text
        if self.cfg.debounce_ms > 0:              # a pause first: a key typed meanwhile asks nothing
            await self.clock.sleep(self.cfg.debounce_ms / 1000)
            if self.docs.get(uri) is not doc or doc.text is not text:
                return None
        edit = await self._ask(doc, text, cursor_then)
        if edit is None:
            return None
        await caught_up()
        doc = self.docs.get(uri)
        now = None if doc is None else fresh.settled_edit(edit, doc.text)
        self.counts["stale" if now is None else "answered"] += 1
        return now

    async def _ask(self, doc: Doc, text: str, cursor: int) -> NextEdit | None:
        """One `edit` for the region around `cursor` of `text`, waited for within the deadline."""
        cfg = self.cfg
        region = region_around(text, cursor, cfg.next_edit_lines, cfg.next_edit_region_chars)
        if region is None:
            return None
        welcome = self.channel.welcome
        limit = (welcome.max_tokens if welcome else 0) or cfg.next_edit_max_tokens
        hunks = [e.hunk() for e in self.history.events(doc.uri)]
        msg = edit_request(self.channel.new_id(), text, region, hunks, doc.language, doc.path,
                           cfg.next_edit_context_chars, min(cfg.next_edit_max_tokens, limit),
                           welcome.max_prompt_chars if welcome else 0)
        try:
            stream = self.channel.submit(msg)
        except Unavailable:
            self.counts["unavailable"] += 1
            return None
        self.counts["asked"] += 1
        self.running[doc.uri] = msg.id
        try:
            end = await self.clock.timeout(stream.ended(), cfg.deadline_ms / 1000)
        except TimeoutError:
            self.channel.cancel(msg.id)                  # not in time: the engine stops
            self.counts["late"] += 1
            return None
        except asyncio.CancelledError:
            self.channel.cancel(msg.id)                  # the editor gave up on it
            raise
        finally:
            typed_away = self.running.get(doc.uri) != msg.id     # `changed` cancelled it (and counted it)
            if not typed_away:
                del self.running[doc.uri]
        if typed_away:
            return None
        if not isinstance(end, Done):
            self.counts["failed"] += 1
            return None
        edit = None if stream.replace is None else placed(region, stream.replace, text, msg.id)
        self.counts["none"] += edit is None
        return edit
