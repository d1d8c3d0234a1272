"""The keystroke path: decide whether to ask at all, ask, and turn the stream into what the editor shows.

For each editor request: context → cache (typed-through hit: answer now) → a running request this one
extends (serve from it; cancel the stale ones) → acceptance predictor (skip?) → adaptive debounce (shorter at
pause points; a newer request for the document makes this one give up) → one request over the channel →
post-process the stream until the shown text is final → answer. Whatever was streamed goes to the cache
(lines beyond the shown one feed the "hot streak"); the generation is stopped once nothing more is needed.

Invariant (tests/test_completer_property.py): a suggestion is returned only if it is consistent with the
document at that moment — the text before the cursor equals the prefix it was computed for plus what was
typed since, and that typed text is a prefix of what was generated — and no request keeps running after
the document moved away from it.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from lru import LRU

from lsp_client import postprocess
from lsp_client.cache import CompletionCache
from lsp_client.channel import Channel, Lost, Stream, Unavailable
from lsp_client.config import ClientConfig
from lsp_client.context import Context, build, first_window_end, prefix_start
from lsp_client.debounce import AdaptiveDebounce, place
from lsp_client.inflight import Fit, Flight, Inflight
from lsp_client.predictor import AcceptancePredictor, features
from lsp_client.prefetch import is_pause_point
from lsp_client.snippets import NeighbourFiles
from lsp_client.telemetry import Outcomes, Shown
from protocol import Complete, Done, Error, Priority, Snippet

log = logging.getLogger("quickcode.completer")
NOTHING = False         # _from_cache: "known: nothing to show here" (distinct from None, a miss)
ABANDON_GRACE_S = 0.3   # an abandoned request waits this long for the next editor request before it is stopped


@dataclass(frozen=True)
class Suggestion:
    text: str            # insert at the cursor
    id: str              # names it in telemetry (accept / partial accept / dismiss)
    source: str          # "cache" | "inflight" | "network"
    latency_ms: float


@dataclass
class _Doc:
    uri: str
    path: str
    language: str
    text: str = ""
    generation: int = 0              # bumped by every editor request: an older waiting request gives up
    last_cursor: int | None = None
    warmed_start: int | None = None  # the next prefix window's start, once prefilled ahead of its move


@dataclass
class Stats:
    requests: int = 0                # editor requests
    served_cache: int = 0
    served_inflight: int = 0
    served_network: int = 0
    empty: int = 0
    empty_from_cache: int = 0        # the cache knew the answer here is nothing: no request made
    skipped_predictor: int = 0
    superseded_waits: int = 0
    backend_requests: int = 0
    cancelled: int = 0
    stopped_early: int = 0
    prefetches: int = 0
    warmups: int = 0
    tokens_generated: int = 0        # output tokens of finished backend requests
    tokens_never_shown: int = 0      # ... of requests none of whose text was ever shown (wasted)
    wasted_by: dict = field(default_factory=dict)   # how each wasted request ended → its tokens
    waterfalls: deque = field(default_factory=lambda: deque(maxlen=500))

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "waterfalls"}


class Completer:
    def __init__(self, cfg: ClientConfig, channel: Channel, *, clock=time.monotonic, sleep=asyncio.sleep,
                 rng=random.random, on_more=None):
        self.channel = channel
        self.on_more = on_more        # (uri, offset): text shown early there is now complete — ask again
        self.clock, self.sleep, self.rng = clock, sleep, rng
        self.docs: dict[str, _Doc] = {}
        self.cache = CompletionCache(cfg.cache_max_keys)
        self.inflight = Inflight(cfg.max_inflight_per_doc)
        self.debounce = AdaptiveDebounce()
        self.predictor = AcceptancePredictor()
        self.neighbours = NeighbourFiles(cfg.snippet_max_files, cfg.snippet_lines)
        self.outcomes = Outcomes(send=self._telemetry, learn=self._learn)
        self.stats = Stats()
        self._snippet_memo: dict[tuple[str, int], list[Snippet]] = {}
        self._shown_rids: LRU = LRU(10_000)    # backend request ids whose text was shown (waste accounting)
        self._pending_tokens: LRU = LRU(10_000)  # rid → output tokens, for requests finished but not (yet) shown
        self.apply_config(cfg)
        if self._state_path() is not None:
            self.predictor.load(self._state_path())
            self.debounce.load(self._state_path("pauses.json"))

    def _state_path(self, name: str = "predictor.json") -> Path | None:
        return Path(self.cfg.state_dir).expanduser() / name if self.cfg.state_dir else None

    def save_state(self) -> None:
        """The predictor's weights and the learnt pauses, kept across editor sessions."""
        path = self._state_path()
        if path is None:
            return
        try:
            if self.predictor.updates:
                self.predictor.save(path)
            if self.debounce.gaps:
                self.debounce.save(self._state_path("pauses.json"))
        except OSError as e:
            log.warning("could not save the client's state to %s: %s", path.parent, e)

    def _learn(self, x: list[float], accepted: bool, now_s: float) -> None:
        self.predictor.learn(x, accepted, now_s)
        if self.predictor.updates % 20 == 0:
            self.save_state()

    def apply_config(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        d = self.debounce
        d.base_ms, d.min_ms, d.max_ms, d.adaptive = cfg.debounce_ms, cfg.debounce_min_ms, cfg.debounce_max_ms, cfg.adaptive_debounce
        d.learn_pauses, d.min_chance = cfg.learn_pauses, cfg.pause_min_chance
        self.predictor.min_ratio, self.predictor.exploration = cfg.predictor_min_ratio, cfg.predictor_exploration
        self.inflight.max_per_doc = cfg.max_inflight_per_doc

    # ── document events
    def on_open(self, uri: str, path: str, language: str, text: str) -> None:
        self.docs[uri] = _Doc(uri, path, language, text)
        if self.cfg.snippets:
            self.neighbours.touch(uri, path, language, text)
        if self.cfg.warmup and self.cfg.language_enabled(language):
            self._warmup(self.docs[uri], first_window_end(text, self.cfg.prefix_max_chars))

    def on_change(self, uri: str, text: str, edit_offset: int | None = None) -> None:
        """A keystroke (or any edit): cancel the requests the document has moved away from."""
        doc = self.docs.get(uri)
        if doc is None:
            return
        # the first edit shows where the cursor is (an editor does not say on open), or it jumped far away
        jumped = edit_offset is not None and (doc.last_cursor is None or abs(
            text.count("\n", 0, edit_offset) - doc.text.count("\n", 0, doc.last_cursor)) > 30)
        doc.text = text
        where = None if edit_offset is None else place(text[text.rfind("\n", 0, edit_offset) + 1:edit_offset])
        self.debounce.keystroke(self.clock() * 1000, where)
        if self.cfg.cancel_stale:
            for f in self.inflight.for_uri(uri):
                if not still_fits(f, text):
                    self._cancel(f, "typed_away")
        if self.cfg.snippets:
            self.neighbours.touch(uri, doc.path, doc.language, text)   # cheap: indexed lazily, when another file asks
        if jumped and self.cfg.warmup and self.cfg.language_enabled(doc.language):
            self._warmup(doc, edit_offset)       # a new place: warm the KV cache there
        if edit_offset is not None:
            doc.last_cursor = edit_offset

    def on_close(self, uri: str) -> None:
        for f in self.inflight.for_uri(uri):
            self._cancel(f, "closed")
        self.outcomes.on_closed(uri, self.clock())
        self.docs.pop(uri, None)
        self.neighbours.forget(uri)

    def on_accepted(self, sid: str, chars: int | None = None) -> None:
        shown = self.outcomes.on_accepted(sid, self.clock(), chars)
        if shown is not None and self.cfg.prefetch and (chars is None or chars >= len(shown.text)):
            self._prefetch_after_accept(shown)

    def on_partial(self, sid: str, chars: int) -> None:
        self.outcomes.on_partial(sid, chars, self.clock())

    # ── the keystroke path
    async def complete(self, uri: str, offset: int, *, explicit: bool = False) -> Suggestion | None:
        t0 = self.clock()
        self.stats.requests += 1
        doc = self.docs.get(uri)
        if doc is None or not self.cfg.language_enabled(doc.language):
            return None
        doc.generation += 1
        gen, snapshot = doc.generation, doc.text
        doc.last_cursor = offset
        ctx = self._context(doc, offset)
        sh = postprocess.shape(ctx, self.cfg.multiline_max_lines)
        self.outcomes.on_position(uri, ctx.prefix, t0)

        hit = self._from_cache(doc, ctx, sh, t0)
        if hit is not None:
            return hit or None
        flight, launched = self._reusable_flight(uri, ctx), False
        if flight is None:
            x = features(self.predictor.last_outcome, t0 - self.predictor.last_outcome_s, ctx.line_prefix,
                         ctx.line_suffix, doc.language)
            if self.cfg.predictor and not explicit and not self.predictor.should_request(x, self.rng):
                self.stats.skipped_predictor += 1
                return None
            where = place(ctx.line_prefix)
            wait_ms = 0.0 if explicit else self.debounce.wait_ms(self.clock() * 1000, is_pause_point(ctx.line_prefix),
                                                                  where)
            if wait_ms > 0:
                await self.sleep(wait_ms / 1000)
            if doc.generation != gen or doc.text is not snapshot or self.docs.get(uri) is not doc:
                self.stats.superseded_waits += 1
                return None                  # a newer keystroke or request for this document took over
            hit = self._from_cache(doc, ctx, sh, t0)
            if hit is not None:
                return hit or None
            flight = self._reusable_flight(uri, ctx)
            if flight is None:
                flight, launched = self._launch(doc, ctx), True
                if flight is None:
                    return None              # backend unreachable: answer empty, at once
                flight.extra.update(waited_ms=round(wait_ms, 1), place=where)
        try:
            text, typed, final = await self._wait_for_text(flight, ctx, sh, t0)
        except asyncio.CancelledError:
            self._abandoned(flight, doc, snapshot)
            raise
        if not text or doc.text is not snapshot or self.docs.get(uri) is not doc:
            self.stats.empty += 1
            self._release(flight)
            return None                      # nothing to show, or the document changed while we waited
        if launched:
            self.stats.served_network += 1
        else:
            self.stats.served_inflight += 1
        self._mark_shown(flight.rid)
        if not final:
            flight.extra["grow"] = (uri, offset, snapshot, typed, sh, text)   # tell the editor once the rest is in
        elif self.cfg.cache:
            self.cache.put(ctx.prefix, ctx.suffix_head, text, flight.rid)   # typing through it: served from here
        self._release(flight)
        return self._show(doc, ctx, text, flight.rid if typed == 0 else f"{flight.rid}+{typed}",
                          "network" if launched else "inflight", t0)

    # ── pieces
    def _context(self, doc: _Doc, offset: int, text: str | None = None, prefix_max_chars: int | None = None) -> Context:
        return build(doc.text if text is None else text, offset, doc.language, doc.path,
                     prefix_max_chars=prefix_max_chars or self.cfg.prefix_max_chars,
                     suffix_max_chars=self.cfg.suffix_max_chars, quantum=self.cfg.window_quantum_lines)

    def _from_cache(self, doc: _Doc, ctx: Context, sh, t0: float) -> Suggestion | None | bool:
        """A suggestion from the cache; NOTHING when the cache knows this place has nothing to show (the
        model's answer here post-processes to nothing: asking again would give the same); None on a miss."""
        if not self.cfg.cache:
            return None
        hit = self.cache.get(ctx.prefix, ctx.suffix_head)
        if hit is None:
            return None
        text, _ = postprocess.cut(hit.remainder, sh, finished=True)
        if not text:
            self.stats.empty_from_cache += 1
            return NOTHING
        self.stats.served_cache += 1
        self._mark_shown(hit.entry.source)
        return self._show(doc, ctx, text, f"{hit.entry.source}+{hit.typed}", "cache", t0)

    def _reusable_flight(self, uri: str, ctx: Context) -> Flight | None:
        if self.cfg.inflight_reuse:
            flight, stale = self.inflight.best(uri, ctx.prefix, ctx.suffix_head)
        else:
            flight, stale = None, self.inflight.for_uri(uri)
        if self.cfg.cancel_stale:
            for f in stale:
                self._cancel(f, "superseded")
        return flight

    def _launch(self, doc: _Doc, ctx: Context, *, priority: Priority = Priority.NORMAL,
                prefill_only: bool = False) -> Flight | None:
        rid = self.channel.new_id()
        msg = Complete(id=rid, prefix=ctx.prefix, suffix=ctx.suffix, language=doc.language, path=doc.path,
                       max_tokens=1 if prefill_only else self.cfg.max_tokens, priority=priority,
                       prefill_only=prefill_only, snippets=self._snippets(doc, ctx))
        try:
            stream = self.channel.submit(msg)
        except Unavailable:
            return None
        self.stats.backend_requests += 1
        flight = Flight(rid, doc.uri, ctx.prefix, ctx.suffix_head, prefetch=priority is Priority.PREFETCH,
                        started_s=self.clock())
        flight.extra.update(event=asyncio.Event(), shape=postprocess.shape(ctx, self.cfg.multiline_max_lines),
                            start=ctx.prefix_start, prefill_only=prefill_only)
        if not prefill_only:
            for old in self.inflight.add(flight):
                self._cancel(old, "superseded")
        flight.extra["task"] = asyncio.create_task(self._pump(flight, stream), name=f"pump-{rid}")
        return flight

    async def _pump(self, flight: Flight, stream: Stream) -> None:
        """Read one request's stream into its flight; stop the generation once nothing more is needed."""
        try:
            async for text in stream.frames():
                if flight.finished:
                    continue                      # cancelled or stopped: drain until the backend's done
                flight.streamed += text
                self._notify(flight)
                if "grow" in flight.extra:
                    self._more_ready(flight)
                if "show_s" not in flight.extra:
                    self._note_showable(flight, False)
                doc = self.docs.get(flight.uri)
                if self.cfg.cancel_stale and (doc is None or not still_fits(flight, doc.text)):
                    self._cancel(flight, "typed_away")   # what arrived contradicts what the user typed meanwhile
                elif flight.listeners == 0 and self._enough(flight):
                    self._stop_early(flight)
        finally:
            if isinstance(stream.end, (Lost, Error)) and not flight.finished:
                flight.extra["lost"] = True       # connection or engine lost mid-stream: answer empty, cache nothing
            flight.finished = True
            self.inflight.remove(flight)
            self._to_cache(flight)
            if "grow" in flight.extra and not flight.extra.get("cancelled") and not flight.extra.get("lost"):
                self._more_ready(flight)
            flight.extra["ended"] = _ending(flight)
            if isinstance(stream.end, Done):
                if "show_s" not in flight.extra and not flight.extra.get("cancelled"):
                    self._note_showable(flight, True)
                tokens = stream.end.timing.output_tokens
                self.stats.tokens_generated += tokens
                if flight.rid not in self._shown_rids:
                    why = flight.extra["ended"]
                    self.stats.tokens_never_shown += tokens
                    self.stats.wasted_by[why] = self.stats.wasted_by.get(why, 0) + tokens
                    self._pending_tokens[flight.rid] = (tokens, why)
                if stream.t_first is not None and not flight.prefetch:
                    self.debounce.latency((stream.t_first - stream.t_sent) * 1000)
            self._waterfall(flight, stream)
            self._notify(flight)
            if not flight.prefetch:
                self._warm_next_window(flight.uri)   # the engine is free of this user's request now

    def _note_showable(self, flight: Flight, finished: bool) -> None:
        """Measure how long after sending a request it has text to show — final, or settled words once the
        patience is spent (what the debounce must leave time for)."""
        if flight.prefetch:
            return
        sh = flight.extra["shape"]
        now = self.clock()
        if not postprocess.cut(flight.streamed, sh, finished)[1] and not (
                now - flight.started_s >= self._patience_ms(sh) / 1000 and postprocess.early(flight.streamed, sh)):
            return
        flight.extra["show_s"] = now
        self.debounce.shown_after((now - flight.started_s) * 1000)

    def _patience_ms(self, sh) -> float:
        """After this, a suggestion still being written shows what is settled (0: only once it is final)."""
        return (self.cfg.block_patience_ms if sh.multiline else self.cfg.line_patience_ms) or self.cfg.deadline_ms

    def _more_ready(self, flight: Flight) -> None:
        """Text shown early (its settled part) is now complete: if the document is still as it was shown and
        the whole text extends what was shown, the editor is told, and asks again (the answer comes from this
        flight or the cache). A line that turned out to loop is not announced: the ghost text stays as it is."""
        uri, offset, snapshot, typed, sh, shown = flight.extra["grow"]
        doc = self.docs.get(uri)
        if doc is None or doc.text is not snapshot:
            del flight.extra["grow"]                 # the user moved on: the editor asks by itself
            return
        text, final = postprocess.cut(flight.streamed[typed:], sh, flight.finished)
        if not final:
            return
        del flight.extra["grow"]
        if self.on_more is not None and len(text) > len(shown) and text.startswith(shown):
            self.on_more(uri, offset)

    def _enough(self, flight: Flight) -> bool:
        """The text to show is final and, once it has been shown, the hot-streak lines beyond it have arrived
        (or the block ended). Lines after text nobody has seen are not generated: they would be for nobody."""
        sh = flight.extra["shape"]
        shown, final = postprocess.cut(flight.streamed, sh, finished=False)
        if not final:
            return False
        if sh.multiline or not shown or flight.rid not in self._shown_rids:
            return True
        return flight.streamed.count("\n") > self.cfg.hot_streak_lines

    def _to_cache(self, flight: Flight) -> None:
        """Keep what a request streamed for the positions ahead (once; not for cancelled requests)."""
        if (not self.cfg.cache or not flight.streamed or flight.extra.get("cached") or flight.extra.get("cancelled")
                or flight.extra.get("lost")):
            return
        flight.extra["cached"] = True
        keep = flight.streamed
        if flight.extra.get("stopped_early") and "\n" in keep:
            keep = keep[: keep.rfind("\n")]            # drop a cut-off last line
        self.cache.put(flight.prefix, flight.suffix_head, keep, flight.rid)

    def _stop_early(self, flight: Flight) -> None:
        if not flight.finished and self.cfg.cancel_stale:
            flight.extra["stopped_early"] = True
            flight.finished = True                   # nothing more will be used from it
            self.stats.stopped_early += 1
            self.inflight.remove(flight)
            self._to_cache(flight)
            self.channel.cancel(flight.rid)          # the rest would be wasted: cancel it on the backend
            self._notify(flight)

    def _notify(self, flight: Flight) -> None:
        ev = flight.extra["event"]
        flight.extra["event"] = asyncio.Event()
        ev.set()

    async def _wait_for_text(self, flight: Flight, ctx: Context, sh, t0: float) -> tuple[str, int, bool]:
        """Wait on `flight` until the text to show at `ctx` is final or the deadline passes: (text, typed,
        final).
        Once the patience is spent (`line_patience_ms`, `block_patience_ms`), a suggestion still being
        written shows what is settled (postprocess.early: complete lines and the complete words of the line
        being written): on a slow engine the pause may end before the line does, and text shown is text not
        generated in vain.
        The rest streams on into the flight, for the keystrokes that type through it."""
        deadline = t0 + self.cfg.deadline_ms / 1000
        patience = min(deadline, t0 + self._patience_ms(sh) / 1000)
        flight.listeners += 1
        text, typed = "", len(ctx.prefix) - len(flight.prefix)
        try:
            while True:
                fit = flight.fit(ctx.prefix, ctx.suffix_head)
                if fit is Fit.STALE or flight.extra.get("cancelled") or flight.extra.get("lost"):
                    return "", typed, True
                final, now = False, self.clock()
                if fit is Fit.REUSABLE:
                    text, final = postprocess.cut(flight.streamed[typed:], sh, flight.finished)
                    if not (final or flight.finished):
                        text = postprocess.early(flight.streamed[typed:], sh) if now >= patience else ""
                if final or flight.finished or now >= deadline or (text and now >= patience):
                    return text, typed, final or flight.finished
                remaining = (patience if now < patience else deadline) - now
                try:
                    await asyncio.wait_for(flight.extra["event"].wait(), remaining)
                except asyncio.TimeoutError:
                    pass
        finally:
            flight.listeners -= 1

    def _release(self, flight: Flight) -> None:
        """An editor request is done with `flight`: stop it if nobody else needs more of it."""
        if flight.listeners == 0 and self._enough(flight):
            self._stop_early(flight)

    def _abandoned(self, flight: Flight, doc: _Doc, snapshot: str) -> None:
        """The editor cancelled its request ($/cancelRequest) and nobody else waits on the flight. Document
        unchanged (Esc, the cursor moved away): stop it now. The user typed on, consistently with it: keep
        it a moment for the request that follows (in-flight reuse), then stop it if nobody came."""
        if flight.listeners > 0 or flight.finished or not self.cfg.cancel_stale:
            return
        if doc.text is snapshot or not self.cfg.inflight_reuse:
            self._cancel(flight, "abandoned")
        else:
            asyncio.get_running_loop().call_later(ABANDON_GRACE_S, self._cancel_if_unused, flight)

    def _cancel_if_unused(self, flight: Flight) -> None:
        if flight.listeners == 0 and not flight.finished:
            self._cancel(flight, "abandoned")

    def _show(self, doc: _Doc, ctx: Context, text: str, sid: str, source: str, t0: float) -> Suggestion:
        x = features(self.predictor.last_outcome, t0 - self.predictor.last_outcome_s, ctx.line_prefix,
                     ctx.line_suffix, doc.language)
        self.outcomes.on_shown(Shown(sid, doc.uri, ctx.prefix, text, doc.language, x, self.clock()))
        return Suggestion(text, sid, source, (self.clock() - t0) * 1000)

    def _mark_shown(self, rid: str) -> None:
        """Text of backend request `rid` reached the editor: its tokens were not wasted."""
        if rid and rid not in self._shown_rids:
            self._shown_rids[rid] = True
            if rid in self._pending_tokens:
                tokens, why = self._pending_tokens.pop(rid)
                self.stats.tokens_never_shown -= tokens
                self.stats.wasted_by[why] -= tokens

    def _cancel(self, flight: Flight, why: str) -> None:
        if flight.finished:
            return
        flight.extra["cancelled"] = why
        flight.extra["cancel_ms"] = round((self.clock() - flight.started_s) * 1000, 1)
        flight.finished = True
        self.stats.cancelled += 1
        self.inflight.remove(flight)
        self.channel.cancel(flight.rid)
        self._notify(flight)                         # a request waiting on it re-checks and gives up

    def _snippets(self, doc: _Doc, ctx: Context) -> list[Snippet]:
        """Neighbouring-file snippets, recomputed only when the cursor moves to another block of 8 lines,
        so that the prompt's head stays the same from keystroke to keystroke."""
        if not self.cfg.snippets:
            return []
        key = (doc.uri, doc.text.count("\n", 0, ctx.prefix_start + len(ctx.prefix)) // 8)
        memo = self._snippet_memo.get(key)
        if memo is None:
            around = "\n".join(ctx.prefix.splitlines()[-self.cfg.snippet_lines:])
            memo = [Snippet(path=p, text=t) for p, t in self.neighbours.best(doc.uri, doc.language, around, self.cfg.snippet_max)]
            if len(self._snippet_memo) > 256:
                self._snippet_memo.clear()
            self._snippet_memo[key] = memo
        return memo

    def _warmup(self, doc: _Doc, offset: int, prefix_max_chars: int | None = None) -> None:
        ctx = self._context(doc, offset, prefix_max_chars=prefix_max_chars)
        if self._launch(doc, ctx, priority=Priority.PREFETCH, prefill_only=True) is not None:
            self.stats.warmups += 1

    def _warm_next_window(self, uri: str) -> None:
        """Within `window_warm_chars` of the prefix window's next move (its start steps down by
        `window_quantum_lines` once the prefix outgrows `prefix_max_chars`), prefill the window it will move
        to, once: the first prompt after the move then finds its head in the engine's prefix cache instead of
        prefilling all of it while the user waits (~400 ms on the embedded default). Asked when one of the
        user's requests ends: a prefetch sent beside it would wait for spare capacity and be superseded by the
        next keystroke's request before it ran."""
        doc = self.docs.get(uri)
        if doc is None or doc.last_cursor is None or not self.cfg.warmup or self.cfg.window_warm_chars <= 0:
            return
        offset, q = min(doc.last_cursor, len(doc.text)), self.cfg.window_quantum_lines
        soon_max = max(1, self.cfg.prefix_max_chars - self.cfg.window_warm_chars)
        soon = prefix_start(doc.text, offset, soon_max, q)
        if soon not in (doc.warmed_start, prefix_start(doc.text, offset, self.cfg.prefix_max_chars, q)):
            doc.warmed_start = soon
            self._warmup(doc, offset, prefix_max_chars=soon_max)

    def _prefetch_after_accept(self, shown: Shown) -> None:
        """Ask for the continuation at prefetch priority, on the document as it is once the accept applied."""
        doc = self.docs.get(shown.uri)
        if doc is None:
            return
        i = doc.text.find(shown.prefix + shown.text)
        if i >= 0:
            text, cursor = doc.text, i + len(shown.prefix) + len(shown.text)
        else:
            j = doc.text.find(shown.prefix)
            if j < 0:
                return
            k = j + len(shown.prefix)
            text, cursor = doc.text[:k] + shown.text + doc.text[k + shown.typed:], k + len(shown.text)
        ctx = self._context(doc, cursor, text)
        if self.cache.get(ctx.prefix, ctx.suffix_head) is None and self._reusable_flight(doc.uri, ctx) is None:
            if self._launch(doc, ctx, priority=Priority.PREFETCH) is not None:
                self.stats.prefetches += 1

    def _telemetry(self, t) -> None:
        if self.cfg.telemetry:
            self.channel.telemetry(t)

    def _waterfall(self, flight: Flight, stream: Stream) -> None:
        """One line per backend request: every hop's time under the request id."""
        end = stream.end
        client_ms = (time.perf_counter() - stream.t_sent) * 1000
        row = {"id": flight.rid, "prefetch": flight.prefetch, "multiline": flight.extra["shape"].multiline,
               "ended": flight.extra["ended"], "shown": flight.rid in self._shown_rids, "place": flight.extra.get("place"),
               "waited_ms": flight.extra.get("waited_ms"), "cancel_ms": flight.extra.get("cancel_ms"),
               "show_ms": (round((flight.extra["show_s"] - flight.started_s) * 1000, 1)
                           if "show_s" in flight.extra else None),
               "client_total_ms": round(client_ms, 2),
               "client_first_chunk_ms": round((stream.t_first - stream.t_sent) * 1000, 2) if stream.t_first else None}
        if isinstance(end, Done):
            t = end.timing
            row.update(finish=end.finish_reason.value, network_ms=round(max(0.0, client_ms - t.total_ms), 2),
                       server_total_ms=t.total_ms, queue_ms=t.queue_ms, tokenize_ms=t.tokenize_ms, ttft_ms=t.ttft_ms,
                       first_decode_ms=t.first_decode_ms, generate_ms=t.generate_ms, prompt_tokens=t.prompt_tokens,
                       cached_tokens=t.cached_tokens, output_tokens=t.output_tokens, tokens_per_s=t.tokens_per_s,
                       spec_proposed=t.spec_proposed, spec_accepted=t.spec_accepted)
        elif isinstance(end, Error):
            row.update(error=end.code, message=end.message)
        elif isinstance(end, Lost):
            row.update(lost=end.reason)
        self.stats.waterfalls.append(row)
        log.info("waterfall %s", row)


def _ending(f: Flight) -> str:
    """How a request ended (waste accounting, waterfall): the cancel reason, stopped_early, prefetch, or
    finished / empty (its text post-processes to nothing)."""
    if f.extra.get("cancelled"):
        return f.extra["cancelled"]
    if f.extra.get("stopped_early"):
        return "stopped_early"
    if f.prefetch:
        return "prefetch"
    return "finished" if postprocess.cut(f.streamed, f.extra["shape"], True)[0] else "empty"


def still_fits(f: Flight, text: str) -> bool:
    """Is the document still at `f`'s prefix followed by typed text consistent with what `f` streamed
    (and then the text that followed the cursor)? Any split of the text after the prefix into typed text +
    suffix head counts: the cursor is not known at edit time."""
    start = f.extra.get("start", 0)
    if text[start:start + len(f.prefix)] != f.prefix:
        return False
    at = start + len(f.prefix)
    head, streamed = f.suffix_head, f.streamed
    common = 0
    while common < len(streamed) and at + common < len(text) and text[at + common] == streamed[common]:
        common += 1
    if any(_same_head(text, at + m, head) for m in range(common + 1)):
        return True                  # typed = streamed[:m]: the user is typing what was generated
    if not f.finished and common == len(streamed):
        if not head:
            return True              # typed past what has arrived so far, at the end of the document
        p = text.find(head, at + common)
        while p >= 0:                # ... or typed past it, and the same text still follows the cursor
            if _same_head(text, p, head):
                return True
            p = text.find(head, p + 1)
    return False


def _same_head(text: str, cursor: int, head: str) -> bool:
    """Would `Context.suffix_head` (the rest of the cursor line and the next) be `head` with the cursor at
    `cursor`? A head that ends at the cursor line's end also matches (the suffix window stopped there)."""
    if not text.startswith(head, cursor):
        return False
    first = text.find("\n", cursor)
    if first < 0:
        return cursor + len(head) == len(text)
    second = text.find("\n", first + 1)
    end = len(text) if second < 0 else second
    return cursor + len(head) in (end, first) and bool(head or first == end)
