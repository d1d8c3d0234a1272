"""The keystroke path: the open documents; per editor request, whether to ask at all, the asking, the answer.

`complete()` reads as the flow: context → cache (typed-through hit: answer now) → a running request this one
extends (serve from it; cancel the stale ones) → skip? (a letter into a word; the acceptance predictor) →
adaptive debounce (shorter at pause points; a newer request for the document makes this one give up) → one
request over the channel (launch) → pump.py waits until the text to show is final → answer. What was streamed
goes to the cache (beyond the shown line: the "hot streak"); warmup.py asks ahead where prompts will need it.

Invariant (tests/lsp_client/test_session_property.py): a suggestion is returned only if it is consistent with
the document at that moment — the text before the cursor equals the prefix it was computed for plus what was
typed since, and that typed text is a prefix of what was generated — and no request keeps running after
the document moved away from it.
"""
from __future__ import annotations

import asyncio
import random
from quickcode.lsp_client import fresh, postprocess
from quickcode.lsp_client.accounting import Accounting
from quickcode.lsp_client.cache import CompletionCache
from quickcode.lsp_client.channel import Channel
from quickcode.lsp_client.clock import REAL, Clock
from quickcode.lsp_client.config import ClientConfig, sizes
from quickcode.lsp_client.context import Context, build, first_window_end, window_chars
from quickcode.lsp_client.debounce import AdaptiveDebounce
from quickcode.lsp_client.docwords import word_rest
from quickcode.lsp_client.documents import Ask, Doc, Suggestion
from quickcode.lsp_client.inflight import End, Flight, Grow, Inflight, still_fits
from quickcode.lsp_client.next_edit import NextEdits
from quickcode.lsp_client.places import chars_into_word, place_of
from quickcode.lsp_client.predictor import AcceptancePredictor
from quickcode.lsp_client.pump import Pump
from quickcode.lsp_client.snippets import NeighbourFiles
from quickcode.lsp_client.state import LearntState
from quickcode.lsp_client.telemetry import Outcomes, Shown
from quickcode.lsp_client.warmup import Warmups
from quickcode.protocol import Complete, Priority, within_budget


