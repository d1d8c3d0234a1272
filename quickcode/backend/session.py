"""One WebSocket connection: hello/welcome handshake, frames in → the completion service, frames out in order.

A bad frame is answered with a typed `error` frame and the session goes on; only a broken handshake
(wrong protocol version, no hello in time) or a client that stops reading closes it, with a clear code.
"""
from __future__ import annotations

import asyncio
import logging
import secrets
import time

from starlette.websockets import WebSocket, WebSocketDisconnect

from quickcode.backend import metrics
from quickcode.backend.service import CompletionService
from quickcode.backend.settings import Settings
from quickcode.protocol import (PROTOCOL_VERSION, Cancel, Complete, Edit, Error, ErrorCode, Hello, Message,
                                ProtocolError, Telemetry, Welcome, decode, encode)

log = logging.getLogger("quickcode.session")

CLOSE_GOING_AWAY = 1001
CLOSE_TRY_AGAIN_LATER = 1013
CLOSE_BAD_HELLO = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_HELLO_TIMEOUT = 4408
CLOSE_SLOW_CONSUMER = 4429
MAX_OUTBOX = 10_000  # frames queued for a client that does not read; past this the session is closed


class Session:
    def __init__(self, ws: WebSocket, service: CompletionService, settings: Settings, user: str | None,
                 model: str):
        self.ws = ws
        self.service = service
        self.s = settings
        self.id = secrets.token_hex(6)
        self.user = user            # from the API token; None on an open server (the session is the user)
        self.model = model
        self.outbox: asyncio.Queue[Message | None] = asyncio.Queue()
        self.closed = False
        self.token_hash: str | None = None   # the API token it was opened with (a reload may revoke it)

    # called synchronously by the service, in order
    def send(self, msg: Message) -> None:
        if self.closed:
            return
        if self.outbox.qsize() >= MAX_OUTBOX:
            log.warning("session %s does not read its frames: closing", self.id)
            self.closed = True
            self.outbox.put_nowait(None)
            return
        self.outbox.put_nowait(msg)

    async def run(self) -> None:
        writer = asyncio.create_task(self._writer(), name=f"ws-writer-{self.id}")
        metrics.SESSIONS.inc()
        try:
            if await self._handshake():
                await self._serve()
        except WebSocketDisconnect:
            pass
        finally:
            self.closed = True
            metrics.SESSIONS.dec()
            self.service.drop_session(self.id)
            writer.cancel()

    async def close(self, code: int, reason: str) -> None:
        """Close from the server side (shutdown drain)."""
        self.closed = True
        try:
            await self.ws.close(code, reason)
        except Exception:  # already closed by the peer: nothing left to tell it
            pass

    async def revoke(self) -> None:
        """Its token was removed from the tokens file: a typed error frame, then close 4401."""
        self._error(ProtocolError(ErrorCode.UNAUTHORIZED, "the API token of this session was revoked"))
        await self._flush()
        await self.close(CLOSE_UNAUTHORIZED, "unauthorized: API token revoked")

    # ── internals
    async def _handshake(self) -> bool:
        # one deadline for the whole handshake: junk frames before hello get typed errors but no extra time
        deadline = time.monotonic() + self.s.hello_timeout_s
        while True:
            try:
                # not asyncio.wait_for: on 3.11 it swallows a cancel that lands as the frame arrives
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    frame = await self.ws.receive()
            except TimeoutError:
                await self.close(CLOSE_HELLO_TIMEOUT, "no hello frame")
                return False
            if frame["type"] == "websocket.disconnect":
                return False
            try:
                msg = decode(_payload(frame), self.s.max_frame_bytes)
            except ProtocolError as e:
                self._error(e)
                continue
            if not isinstance(msg, Hello):
                self._error(ProtocolError(ErrorCode.HELLO_REQUIRED, "the first frame must be 'hello'",
                                          getattr(msg, "id", None)))
                continue
            if msg.protocol_version != PROTOCOL_VERSION:
                self._error(ProtocolError(
                    ErrorCode.VERSION_MISMATCH,
                    f"server speaks protocol {PROTOCOL_VERSION}, client {msg.protocol_version}"))
                await self._flush()
                await self.close(CLOSE_BAD_HELLO, "protocol version mismatch")
                return False
            if self.user is None:
                self.user = f"anon:{self.id}"   # an open server never lets one client name another's user
            self.send(Welcome(protocol_version=PROTOCOL_VERSION, session_id=self.id, server="quickcode",
                              model=self.model, replica=self.s.replica_id,
                              max_prompt_chars=self.s.max_prompt_chars,
                              max_tokens=self.s.max_tokens_limit, max_frame_bytes=self.s.max_frame_bytes,
                              max_prompt_tokens=self.service.prompt_budget_tokens,
                              context_chars=self.service.context_chars))
            return True

    async def _serve(self) -> None:
        while True:
            frame = await self.ws.receive()
            if frame["type"] == "websocket.disconnect":
                return
            t_recv = time.perf_counter()
            try:
                msg = decode(_payload(frame), self.s.max_frame_bytes)
                if isinstance(msg, (Complete, Edit)):
                    self.service.submit(self, self.id, self.user, msg, t_recv)
                elif isinstance(msg, Cancel):
                    self.service.cancel(self.id, msg.id)
                elif isinstance(msg, Telemetry):
                    self.service.telemetry.record(self.user, msg)
                elif isinstance(msg, Hello):
                    raise ProtocolError(ErrorCode.BAD_VALUE, "hello was already received")
                else:
                    raise ProtocolError(ErrorCode.UNKNOWN_KIND, f"a client does not send {msg.kind!r}",
                                        getattr(msg, "id", None))
            except ProtocolError as e:
                self._error(e)
            except Exception as e:  # a bug of ours must not end the session: typed error, keep serving
                log.exception("session %s: unexpected failure", self.id)
                self._error(ProtocolError(ErrorCode.INTERNAL, f"internal error ({type(e).__name__})"))

    def _error(self, e: ProtocolError) -> None:
        metrics.ERRORS.labels(metrics.error_label(e.code.value)).inc()
        self.send(Error(code=e.code.value, message=e.message, id=e.id))

    async def _flush(self) -> None:
        for _ in range(100):
            if self.outbox.empty():
                return
            await asyncio.sleep(0.01)

    async def _writer(self) -> None:
        try:
            while True:
                msg = await self.outbox.get()
                if msg is None:
                    await self.close(CLOSE_SLOW_CONSUMER, "client does not read its frames")
                    return
                await self.ws.send_text(encode(msg).decode())
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.closed = True  # the peer went away mid-send; the reader sees the disconnect and cleans up


def _payload(frame: dict) -> bytes | str:
    data = frame.get("text")
    return data if data is not None else (frame.get("bytes") or b"")

