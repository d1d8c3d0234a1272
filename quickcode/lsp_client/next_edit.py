"""Next-edit suggestions: each document's edit history kept from its changes, and the asking — the editable
region around the cursor and the recent edits sent as one `edit` over the channel, its `replace` placed in the
document and checked against the document as it is when it is answered (fresh.py `settled_edit`).

Invariant (tests/lsp_client/test_next_edit.py): an edit is returned only inside the region around the cursor
it was asked at, and only on the document it was made on (or an insertion typed into, its rest); a change to
the document while the edit is being asked cancels it (the user typed something else: its answer is dropped).
Callers asking at the same place of the same text at once (an editor's `copilotInlineEdit` and its inline
completion with nothing to insert) share one backend request: two would supersede each other at the backend.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from quickcode.lsp_client import fresh
from quickcode.lsp_client.clock import Clock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.documents import Doc
from quickcode.lsp_client.edit_region import NextEdit, placed
from quickcode.lsp_client.edits import EditHistory
from quickcode.lsp_client.stream import Stream, Unavailable
from quickcode.protocol import Done, Edit
from quickcode.protocol.edit_window import Region, edit_request, region_around

MAX_DOCS = 32      # documents whose edit history is kept (the least recently edited forgotten first)


class NextEdits:
    def __init__(self, cfg: ClientConfig, channel, clock: Clock, docs: dict[str, Doc]):
        self.channel, self.clock, self.docs = channel, clock, docs
        self.history = EditHistory(max_docs=MAX_DOCS)
        self.running: dict[str, str] = {}      # uri → the id of the edit being asked for it
        self.asking: dict[str, _Ask] = {}       # uri → the ask in flight, shared by callers at its place
        self.client_draws = False               # it asked `textDocument/copilotInlineEdit`: draws edits itself
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
        edit = await self._shared_ask(doc, text, cursor_then)
        if edit is None:
            return None
        await caught_up()
        doc = self.docs.get(uri)
        now = None if doc is None else fresh.settled_edit(edit, doc.text)
        self.counts["stale" if now is None else "answered"] += 1
        return now

    async def _shared_ask(self, doc: Doc, text: str, cursor: int) -> NextEdit | None:
        """`_submit` and `_answer`, or joined to the ask in flight at `cursor` of this very `text`; cancelled
        once no caller waits."""
        held = self.asking.get(doc.uri)
        if held is None or held.text is not text or held.cursor != cursor or held.task.done():
            asked = self._submit(doc, text, cursor)       # sent now; the waiting is shared
            if asked is None:
                return None
            held = _Ask(text, cursor, asyncio.ensure_future(self._answer(doc, text, *asked)))
            self.asking[doc.uri] = held
            held.task.add_done_callback(lambda _, uri=doc.uri, h=held, rid=asked[1].id: self._ask_done(uri, h, rid))
        held.waiters += 1
        try:
            return await asyncio.shield(held.task)
        except asyncio.CancelledError:
            if not held.task.done() and held.waiters == 1:
                held.task.cancel()                       # the last caller gave up: the backend request ends
            raise
        finally:
            held.waiters -= 1

    def _ask_done(self, uri: str, held: "_Ask", rid: str) -> None:
        if self.asking.get(uri) is held:
            del self.asking[uri]
        if held.task.cancelled() and self.running.get(uri) == rid:   # cancelled before `_answer` ever ran
            del self.running[uri]
            self.channel.cancel(rid)

    def _submit(self, doc: Doc, text: str, cursor: int) -> tuple[Region, Edit, Stream] | None:
        """One `edit` for the region around `cursor` of `text`, sent; None: no region, or no connection."""
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
        return region, msg, stream

    async def _answer(self, doc: Doc, text: str, region: Region, msg: Edit, stream: Stream) -> NextEdit | None:
        """The edit `msg` asked, waited for within the deadline; None: no edit, late, failed or typed away."""
        cfg = self.cfg
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


class _Ask:
    """One edit being asked: where (the text, by identity, and the cursor), its task, the callers awaiting it."""
    __slots__ = ("text", "cursor", "task", "waiters")

    def __init__(self, text: str, cursor: int, task: asyncio.Future):
        self.text, self.cursor, self.task, self.waiters = text, cursor, task, 0
