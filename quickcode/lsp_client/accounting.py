"""What the language server counts: editor requests and how each was answered, backend requests and how each
ended, tokens generated and the ones never shown (waste, by how the request ended), and one waterfall row per
backend request (every hop's time under its id). Shown by `quickcode.stats` and the latency report.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from lru import LRU

from quickcode.lsp_client import postprocess
from quickcode.lsp_client.stream import Lost, Stream
from quickcode.lsp_client.inflight import End, Flight
from quickcode.protocol import Done, Error

log = logging.getLogger("quickcode.session")


@dataclass
class Stats:
    requests: int = 0                # editor requests
    served_cache: int = 0
    served_inflight: int = 0
    served_network: int = 0
    empty: int = 0
    empty_from_cache: int = 0        # the cache's rest here post-processed to nothing: asked anew
    skipped_predictor: int = 0
    served_document: int = 0         # the rest of the word from the document's identifiers: nothing asked
    skipped_place: int = 0           # no request: the cursor 1..skip_word_chars into a word
    superseded_waits: int = 0
    not_asked: int = 0               # the document is not open, or completion is off for its language
    unavailable: int = 0             # no backend connected: answered empty at once
    editor_cancelled: int = 0        # the editor cancelled the request ($/cancelRequest) before its answer
    rebased: int = 0                 # answers the user typed into while they were written: their rest, further on
    stale_dropped: int = 0           # answers the document moved away from before they were sent: answered empty
    late: int = 0                    # answered empty at the deadline, the request still running: re-asked once in
    backend_requests: int = 0
    cancelled: int = 0
    stopped_early: int = 0
    prefetches: int = 0
    warmups: int = 0
    tokens_generated: int = 0        # output tokens of finished backend requests
    tokens_never_shown: int = 0      # ... of requests none of whose text was ever shown (wasted)
    wasted_by: dict = field(default_factory=dict)   # how each wasted request ended → its tokens
    waterfalls: deque = field(default_factory=lambda: deque(maxlen=500))

    DECISIONS = ("not_asked", "served_cache", "served_document", "skipped_predictor", "skipped_place", "superseded_waits",
                 "unavailable", "served_network", "served_inflight", "empty", "editor_cancelled")

    def decisions(self) -> dict[str, int]:
        """How each editor request ended: exactly one of these per request (they sum to `requests`)."""
        return {k: getattr(self, k) for k in self.DECISIONS}

    def as_dict(self) -> dict:
        return {**{k: v for k, v in self.__dict__.items() if k != "waterfalls"}, "decisions": self.decisions()}


def ending(f: Flight) -> str:
    """How a request ended (waste accounting, waterfall): the cancel reason, stopped_early, prefetch, or
    finished / empty (its text post-processes to nothing)."""
    if f.end is not None and (f.end.cancelled or f.end is End.STOPPED_EARLY):
        return f.end.value
    if f.prefetch:
        return "prefetch"
    return "finished" if postprocess.cut(f.streamed, f.shape, True)[0] else "empty"


class Accounting:
    def __init__(self):
        self.stats = Stats()
        self._shown_rids: LRU = LRU(10_000)      # backend request ids whose text was shown
        self._pending_tokens: LRU = LRU(10_000)  # rid → (output tokens, ending), finished but not (yet) shown

    def was_shown(self, rid: str) -> bool:
        return rid in self._shown_rids

    def mark_shown(self, rid: str) -> None:
        """Text of backend request `rid` reached the editor: its tokens were not wasted."""
        if rid and rid not in self._shown_rids:
            self._shown_rids[rid] = True
            if rid in self._pending_tokens:
                tokens, why = self._pending_tokens.pop(rid)
                self.stats.tokens_never_shown -= tokens
                self.stats.wasted_by[why] -= tokens

    def generated(self, flight: Flight, tokens: int, ended: str) -> None:
        """A backend request's done: its tokens count as wasted until some of its text is shown."""
        self.stats.tokens_generated += tokens
        if flight.rid not in self._shown_rids:
            self.stats.tokens_never_shown += tokens
            self.stats.wasted_by[ended] = self.stats.wasted_by.get(ended, 0) + tokens
            self._pending_tokens[flight.rid] = (tokens, ended)

    def waterfall(self, flight: Flight, stream: Stream, ended: str) -> None:
        """One line per backend request: every hop's time under the request id."""
        end = stream.end
        client_ms = (stream.clock.now() - stream.t_sent) * 1000     # on the stream's own clock
        row = {"id": flight.rid, "prefetch": flight.prefetch, "multiline": flight.shape.multiline,
               "ended": ended, "shown": flight.rid in self._shown_rids, "place": flight.place,
               "waited_ms": flight.waited_ms, "cancel_ms": flight.cancel_ms,
               "show_ms": round((flight.show_s - flight.started_s) * 1000, 1) if flight.show_s is not None else None,
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
