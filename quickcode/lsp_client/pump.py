"""Stream → flight: read each backend request's chunks into its `Flight`, end it exactly once (done, lost,
stopped early, cancelled), and let editor requests wait on it for the text to show. The only waiting of the
keystroke path happens here, on the injected clock (timeouts included).

A generation is stopped once nothing more of it is needed (`enough`: the text to show is final and, if it was
shown, the hot-streak lines beyond it are in); one the document contradicts is cancelled at once. Whatever a
usable flight streamed goes to the cache when it ends.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from quickcode.lsp_client import postprocess
from quickcode.lsp_client.accounting import Accounting, ending
from quickcode.lsp_client.cache import CompletionCache
from quickcode.lsp_client.channel import Channel
from quickcode.lsp_client.stream import Lost, Stream, Unavailable
from quickcode.lsp_client.clock import Clock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.context import Context
from quickcode.lsp_client.debounce import AdaptiveDebounce
from quickcode.lsp_client.inflight import End, Fit, Flight, Inflight, still_fits
from quickcode.lsp_client.postprocess import Shape
from quickcode.protocol import Complete, Done, Error, Priority

ABANDON_GRACE_S = 0.3   # an abandoned request waits this long for the next editor request before it is stopped


class Pump:
    def __init__(self, cfg: ClientConfig, clock: Clock, channel: Channel, inflight: Inflight, cache: CompletionCache,
                 debounce: AdaptiveDebounce, accounting: Accounting, text_of: Callable[[str], str | None],
                 on_more: Callable[[str, int], None] | None = None,
                 on_ended: Callable[[Flight], None] | None = None):
        self.cfg, self.clock, self.channel = cfg, clock, channel
        self.inflight, self.cache, self.debounce, self.acc = inflight, cache, debounce, accounting
        self.text_of = text_of        # uri → the document's text now (None: not open)
        self.on_more = on_more        # (uri, offset): text shown early there is now complete — ask again
        self.on_ended = on_ended      # a user's request ended: the engine is free of it
        self.tasks: set[asyncio.Task] = set()

    def launch(self, msg: Complete, uri: str, ctx: Context, shape: Shape) -> Flight | None:
        """Send `msg` (asked at `ctx`) and pump its stream into a new flight; None if no backend is reachable."""
        try:
            stream = self.channel.submit(msg)
        except Unavailable:
            return None
        self.acc.stats.backend_requests += 1
        flight = Flight(msg.id, uri, ctx.prefix, ctx.suffix_head, prefetch=msg.priority is Priority.PREFETCH,
                        started_s=self.clock.now(), start=ctx.prefix_start, prefill_only=msg.prefill_only, shape=shape,
                        head_cut=ctx.head_cut, line=msg.best_of > 1)
        if not msg.prefill_only:
            for old in self.inflight.add(flight):
                self.cancel(old, End.SUPERSEDED)
        task = asyncio.create_task(self._run(flight, stream), name=f"pump-{flight.rid}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return flight

    async def _run(self, flight: Flight, stream: Stream) -> None:
        try:
            async for text in stream.frames():
                if flight.finished:
                    continue                      # cancelled or stopped: drain until the backend's done
                flight.streamed += text
                self.notify(flight)
                if flight.grow is not None:
                    self._more_ready(flight)
                if flight.show_s is None:
                    self._note_showable(flight, False)
                doc = self.text_of(flight.uri)
                if self.cfg.cancel_stale and (doc is None or not still_fits(flight, doc)):
                    self.cancel(flight, End.TYPED_AWAY)   # what arrived contradicts what the user typed meanwhile
                elif flight.listeners == 0 and self.enough(flight):
                    self.stop_early(flight)
        finally:
            self._ended(flight, stream)

    def _ended(self, flight: Flight, stream: Stream) -> None:
        if flight.end is None:
            flight.end = End.LOST if isinstance(stream.end, (Lost, Error)) else End.DONE
        self.inflight.remove(flight)
        self.to_cache(flight)
        if flight.grow is not None and flight.usable:
            self._more_ready(flight)
        ended = ending(flight)
        if isinstance(stream.end, Done):
            if flight.show_s is None and not flight.end.cancelled:
                self._note_showable(flight, True)
            self.acc.generated(flight, stream.end.timing.output_tokens, ended)
            if stream.t_first is not None and not flight.prefetch:
                self.debounce.latency((stream.t_first - stream.t_sent) * 1000)
        self.acc.waterfall(flight, stream, ended)
        self.notify(flight)
        if not flight.prefetch and self.on_ended is not None:
            self.on_ended(flight)

    def notify(self, flight: Flight) -> None:
        """Wake every editor request waiting on `flight` (they re-check it)."""
        ev, flight.changed = flight.changed, asyncio.Event()
        ev.set()

    async def wait_for_text(self, flight: Flight, ctx: Context, sh: Shape, t0: float) -> tuple[str, int, bool]:
        """Wait on `flight` until the text to show at `ctx` is final or the deadline passes: (text, typed,
        final).
        By the client's suggestion unit (postprocess.showable; a best-of line: whole): a word is shown as soon
        as it is settled. A line or block: once the patience is spent (`line_patience_ms`, `block_patience_ms`),
        a suggestion still being written shows what is settled (postprocess.early: complete lines and the
        complete words of the line being written): on a slow engine the pause may end before the line does, and
        text shown is text not generated in vain.
        The rest streams on into the flight, for the keystrokes that type through it."""
        deadline = t0 + self.cfg.deadline_ms / 1000
        patience = min(deadline, t0 + self.patience_ms(sh) / 1000)
        flight.listeners += 1
        text, typed = "", len(ctx.prefix) - len(flight.prefix)
        try:
            while True:
                fit = flight.fit(ctx.prefix, ctx.suffix_head)
                if fit is Fit.STALE or not flight.usable:
                    return "", typed, True
                final, now = False, self.clock.now()
                if fit is Fit.REUSABLE:
                    text, final = postprocess.showable(flight.streamed[typed:], sh, flight.finished,
                                                       now >= patience,
                                                       "block" if flight.line else self.cfg.suggestion_unit)
                if final or flight.finished or now >= deadline or (text and now >= patience):
                    return text, typed, final or flight.finished
                try:
                    await self.clock.timeout(flight.changed.wait(), (patience if now < patience else deadline) - now)
                except TimeoutError:
                    pass
        finally:
            flight.listeners -= 1

    def patience_ms(self, sh: Shape) -> float:
        """After this, a suggestion still being written shows what is settled (0: only once it is final)."""
        return (self.cfg.block_patience_ms if sh.multiline else self.cfg.line_patience_ms) or self.cfg.deadline_ms

    # ── ending a flight
    def cancel(self, flight: Flight, why: End) -> None:
        if flight.finished:
            return
        flight.end = why
        flight.cancel_ms = round((self.clock.now() - flight.started_s) * 1000, 1)
        self.acc.stats.cancelled += 1
        self.inflight.remove(flight)
        self.channel.cancel(flight.rid)
        self.notify(flight)                          # a request waiting on it re-checks and gives up

    def stop_early(self, flight: Flight) -> None:
        if not flight.finished and self.cfg.cancel_stale:
            flight.end = End.STOPPED_EARLY           # nothing more will be used from it
            self.acc.stats.stopped_early += 1
            self.inflight.remove(flight)
            self.to_cache(flight)
            self.channel.cancel(flight.rid)          # the rest would be wasted: cancel it on the backend
            self.notify(flight)

    def release(self, flight: Flight) -> None:
        """An editor request is done with `flight`: stop it if nobody else needs more of it."""
        if flight.listeners == 0 and self.enough(flight):
            self.stop_early(flight)

    def abandoned(self, flight: Flight, document_unchanged: bool) -> None:
        """The editor cancelled its request ($/cancelRequest) and nobody else waits on the flight. Document
        unchanged (Esc, the cursor moved away): stop it now. The user typed on, consistently with it: keep
        it a moment for the request that follows (in-flight reuse), then stop it if nobody came."""
        if flight.listeners > 0 or flight.finished or not self.cfg.cancel_stale:
            return
        if document_unchanged or not self.cfg.inflight_reuse:
            self.cancel(flight, End.ABANDONED)
        else:
            self.clock.later(ABANDON_GRACE_S, lambda: self._cancel_if_unused(flight))

    def _cancel_if_unused(self, flight: Flight) -> None:
        if flight.listeners == 0 and not flight.finished:
            self.cancel(flight, End.ABANDONED)

    def enough(self, flight: Flight) -> bool:
        """The text to show is final and, once it has been shown, the hot-streak lines beyond it have arrived
        (or the block ended). Lines after text nobody has seen are not generated: they would be for nobody."""
        shown, final = postprocess.cut(flight.streamed, flight.shape, finished=False)
        if not final:
            return False
        if flight.shape.multiline or not shown or not self.acc.was_shown(flight.rid):
            return True
        return flight.streamed.count("\n") > self.cfg.hot_streak_lines

    def to_cache(self, flight: Flight) -> None:
        """Keep what a request streamed for the positions ahead (once; not for cancelled or lost requests)."""
        if not self.cfg.cache or not flight.streamed or flight.cached or not flight.usable:
            return
        flight.cached = True
        keep = flight.streamed
        if flight.end is End.STOPPED_EARLY and "\n" in keep:
            keep = keep[: keep.rfind("\n")]            # drop a cut-off last line
        self.cache.put(flight.prefix, flight.suffix_head, keep, flight.rid)

    # ── what the flight's progress tells others
    def _note_showable(self, flight: Flight, finished: bool) -> None:
        """Measure how long after sending a request it has text to show — final, or settled words once the
        patience is spent (what the debounce must leave time for)."""
        if flight.prefetch:
            return
        sh, now = flight.shape, self.clock.now()
        if not postprocess.cut(flight.streamed, sh, finished)[1] and not (
                now - flight.started_s >= self.patience_ms(sh) / 1000 and postprocess.early(flight.streamed, sh)):
            return
        flight.show_s = now
        self.debounce.shown_after((now - flight.started_s) * 1000)

    def _more_ready(self, flight: Flight) -> None:
        """Text shown early (its settled part) is now complete: if the document is still as it was shown and
        the whole text extends what was shown, the editor is told, and asks again (the answer comes from this
        flight or the cache). A line that turned out to loop is not announced: the ghost text stays as it is."""
        g = flight.grow
        if self.text_of(flight.uri) is not g.snapshot:
            flight.grow = None                       # the user moved on: the editor asks by itself
            return
        text, final = postprocess.cut(flight.streamed[g.typed:], g.shape, flight.finished)
        if not final:
            return
        flight.grow = None
        if self.on_more is not None and len(text) > len(g.shown) and text.startswith(g.shown):
            self.on_more(flight.uri, g.offset)
