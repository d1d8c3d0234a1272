"""One backend request as the language server receives it: chunks, then exactly one end (`Done`, `Error`, or a
local `Lost`), with the times it was sent and its first chunk arrived (on the channel's clock)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from quickcode.lsp_client.clock import REAL, Clock
from quickcode.protocol import Chunk, Done, Error, Replace


class Unavailable(Exception):
    """No connection to any backend right now."""


@dataclass(frozen=True)
class Lost:
    """Local end of a stream: the connection went away (or the request was cancelled by us)."""
    reason: str


CANCEL_DONE_TIMEOUT_S = 5.0   # after a cancel, how long to wait for the backend's done (timing, tokens)


class Stream:
    def __init__(self, rid: str, clock: Clock = REAL):
        self.rid = rid
        self.clock = clock
        self.queue: asyncio.Queue = asyncio.Queue()
        self.end: Done | Error | Lost | None = None
        self.t_sent = clock.now()
        self.t_first: float | None = None
        self.cancelled_s: float | None = None    # we asked the backend to stop; its done is still to come
        self.replace: Replace | None = None      # a next edit's answer (before its done)

    def _push(self, msg) -> None:
        if self.end is not None:
            return
        if isinstance(msg, Replace):
            self.replace = msg
            return
        if isinstance(msg, (Done, Error, Lost)):
            self.end = msg
        elif self.t_first is None:
            self.t_first = self.clock.now()
        self.queue.put_nowait(msg)

    async def frames(self):
        """Yield chunk texts until the end; the end itself is left in `self.end`. Once cancelled, the rest
        is drained until the backend's done (which carries the timing), for at most a few seconds."""
        while True:
            if self.cancelled_s is None:
                msg = await self.queue.get()
            else:
                try:
                    left = CANCEL_DONE_TIMEOUT_S - (self.clock.now() - self.cancelled_s)
                    msg = await self.clock.timeout(self.queue.get(), left)
                except asyncio.TimeoutError:
                    self._push(Lost("no done after cancel"))
                    return
            if isinstance(msg, Chunk):
                yield msg.text
            else:
                return

    async def ended(self) -> Done | Error | Lost:
        """Wait for the end (any chunks are passed over): a next edit's answer is in `replace` by then."""
        async for _ in self.frames():
            pass
        return self.end
