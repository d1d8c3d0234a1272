"""Requests already running, per document: reuse one whose prefix + streamed text the new prefix extends,
cancel the ones the document has moved away from.

Pure bookkeeping; the completer owns the tasks and the network. A flight is `reusable` when the text typed
since it was sent is a prefix of what it has streamed, `pending` when what it streamed so far is a prefix of
the typed text (it may still stream the rest), and `stale` otherwise (the user went elsewhere: cancel it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Fit(Enum):
    REUSABLE = "reusable"
    PENDING = "pending"
    STALE = "stale"


@dataclass
class Flight:
    rid: str
    uri: str
    prefix: str              # prefix window the request was made for
    suffix_head: str
    streamed: str = ""       # raw text received so far
    finished: bool = False
    prefetch: bool = False
    started_s: float = 0.0
    listeners: int = 0       # editor requests currently waiting on it
    extra: dict = field(default_factory=dict)

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
