"""Small synchronous WebSocket helpers for the backend's operational tests (auth, limits, faults, fuzz, nginx).

They speak the wire protocol with the real `websockets` client and plain dicts, so a test reads like the
frames it exchanges. Every receive has a timeout: a test fails, it never hangs.
"""
from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass, field

from websockets.asyncio.client import connect as connect_async
from websockets.sync.client import ClientConnection, connect

TERMINAL = ("done", "error")


def open_session(url: str, *, token: str | None = None, query_token: bool = False, headers: dict | None = None,
                 ssl_context: ssl.SSLContext | None = None, user: str = "", max_size: int | None = 1 << 24,
                 timeout_s: float = 10.0, ping_interval: float | None = 20.0
                 ) -> tuple[ClientConnection | LoopConnection, dict]:
    """Connect, send hello, return (connection, welcome frame). wss:// goes through `LoopConnection`."""
    hdrs = dict(headers or {})
    if token and query_token:
        url = f"{url}{'&' if '?' in url else '?'}token={token}"
    elif token:
        hdrs["Authorization"] = f"Bearer {token}"
    kw = dict(additional_headers=hdrs, max_size=max_size, close_timeout=2, ping_interval=ping_interval)
    if ssl_context is not None:
        ws = _connect_tls(url, timeout_s, ssl_context, **kw)
    else:   # legacy=True: the connection is returned, not a context manager
        ws = connect(url, open_timeout=timeout_s, legacy=True, **kw)
    ws.send(json.dumps({"kind": "hello", "protocol_version": 1, "user": user}))
    welcome = recv(ws, timeout_s)
    assert welcome["kind"] == "welcome", welcome
    return ws, welcome


class LoopConnection:
    """The part of websockets' sync connection the tests use (send, recv with a timeout, close, `with`), over its
    asyncio client on a private event-loop thread that does all the I/O.

    For wss://: OpenSSL does not allow one TLS connection to be read and written from two threads at once, and
    websockets' sync client does exactly that (its reader thread sits in SSL_read while the caller writes). Under
    load, the reader taking in the server's TLS 1.3 session tickets while the caller wrote the upgrade request
    lost the request: no answer, then a hang (CPython gh-137583; python-socketio #1568). The product's client is
    asyncio (one thread), like this."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread, ws):
        self._loop, self._ws = loop, ws
        self._stop = weakref.finalize(self, _stop_loop, loop, thread)   # a connection dropped unclosed stops its loop

    def _run(self, coro, timeout_s: float | None):
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout_s)
        except TimeoutError:
            fut.cancel()          # websockets' asyncio recv() may be cancelled without losing a message
            raise

    def send(self, message: str | bytes) -> None:
        self._run(self._ws.send(message), 30.0)

    def recv(self, timeout: float | None = None) -> str | bytes:
        return self._run(self._ws.recv(), timeout)

    def close(self) -> None:
        try:
            if self._stop.alive:
                self._run(self._ws.close(), 10.0)
        finally:
            self._stop()

    def __enter__(self) -> LoopConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _connect_tls(url: str, timeout_s: float, ssl_context: ssl.SSLContext, **kw) -> LoopConnection:
    async def _open():
        return await connect_async(url, ssl=ssl_context, open_timeout=timeout_s, **kw)

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="wss-test-client", daemon=True)
    thread.start()
    fut = asyncio.run_coroutine_threadsafe(_open(), loop)
    try:
        return LoopConnection(loop, thread, fut.result(timeout_s + 2.0))
    except BaseException:
        fut.cancel()
        _stop_loop(loop, thread)
        raise


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5.0)
    if not loop.is_running() and not loop.is_closed():
        loop.close()


def recv(ws: ClientConnection, timeout_s: float = 10.0) -> dict:
    return json.loads(ws.recv(timeout=timeout_s))


@dataclass
class Result:
    """Everything one request got back: its chunks' text and its one terminal frame."""
    id: str
    text: str = ""
    chunks: int = 0
    terminal: dict = field(default_factory=dict)
    first_chunk_s: float | None = None
    elapsed_s: float = 0.0

    @property
    def kind(self) -> str:
        return self.terminal.get("kind", "")

    @property
    def finish_reason(self) -> str:
        return self.terminal.get("finish_reason", "")

    @property
    def code(self) -> str:
        return self.terminal.get("code", "")


def complete(ws: ClientConnection, rid: str, prefix: str = "def add(a, b):\n    ", *, timeout_s: float = 60.0,
             **fields) -> Result:
    """Send one complete and read until its terminal frame (frames of other ids are a test failure)."""
    t0 = time.perf_counter()
    ws.send(json.dumps({"kind": "complete", "id": rid, "prefix": prefix, **fields}))
    return read_until_terminal(ws, rid, t0, timeout_s)


def read_until_terminal(ws: ClientConnection, rid: str, t0: float | None = None, timeout_s: float = 60.0) -> Result:
    t0 = time.perf_counter() if t0 is None else t0
    res = Result(rid)
    deadline = t0 + timeout_s
    while True:
        msg = recv(ws, max(0.01, deadline - time.perf_counter()))
        assert msg.get("id") == rid, f"frame for another request while waiting for {rid!r}: {msg}"
        if msg["kind"] == "chunk":
            res.text += msg["text"]
            res.chunks += 1
            if res.first_chunk_s is None:
                res.first_chunk_s = time.perf_counter() - t0
            continue
        assert msg["kind"] in TERMINAL, msg
        res.terminal = msg
        res.elapsed_s = time.perf_counter() - t0
        return res


def assert_nothing_queued(ws: ClientConnection, tag: str = "nothing-queued") -> None:
    """No frame is waiting on `ws`: frames are answered in order, so an unknown kind sent now must be answered
    by the very next frame (an event, not a silence timed on the clock)."""
    ws.send(json.dumps({"kind": tag}))
    m = recv(ws, 30)
    assert m["kind"] == "error" and m["code"] == "unknown_kind" and repr(tag) in m["message"], f"a frame was left: {m}"


def http_get(url: str, *, token: str | None = None, ssl_context: ssl.SSLContext | None = None,
             timeout_s: float = 5.0) -> tuple[int, bytes]:
    """(status, body) — HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=ssl_context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
