"""A request as the completion service holds it while it lives: where its frames go, its prompt, its
times and counts, and where its time went (`Timing`, sent with its `done`)."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from quickcode.backend.fim import Healed
from quickcode.protocol import Complete, Edit, Message, Timing


class Sink(Protocol):
    def send(self, msg: Message) -> None: ...


@dataclass
class Request:
    """One live request: a completion (`Complete`) or a next edit (`Edit`)."""
    key: tuple[str, str]
    engine_id: str
    sink: Sink
    msg: Complete | Edit
    user: str
    prompt_ids: list[int]
    t_recv: float
    tokenize_ms: float
    t_queued: float = 0.0
    t_start: float | None = None
    t_first: float | None = None
    t_first_chunk: float | None = None
    t_second: float | None = None
    t_last: float | None = None
    output_tokens: int = 0
    cached_tokens: int = 0
    spec_proposed: int = 0
    spec_accepted: int = 0
    healed: Healed = field(default_factory=lambda: Healed(""))
    cache_salt: str | None = None        # the user's tenant (tenancy.py): whose cached blocks it may hit
    route: str = "ws"                    # how it came: the WebSocket, or the HTTP path (the access log's)
    task: asyncio.Task | None = None
    ended: bool = False
    written: str = ""                    # the text sent, kept only for `max_words`

    def timing(self) -> Timing:
        """Where this request's time went, so far."""
        now = time.perf_counter()
        start = self.t_start
        gen_s = (self.t_last - self.t_first) if self.t_first and self.t_last else 0.0
        return Timing(
            queue_ms=round(((start or now) - self.t_queued) * 1000, 3),
            tokenize_ms=round(self.tokenize_ms, 3),
            ttft_ms=round((self.t_first - start) * 1000, 3) if self.t_first and start else 0.0,
            first_decode_ms=round((self.t_second - self.t_first) * 1000, 3) if self.t_second else 0.0,
            generate_ms=round(gen_s * 1000, 3),
            total_ms=round((now - self.t_recv) * 1000, 3),
            prompt_tokens=len(self.prompt_ids), cached_tokens=self.cached_tokens,
            output_tokens=self.output_tokens,
            tokens_per_s=round((self.output_tokens - 1) / gen_s, 1)
            if gen_s > 0 and self.output_tokens > 1 else 0.0,
            spec_proposed=self.spec_proposed, spec_accepted=self.spec_accepted,
        )