class Session:
    def __init__(self, cfg: ClientConfig, channel: Channel, *, clock: Clock = REAL, rng=random.random, on_more=None):
        self.cfg, self.channel, self.clock, self.rng = cfg, channel, clock, rng
        self.docs: dict[str, Doc] = {}
        self.cache = CompletionCache(cfg.cache_max_keys)
        self.inflight = Inflight(cfg.max_inflight_per_doc)
        self.debounce = AdaptiveDebounce()
        self.predictor = AcceptancePredictor()
        self.neighbours = NeighbourFiles(cfg.snippet_max_files, cfg.snippet_lines)
        self.accounting = Accounting()
        self.stats, self.next_edits = self.accounting.stats, NextEdits(cfg, channel, clock, self.docs)
        self.state = LearntState(self.predictor, self.debounce)
        self.outcomes = Outcomes(send=lambda t: self.cfg.telemetry and self.channel.telemetry(t),
                                 learn=self.state.learn)
        self.pump = Pump(cfg, clock, channel, self.inflight, self.cache, self.debounce, self.accounting,
                         text_of=lambda uri: d.text if (d := self.docs.get(uri)) else None, on_more=on_more,
                         on_ended=lambda f: self.warmups.next_window(f.uri))   # the engine is free of it
        self.warmups = Warmups(cfg, self.stats, self.docs, self._context, self._launch, self._known,
                               windows=self.windows)
        self.apply_config(cfg)
        self.state.load(cfg.state_dir)

    def apply_config(self, cfg: ClientConfig) -> None:
        self.cfg = self.pump.cfg = self.warmups.cfg = cfg
        self.debounce.configure(cfg)
        self.predictor.min_ratio, self.predictor.exploration = cfg.predictor_min_ratio, cfg.predictor_exploration
        self.inflight.max_per_doc = cfg.max_inflight_per_doc
        self.state.state_dir = cfg.state_dir
        self.next_edits.configure(cfg)

    def save_state(self) -> None:   # what was learnt, to the state_dir
        self.state.save()

    # ── document events
    def on_open(self, uri: str, path: str, language: str, text: str) -> None:
        self.docs[uri] = doc = Doc(uri, path, language, text)
        if self.cfg.snippets:
            self.neighbours.touch(uri, path, language, text)
        self.warmups.opened(doc, first_window_end(text, self.windows()[0]))

    def on_change(self, uri: str, text: str, edit_offset: int | None = None) -> None:
        """A keystroke (or any edit): cancel the requests the document has moved away from."""
        doc = self.docs.get(uri)
        if doc is None:
            return
        old, doc.text = doc.text, text
        self.next_edits.changed(uri, old, text, edit_offset)
        where = None if edit_offset is None else place_of(text[text.rfind("\n", 0, edit_offset) + 1:edit_offset]).kind
        self.debounce.keystroke(self.clock.now() * 1000, where)
        if self.cfg.cancel_stale:
            for f in self.inflight.for_uri(uri):
                if not still_fits(f, text):
                    self.pump.cancel(f, End.TYPED_AWAY)
        if self.cfg.snippets:
            self.neighbours.touch(uri, doc.path, doc.language, text)   # cheap: indexed lazily, when another file asks
        self.warmups.edited(doc, old, edit_offset)
        if edit_offset is not None:
            doc.last_cursor = edit_offset
            shown = self.outcomes.on_edit(uri, text, edit_offset, len(text) - len(old), self.clock.now())
            if shown is not None and self.cfg.prefetch:
                self.warmups.after_accept(shown)      # accepted by the edit itself (eglot runs no command)

    def on_close(self, uri: str) -> None:
        for f in self.inflight.for_uri(uri):
            self.pump.cancel(f, End.CLOSED)
        self.outcomes.on_closed(uri, self.clock.now())
        self.next_edits.closed(uri)
        self.docs.pop(uri, None)
        self.neighbours.forget(uri)

    def on_accepted(self, sid: str, chars: int | None = None) -> None:
        shown = self.outcomes.on_accepted(sid, self.clock.now(), chars)
        if shown is not None and self.cfg.prefetch and (chars is None or chars >= len(shown.text)):
            self.warmups.after_accept(shown)

    def on_partial(self, sid: str, chars: int) -> None:
        self.outcomes.on_partial(sid, chars, self.clock.now())

    # ── the keystroke path
    async def complete(self, uri: str, offset: int, *, explicit: bool = False, best_of: int = 0) -> Suggestion | None:
        """The suggestion at `offset` (None: nothing to show; `best_of` ≥ 2: the best of that many lines);
        each request counts in exactly one of `Stats.decisions()`."""
        self.stats.requests += 1
        try:
            return await self._complete(uri, offset, explicit, self.cfg.word_max_tokens > 0, best_of)
        except asyncio.CancelledError:
            self.stats.editor_cancelled += 1
            raise

    async def _complete(self, uri: str, offset: int, explicit: bool, retry=False, best_of=0) -> Suggestion | None:
        ask = self._ask(uri, offset, best_of > 1)
        if ask is None:
            self.stats.not_asked += 1
            return None
        hit = self._from_cache(ask)
        if hit is not None:
            return hit
        flight, launched = None if ask.line else self._reusable_flight(uri, ask.ctx), False
        if flight is None:
            if not explicit and ((local := self._from_document(ask)) is not None or self._skips(ask)):
                return local
            waited_ms = await self._debounce(ask, explicit)
            if ask.superseded(self.docs):
                self.stats.superseded_waits += 1
                return None
            hit = self._from_cache(ask)
            if hit is not None:
                return hit
            flight = None if ask.line else self._reusable_flight(uri, ask.ctx)
            if flight is None:
                flight, launched = self._launch(ask.doc, ask.ctx, best_of=best_of), True
                if flight is None:
                    self.stats.unavailable += 1
                    return None              # backend unreachable: answer empty, at once
                flight.waited_ms, flight.place = round(waited_ms, 1), place_of(ask.ctx.line_prefix).kind
        try:
            text, typed, final = await self.pump.wait_for_text(flight, ask.ctx, ask.shape, ask.t0)
        except asyncio.CancelledError:
            self.pump.abandoned(flight, ask.doc.text is ask.snapshot)
            raise
        if retry and not (launched or text) and flight.end is End.DONE and typed >= len(flight.streamed) \
                and ask.doc.text is ask.snapshot:    # typed through to the end of a bounded look-ahead: ask anew
            return await self._complete(uri, offset, explicit, best_of=best_of)
        return self._answer(ask, flight, text, typed, final, launched)

    def _ask(self, uri: str, offset: int, line: bool = False) -> Ask | None:
        doc = self.docs.get(uri)
        if doc is None or not self.cfg.language_enabled(doc.language):
            return None
        t0 = self.clock.now()
        doc.generation += 1
        doc.last_cursor = offset
        self.next_edits.cursor(uri, doc.text, offset)
        ctx = self._context(doc, offset)
        self.outcomes.on_position(uri, ctx.prefix, t0)
        return Ask(doc, offset, ctx, self._shape(ctx), t0, doc.generation, doc.text, line)

    def _from_document(self, ask: Ask) -> Suggestion | None:
        """The rest of the word from the document's identifiers (docwords.py): shown at once, nothing asked."""
        rest = word_rest(ask.ctx.prefix, ask.ctx.suffix, self.cfg.doc_words_min_chars)
        if not rest:
            return None
        self.stats.served_document += 1
        return self._show(ask, rest, f"doc{self.stats.served_document}", "document")

    def _skips(self, ask: Ask) -> bool:
        """No request here: the cursor 1..`skip_word_chars` into a word, or the acceptance predictor's skip."""
        place = 0 < chars_into_word(ask.ctx.line_prefix) <= self.cfg.skip_word_chars
        predictor = not place and self.cfg.predictor and not self.predictor.should_request(
            self.predictor.features_at(ask.ctx, ask.doc.language, ask.t0), self.rng)
        self.stats.skipped_place += place
        self.stats.skipped_predictor += predictor
        return place or predictor

    async def _debounce(self, ask: Ask, explicit: bool) -> float:
        """Wait what the adaptive debounce says for this place (nothing for an explicit request): the wait, ms."""
        place = place_of(ask.ctx.line_prefix)
        wait_ms = 0.0 if explicit else self.debounce.wait_ms(self.clock.now() * 1000, place.pause, place.kind)
        if wait_ms > 0:
            await self.clock.sleep(wait_ms / 1000)
        return wait_ms

    def _answer(self, ask: Ask, flight: Flight, text: str, typed: int, final: bool, launched: bool) -> Suggestion | None:
        moved = fresh.rebase(ask.snapshot, ask.offset, text, ask.doc.text) if text else None
        if moved is None or self.docs.get(ask.doc.uri) is not ask.doc:
            self.stats.empty += 1
            if not (text or final or flight.finished) and ask.doc.text is ask.snapshot:   # late: nothing yet
                self.stats.late += 1
                flight.grow = Grow(ask.offset, ask.snapshot, typed, ask.shape, "")   # re-asked once it is in
            self.pump.release(flight)
            return None                      # nothing to show, or the document moved away while we waited
        self.stats.served_network += launched
        self.stats.served_inflight += not launched
        self.stats.rebased += moved[1] != ask.offset    # typed into it while it was written: its rest, further on
        self.accounting.mark_shown(flight.rid)
        if not final and moved[1] == ask.offset:
            flight.grow = Grow(ask.offset, ask.snapshot, typed, ask.shape, text)   # tell the editor once the rest is in
        elif final and self.cfg.cache:
            self.cache.put(ask.ctx.prefix, ask.ctx.suffix_head, text, flight.rid)   # typing through it: served from here
        self.pump.release(flight)
        typed += moved[1] - ask.offset
        return self._show(ask, moved[0], flight.rid if typed == 0 else f"{flight.rid}+{typed}",
                          "network" if launched else "inflight", moved[1])

    async def suggest(self, uri: str, text_then: str, cursor_then: int, caught_up, *, explicit: bool = False,
                      best_of: int = 0) -> Suggestion | None:
        """Never stale (fresh.py): the suggestion at `cursor_then` of `text_then` (as the request was read),
        asked at the cursor typed on to since, checked again once `caught_up()` read the edits sent since."""
        doc = self.docs.get(uri)
        offset = None if doc is None else fresh.moved_cursor(text_then, cursor_then, doc.text)
        s = None if offset is None else await self.complete(uri, offset, explicit=explicit, best_of=best_of)
        if s is None:
            return None
        await caught_up()
        now = None if (doc := self.docs.get(uri)) is None else fresh.settled(s, doc.text)
        self.stats.stale_dropped += now is None
        self.stats.rebased += now is not None and now is not s
        return now

    # ── pieces
    def _context(self, doc: Doc, offset: int, text: str | None = None, prefix_max_chars: int | None = None) -> Context:
        prefix_max, suffix_max = self.windows()
        return build(doc.text if text is None else text, offset, doc.language, doc.path,
                     prefix_max_chars=prefix_max_chars or prefix_max,
                     suffix_max_chars=suffix_max, quantum=self.cfg.window_quantum_lines)

    def windows(self) -> tuple[int, int]:   # (prefix, suffix) characters: the settings within the server's context
        return window_chars(self.cfg, self.channel.welcome)

    def _from_cache(self, ask: Ask) -> Suggestion | None:
        """A suggestion from the cache, or None. A cached rest that post-processes to nothing here is a miss
        (an older request's text), not "nothing to show": a request asked here may have something."""
        if not self.cfg.cache or ask.line:
            return None
        hit = self.cache.get(ask.ctx.prefix, ask.ctx.suffix_head)
        if hit is None:
            return None
        text, _ = postprocess.showable(hit.remainder, ask.shape, True, True, self.cfg.suggestion_unit)
        if not text:
            self.stats.empty_from_cache += 1
            return None
        self.stats.served_cache += 1
        self.accounting.mark_shown(hit.entry.source)
        return self._show(ask, text, f"{hit.entry.source}+{hit.typed}", "cache")

    def _reusable_flight(self, uri: str, ctx: Context) -> Flight | None:
        flight, stale = self.inflight.best(uri, ctx.prefix, ctx.suffix_head) if self.cfg.inflight_reuse \
            else (None, self.inflight.for_uri(uri))
        if self.cfg.cancel_stale:
            for f in stale:
                self.pump.cancel(f, End.SUPERSEDED)
        return flight

    def _known(self, uri: str, ctx: Context) -> bool:
        """The cache or a running request already has an answer for `ctx` (prefetch after accept)."""
        return self.cache.get(ctx.prefix, ctx.suffix_head) is not None or self._reusable_flight(uri, ctx) is not None

    def _launch(self, doc: Doc, ctx: Context, *, priority: Priority = Priority.NORMAL,
                prefill_only: bool = False, best_of: int = 0) -> Flight | None:
        welcome = getattr(self.channel, "welcome", None)      # the backend's limits, once connected
        snippets = self.neighbours.for_context(doc.text, doc.uri, doc.language, ctx, self.cfg.snippet_lines,
                                               self.cfg.snippet_max) if self.cfg.snippets else []
        prefix, suffix, snippets = within_budget(ctx.prefix, ctx.suffix, snippets,
                                                 welcome.max_prompt_chars if welcome else 0)
        msg = Complete(id=self.channel.new_id(), prefix=prefix, suffix=suffix, language=doc.language, path=doc.path,
                       priority=priority, prefill_only=prefill_only, snippets=snippets,
                       **sizes(self.cfg, welcome, prefill_only, best_of))
        return self.pump.launch(msg, doc.uri, ctx, self._shape(ctx))

    def _shape(self, ctx: Context) -> postprocess.Shape:
        one_line = self.cfg.suggestion_unit in ("word", "line")   # the next line is asked for where it starts
        return postprocess.shape(ctx, 1 if one_line else self.cfg.multiline_max_lines)

    def _show(self, ask: Ask, text: str, sid: str, source: str, offset: int | None = None) -> Suggestion:
        offset = ask.offset if offset is None else offset
        prefix = ask.ctx.prefix + ask.doc.text[ask.offset:offset]     # what was typed on since it was asked
        self.outcomes.on_shown(Shown(sid, ask.doc.uri, prefix, text, ask.doc.language,
                                     self.predictor.features_at(ask.ctx, ask.doc.language, ask.t0), self.clock.now()))
        return Suggestion(text, sid, source, (self.clock.now() - ask.t0) * 1000, offset, ask.doc.text)
