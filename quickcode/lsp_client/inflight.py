"""Requests already running, per document: reuse one whose prefix + streamed text the new prefix extends,
cancel the ones the document has moved away from.

Pure bookkeeping; pump.py owns the tasks and the network. A flight is `reusable` when the text typed since it
was sent is a prefix of what it has streamed, `pending` when what it streamed so far is a prefix of the typed
text (it may still stream the rest), and `stale` otherwise (the user went elsewhere: cancel it). A flight
ends exactly once (`Flight.end`): the backend's done, lost, stopped early by us, or cancelled for a reason.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from quickcode.lsp_client.postprocess import Shape


class Fit(Enum):
    REUSABLE = "reusable"
    PENDING = "pending"
    STALE = "stale"


class End(Enum):
    DONE = "done"                  # the backend's done arrived while we still wanted the text
    LOST = "lost"                  # connection lost or engine error mid-stream: answer empty, cache nothing
    STOPPED_EARLY = "stopped_early"    # the text to show was final and nobody needed more: we stopped it
    TYPED_AWAY = "typed_away"      # cancelled: the document contradicts what it streamed
    SUPERSEDED = "superseded"      # cancelled: a newer request of the document does not extend it
    CLOSED = "closed"              # cancelled: its document was closed
    ABANDONED = "abandoned"        # cancelled: the editor cancelled its request and nobody came for it

    @property
    def cancelled(self) -> bool:
        return self in _CANCELS


_CANCELS = {End.TYPED_AWAY, End.SUPERSEDED, End.CLOSED, End.ABANDONED}


@dataclass(frozen=True)
class Grow:
    """Text shown early (its settled part) at `offset`, to announce once the rest of it is in (`on_more`)."""
    offset: int
    snapshot: str            # the document text it was shown on (compared by identity: any edit moves on)
    typed: int               # characters of the flight's text typed before it was shown
    shape: Shape
    shown: str


@dataclass
class Flight:
    rid: str
    uri: str
    prefix: str              # prefix window the request was made for
    suffix_head: str
    streamed: str = ""       # raw text received so far
    end: End | None = None   # None while running
    prefetch: bool = False
    started_s: float = 0.0
    listeners: int = 0       # editor requests currently waiting on it
    start: int = 0           # document offset of `prefix`
    head_cut: bool = False   # `suffix_head` ends where the window cut a long line (context.Context.head_cut)
    shape: Shape | None = None
    prefill_only: bool = False
    cached: bool = False     # its streamed text went to the cache (once)
    show_s: float | None = None      # when its text to show became final (or settled after the patience)
    waited_ms: float | None = None   # the debounce before it was sent
    place: str | None = None         # the kind of place it was asked at
    cancel_ms: float | None = None   # sent → cancelled
    grow: Grow | None = None
    line: bool = False       # a best-of line (Complete.best_of): shown whole, whatever the suggestion unit
    changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)   # set on every change

    @property
    def finished(self) -> bool:
        return self.end is not None

    @property
    def usable(self) -> bool:
        """Its text may be shown or cached: not cancelled and not lost."""
        return self.end is None or self.end in (End.DONE, End.STOPPED_EARLY)

    def fit(self, prefix: str, suffix_head: str) -> Fit:
        if suffix_head != self.suffix_head or len(prefix) < len(self.prefix) or not prefix.startswith(self.prefix):
            return Fit.STALE
        typed = prefix[len(self.prefix):]
        if self.streamed.startswith(typed):
            return Fit.REUSABLE if (typed or self.streamed or self.finished) else Fit.PENDING
        if not self.finished and typed.startswith(self.streamed):
            return Fit.PENDING
        return Fit.STALE


class Inflight:
    def __init__(self, max_per_doc: int = 2):
        self.max_per_doc = max_per_doc
        self.by_uri: dict[str, list[Flight]] = {}

    def add(self, flight: Flight) -> list[Flight]:
        """Register `flight`; return the oldest flights of its document over the cap (to cancel)."""
        flights = self.by_uri.setdefault(flight.uri, [])
        flights.append(flight)
        over = flights[: max(0, len(flights) - self.max_per_doc)]
        for f in over:
            flights.remove(f)
        return over

    def remove(self, flight: Flight) -> None:
        flights = self.by_uri.get(flight.uri)
        if flights and flight in flights:
            flights.remove(flight)
            if not flights:
                del self.by_uri[flight.uri]

    def best(self, uri: str, prefix: str, suffix_head: str) -> tuple[Flight | None, list[Flight]]:
        """(a flight to wait on or serve from, the stale flights of this document)."""
        chosen, stale = None, []
        for f in reversed(self.by_uri.get(uri, [])):   # newest first
            fit = f.fit(prefix, suffix_head)
            if fit is Fit.STALE:
                stale.append(f)
            elif chosen is None:
                chosen = f
        return chosen, stale

    def for_uri(self, uri: str) -> list[Flight]:
        return list(self.by_uri.get(uri, []))

    def all(self) -> list[Flight]:
        return [f for fs in self.by_uri.values() for f in fs]


def still_fits(f: Flight, text: str) -> bool:
    """Is the document still at `f`'s prefix followed by typed text consistent with what `f` streamed
    (and then the text that followed the cursor)? Any split of the text after the prefix into typed text +
    suffix head counts: the cursor is not known at edit time."""
    if text[f.start:f.start + len(f.prefix)] != f.prefix:
        return False
    at = f.start + len(f.prefix)
    head, streamed = f.suffix_head, f.streamed
    common = 0
    while common < len(streamed) and at + common < len(text) and text[at + common] == streamed[common]:
        common += 1
    if any(_same_head(text, at + m, head, f.head_cut) for m in range(common + 1)):
        return True                  # typed = streamed[:m]: the user is typing what was generated
    if not f.finished and common == len(streamed):
        if not head:
            return True              # typed past what has arrived so far, at the end of the document
        p = text.find(head, at + common)
        while p >= 0:                # ... or typed past it, and the same text still follows the cursor
            if _same_head(text, p, head, f.head_cut):
                return True
            p = text.find(head, p + 1)
    return False


def _same_head(text: str, cursor: int, head: str, cut: bool = False) -> bool:
    """Would `Context.suffix_head` (the rest of the cursor line and the next) be `head` with the cursor at
    `cursor`? A head that ends at the cursor line's end also matches (the suffix window stopped there), and so
    does any text that starts with a head the window cut inside a long line (`cut`)."""
    if not text.startswith(head, cursor):
        return False
    if cut:
        return True
    first = text.find("\n", cursor)
    if first < 0:
        return cursor + len(head) == len(text)
    second = text.find("\n", first + 1)
    end = len(text) if second < 0 else second
    return cursor + len(head) in (end, first) and bool(head or first == end)
