"""Small synchronous WebSocket helpers for the backend's operational tests (auth, limits, faults, fuzz, nginx).

They speak the wire protocol with the real `websockets` client and plain dicts, so a test reads like the
frames it exchanges. Every receive has a timeout: a test fails, it never hangs.
"""
from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from websockets.sync.client import ClientConnection, connect

TERMINAL = ("done", "error")


def open_session(url: str, *, token: str | None = None, query_token: bool = False, headers: dict | None = None,
                 ssl_context: ssl.SSLContext | None = None, user: str = "", max_size: int | None = 1 << 24,
                 timeout_s: float = 10.0, ping_interval: float | None = 20.0) -> tuple[ClientConnection, dict]:
    """Connect, send hello, return (connection, welcome frame)."""
    hdrs = dict(headers or {})
    if token and query_token:
        url = f"{url}{'&' if '?' in url else '?'}token={token}"
    elif token:
        hdrs["Authorization"] = f"Bearer {token}"
    ws = connect(url, additional_headers=hdrs, ssl=ssl_context, open_timeout=timeout_s, max_size=max_size,
                 close_timeout=2, ping_interval=ping_interval, legacy=True)  # legacy=True: the connection is returned, not a context manager
    ws.send(json.dumps({"kind": "hello", "protocol_version": 1, "user": user}))
    welcome = recv(ws, timeout_s)
    assert welcome["kind"] == "welcome", welcome
    return ws, welcome


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


def http_get(url: str, *, token: str | None = None, ssl_context: ssl.SSLContext | None = None,
             timeout_s: float = 5.0) -> tuple[int, bytes]:
    """(status, body) — HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=ssl_context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
