"""The HTTP gate in front of every route: the token from the headers before any body byte, a bounded body."""
from __future__ import annotations

import asyncio

import orjson

from quickcode.backend.http_gate import HttpGate

LIMIT = 1000


def run(path: str, headers: dict, chunks: list[bytes]):
    """Drive the gate around an app that reads the whole body; return (status, body, body bytes received)."""
    received = [0]
    reads = [0]

    async def app(scope, receive, send):
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"read %d" % len(body)})

    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive():
        reads[0] += 1
        m = messages.pop(0)
        received[0] += len(m["body"])
        return m

    out = []

    async def send(m):
        out.append(m)

    gate = HttpGate(app, allowed=lambda p, h, q: h.get("authorization") == "Bearer good" or q.get("token") == "good",
                    max_body_bytes=LIMIT)
    scope = {"type": "http", "path": path, "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(gate(scope, receive, send))
    start = out[0]
    assert (b"connection", b"close") in start["headers"] or start["status"] == 200
    return start["status"], b"".join(m.get("body", b"") for m in out[1:]), received[0], reads[0]


def test_no_token_is_401_before_any_body_byte_is_read():
    status, body, received, reads = run("/v1/completions", {"content-length": "100000000"}, [b"x" * 500] * 3)
    assert status == 401 and reads == 0 and received == 0
    assert orjson.loads(body)["error"]["code"] == "unauthorized"
    assert run("/anything/new", {}, [b""])[0] == 401             # routes added later are covered too
    assert run("/healthz", {}, [b""])[0] == 200                  # the probes stay open


def test_a_declared_or_streamed_body_over_the_limit_is_413():
    ok = {"authorization": "Bearer good"}
    status, body, received, reads = run("/v1/completions", {**ok, "content-length": str(LIMIT + 1)}, [b"x"] * 2)
    assert status == 413 and reads == 0 and orjson.loads(body)["error"]["code"] == "body_too_large"
    status, _, received, _ = run("/v1/completions", ok, [b"x" * 400] * 10)       # chunked: no content-length
    assert status == 413 and received <= LIMIT + 400
    status, body, _, _ = run("/v1/completions", ok, [b"x" * 500, b"x" * 500])  # at the limit: served
    assert status == 200 and body == b"read 1000"
    assert run("/v1/completions", {**ok, "content-length": "nope"}, [b""])[0] == 400
