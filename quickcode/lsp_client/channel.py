"""One WebSocket to the backend: connect to the nearest healthy endpoint, hello/welcome, demultiplex frames
by request id, reconnect with jittered backoff, and fail every pending request at once when the connection
is lost (the editor gets an empty answer, never a hang).

A request is a `Stream` (stream.py): chunks, then one end (`Done`, `Error`, or a local `Lost`). With requests pending, a
watchdog pings a silent connection: a dead network is noticed in ~3 s (a busy backend may take 1 s or more to pong).
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random

import websockets
from websockets.asyncio.client import ClientConnection, connect

from quickcode.lsp_client.clock import REAL, Clock
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.endpoints import EndpointChooser, probe_all
from quickcode.lsp_client.refusal import advice, check_welcome, classify
from quickcode.lsp_client.stream import Lost, Stream, Unavailable
from quickcode.protocol import (PROTOCOL_VERSION, Cancel, Complete, Done, Error, Hello, ProtocolError,
                                Telemetry, Welcome, decode, encode)

log = logging.getLogger("quickcode.channel")

CONNECT_TIMEOUT_S = 3.0
WATCHDOG_SILENCE_S = 0.2     # with requests pending and no frame for this long, ping
WATCHDOG_PONG_S = 2.5        # ... dead if the pong takes longer (0.3 s and 1.0 s dropped busy live backends)
REFUSED_RETRY_S = 30.0       # a wrong token or an incompatible server is tried again this seldom


@functools.cache
def _local_user() -> str:
    """A stable, non-identifying key for this developer on this machine (user and host, hashed)."""
    import getpass
    import hashlib
    import socket

    try:
        who = f"{getpass.getuser()}@{socket.gethostname()}"
    except Exception:  # no user database entry (containers): the host alone still keeps affinity
        who = socket.gethostname()
    return "u-" + hashlib.sha256(who.encode()).hexdigest()[:16]


class Channel:
    def __init__(self, cfg: ClientConfig, client_name: str = "quickcode-lsp", on_state=None, clock: Clock = REAL,
                 on_problem=None):
        self.cfg = cfg
        self.clock = clock
        self.on_problem = on_problem or (lambda message: None)   # a refusal to show the user (once)
        self.problem: tuple[str, str] | None = None              # (kind, detail) while refused for good
        self._told: set[tuple[str, str]] = set()
        self._wake = asyncio.Event()
        self._token = cfg.token
        self.client_name = client_name
        self.on_state = on_state or (lambda state: None)
        self.chooser = EndpointChooser(cfg.endpoints)
        self.ws: ClientConnection | None = None
        self.url: str | None = None
        self.welcome: Welcome | None = None
        self.streams: dict[str, Stream] = {}
        self._ids = itertools.count(1)
        self._tasks: list[asyncio.Task] = []
        self._closed = False
        self._last_frame_s = clock.now()
        self.connects = self.watchdog_drops = 0   # connections made; dropped for a missing pong
        self.last_error = ""

    # ── public
    @property
    def connected(self) -> bool:
        return self.ws is not None and self.welcome is not None

    def new_id(self) -> str:
        return f"r{next(self._ids)}"

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(), name="channel"),
                       asyncio.create_task(self._probe_loop(), name="channel-probe"),
                       asyncio.create_task(self._watchdog(), name="channel-watchdog")]

    async def close(self) -> None:
        self._closed = True
        for t in self._tasks:
            t.cancel()
        if self.ws is not None:
            await self.ws.close()
        self._fail_all("closed")

    def reconfigure(self, cfg: ClientConfig) -> None:
        """New endpoints or token: reconnect. (The settings object may be the one this channel holds, changed in
        place: what the connection was made with is compared, not the object.)"""
        changed = list(dict.fromkeys(cfg.endpoints)) != list(self.chooser.endpoints) or cfg.token != self._token
        self.cfg, self._token = cfg, cfg.token
        if changed:
            self.problem, self._told = None, set()
            self._wake.set()                             # a refused connection is tried again at once
            self.chooser = EndpointChooser(cfg.endpoints)
            if self.ws is not None:
                asyncio.create_task(self.ws.close(1000, "reconfigured"))

    def submit(self, msg: Complete) -> Stream:
        if not self.connected:
            raise Unavailable(self.last_error or "not connected")
        stream = Stream(msg.id, self.clock)
        self.streams[msg.id] = stream
        self._send(msg)
        return stream

    def cancel(self, rid: str) -> None:
        """Ask the backend to stop `rid` (it aborts the engine request and answers `done`)."""
        stream = self.streams.get(rid)
        if stream is None or stream.cancelled_s is not None:
            return
        stream.cancelled_s = self.clock.now()
        if self.connected:
            self._send(Cancel(id=rid))
        else:
            self.streams.pop(rid, None)
            stream._push(Lost("cancelled"))

    def telemetry(self, t: Telemetry) -> None:
        if self.connected:
            self._send(t)

    def status(self) -> dict:
        return {"connected": self.connected, "endpoint": self.url, "endpoints": self.chooser.snapshot(),
                "model": self.welcome.model if self.welcome else "", "replica": self.welcome.replica if self.welcome else "",
                "pending": len(self.streams), "pending_ids": list(self.streams)[-8:],
                "streaming_ids": [r for r, st in list(self.streams.items())[-8:] if st.t_first is not None], "connects": self.connects,
                "last_error": self.last_error, "refused": self.problem[0] if self.problem else "",
                "watchdog_drops": self.watchdog_drops}

    # ── internals
    def _send(self, msg) -> None:
        ws = self.ws
        if ws is None:
            return
        asyncio.create_task(self._send_now(ws, encode(msg).decode()))

    async def _send_now(self, ws: ClientConnection, data: str) -> None:
        try:
            await ws.send(data)
        except websockets.ConnectionClosed:
            pass  # the reader notices the close and fails the pending streams

    def _fail_all(self, reason: str) -> None:
        streams, self.streams = self.streams, {}
        for s in streams.values():
            s._push(Lost(reason))

    def _headers(self) -> dict:
        """The token, and a stable user key a load balancer can hash on to keep this user on one replica
        (prefix-cache affinity; see deploy/nginx) even on an open server."""
        headers = {"X-Quickcode-User": self.cfg.user or _local_user()}
        if self.cfg.token:
            headers["Authorization"] = f"Bearer {self.cfg.token}"
        return headers

    async def _run(self) -> None:
        attempt = 0
        if len(self.chooser.endpoints) > 1:
            await self._probe_all()   # choose the nearest before the first connection
        while not self._closed:
            url = self.chooser.best(self.clock.now())
            try:
                async with connect(url, additional_headers=self._headers(), open_timeout=CONNECT_TIMEOUT_S,
                                   ping_interval=20, ping_timeout=20, compression=None, max_size=1 << 22,
                                   close_timeout=1) as ws:
                    await ws.send(encode(Hello(protocol_version=PROTOCOL_VERSION, client=self.client_name,
                                               user=self.cfg.user)).decode())
                    welcome = check_welcome(decode(await self.clock.timeout(ws.recv(), CONNECT_TIMEOUT_S)))
                    self.ws, self.url, self.welcome = ws, url, welcome
                    self.connects += 1
                    attempt = 0
                    self.last_error, self.problem, self._told = "", None, set()
                    self.chooser.record_success(url)
                    self._last_frame_s = self.clock.now()
                    log.info("connected to %s (replica %s, session %s, model %s)", url, welcome.replica,
                             welcome.session_id, welcome.model)
                    self.on_state(self.status())
                    async for data in ws:
                        self._last_frame_s = self.clock.now()
                        self._dispatch(data)
                    code = ws.close_code
                    self.last_error = f"closed ({code} {ws.close_reason})" if code is not None else "connection closed"
            except asyncio.CancelledError:
                raise
            except (OSError, asyncio.TimeoutError, websockets.WebSocketException, ConnectionError, ProtocolError) as e:
                self.last_error = f"{type(e).__name__}: {e}"
                self.chooser.record_failure(url, self.clock.now())
                self._refused(url, classify(e))
            except Exception as e:  # the connection loop must outlive any surprise: log it and reconnect
                log.exception("unexpected failure on %s", url)
                self.last_error = f"{type(e).__name__}: {e}"
            finally:
                was_connected = self.ws is not None
                self.ws, self.welcome = None, None
                self._fail_all("connection lost")
                if was_connected:
                    log.warning("lost %s: %s", url, self.last_error)
                    self.on_state(self.status())
            if self._closed:
                return
            attempt += 1
            delay = min(2.0, 0.05 * 2 ** min(attempt, 6))      # 0.1 s, 0.2 s, … capped at 2 s
            if self.problem is not None:
                delay = REFUSED_RETRY_S                          # a token or a version does not fix itself soon
            try:                                               # jitter: replicas restart, clients don't stampede
                await self.clock.timeout(self._wake.wait(), delay * random.uniform(0.5, 1.5))
            except TimeoutError:
                pass
            self._wake.clear()

    def _refused(self, url: str, problem: tuple[str, str] | None) -> None:
        """Tell the user once why `url` refused us for good (not every retry); an ordinary failure says nothing."""
        self.problem = problem
        if problem is not None and (url, problem[0]) not in self._told:
            self._told.add((url, problem[0]))
            log.error("%s", advice(problem[0], url, problem[1]))
            self.on_problem(advice(problem[0], url, problem[1]))

    def _dispatch(self, data: str | bytes) -> None:
        try:
            msg = decode(data)
        except ProtocolError as e:
            log.warning("undecodable frame from the backend: %s", e)
            return
        rid = getattr(msg, "id", None)
        stream = self.streams.get(rid) if rid else None
        if stream is None:
            if isinstance(msg, Error) and not rid:
                log.warning("backend error: %s %s", msg.code, msg.message)
            return
        stream._push(msg)
        if isinstance(msg, (Done, Error)):
            self.streams.pop(rid, None)

    async def _watchdog(self) -> None:
        """With requests pending on a silent connection, ping; no pong in time means the network is gone."""
        while True:
            await self.clock.sleep(0.1)
            ws = self.ws
            if ws is None or not self.streams or self.clock.now() - self._last_frame_s < WATCHDOG_SILENCE_S:
                continue
            try:
                pong = await ws.ping()
                await self.clock.timeout(pong, WATCHDOG_PONG_S)
                self._last_frame_s = self.clock.now()
            except (asyncio.TimeoutError, websockets.ConnectionClosed):
                if self.ws is ws:
                    self.last_error, self.watchdog_drops = "no pong: network lost", self.watchdog_drops + 1
                    log.warning("backend %s did not answer a ping in %.0f ms", self.url, WATCHDOG_PONG_S * 1000)
                    self._fail_all("no pong")
                    ws.transport.abort()

    async def _probe_loop(self) -> None:
        """Measure every endpoint now and then; move to a clearly nearer healthy one when idle (failback)."""
        while True:
            await self.clock.sleep(self.cfg.probe_interval_s)
            if len(self.chooser.endpoints) > 1:
                await self._probe_all()
                better = self.url and self.chooser.better_than(self.url, self.clock.now())
                if better and self.ws is not None and not self.streams:
                    log.info("failing back to nearer endpoint %s", better)
                    await self.ws.close(1000, "moving to a nearer endpoint")
                self.on_state(self.status())

    async def _probe_all(self) -> None:
        """Measure every endpoint (endpoints.probe_all); ours not answering: fail over now."""
        unreachable = await probe_all(self.chooser, self._headers(), self.clock)
        if self.url in unreachable and self.ws is not None:
            log.warning("endpoint %s does not answer probes: failing over", self.url)
            self.last_error = "endpoint unreachable (probe)"
            self._fail_all("endpoint unreachable")
            self.ws.transport.abort()
