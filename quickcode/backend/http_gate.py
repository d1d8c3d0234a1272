"""The gate every HTTP request passes before any route sees it (pure ASGI middleware, so that every endpoint —
OpenAI, Ollama, /infill, /metrics, /debug — inherits it without a line of its own):

1. the API token is checked from the headers alone, before one byte of the body is read (401);
2. a declared `Content-Length` over `max_body_bytes` is refused before reading (413), and a body that streams
   past it (chunked) is cut off at the limit (413): nobody can make the server buffer or parse more;
3. each refusal closes the connection (`Connection: close`), so the rest of a huge upload is not even read;
4. a request from a web page (an `Origin` header not in `allowed_origins`) is refused (403): any site the
   developer visits can send requests to 127.0.0.1, and an open loopback server has no token to stop it.

Only the probes (/healthz, /readyz) are open. WebSockets are checked by their endpoint (close 4401).
"""
from __future__ import annotations

import orjson
from starlette.datastructures import Headers, QueryParams

OPEN_PATHS = frozenset({"/healthz", "/readyz"})


LLAMA_CPP_PATHS = frozenset({"/infill", "/completion", "/tokenize", "/detokenize"})


def error_body(message: str, code: str, kind: str, path: str = "", status: int = 400) -> bytes:
    """Each API's own error shape: Ollama's (`/api/*`: a string), llama.cpp's (numeric code), else
    OpenAI's."""
    if path.startswith("/api/"):
        return orjson.dumps({"error": message})
    if path in LLAMA_CPP_PATHS:
        return orjson.dumps({"error": {"code": status, "message": message, "type": kind}})
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


async def refuse(send, status: int, body: bytes, extra_headers: tuple = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *extra_headers]})
    await send({"type": "http.response.body", "body": body})


def origin_allowed(headers, allowed_origins) -> bool:
    """No Origin (an editor, a CLI, a server-side client) or a listed one. Browsers always send it."""
    origin = headers.get("origin")
    return origin is None or origin in allowed_origins


class HttpGate:
    def __init__(self, app, *, allowed, max_body_bytes: int, open_paths=OPEN_PATHS, allowed_origins=()):
        """`allowed(path, headers, query_params) -> bool`: may this request reach `path` (a valid token, the
        scrape-only token for /metrics, or an open server)."""
        self.app = app
        self.allowed = allowed
        self.max_body_bytes = max_body_bytes
        self.open_paths = open_paths
        self.allowed_origins = frozenset(allowed_origins)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        path = scope["path"]
        if not origin_allowed(headers, self.allowed_origins):
            return await refuse(send, 403, error_body(
                "requests from web pages are refused (Origin not in allowed_origins)", "unauthorized",
                "permission_error", path, 403))
        if path not in self.open_paths and not self.allowed(
                path, headers, QueryParams(scope.get("query_string", b""))):
            return await refuse(send, 401, error_body("missing or invalid API token", "unauthorized",
                                                      "authentication_error", path, 401),
                                ((b"www-authenticate", b"Bearer"),))
        limit = self.max_body_bytes
        too_large = error_body(f"the request body is over {limit} bytes", "body_too_large",
                               "invalid_request_error", path, 413)
        try:
            declared = int(headers.get("content-length", "0") or 0)
        except ValueError:
            return await refuse(send, 400, error_body("bad Content-Length", "bad_value",
                                                      "invalid_request_error", path, 400))
        if declared > limit:
            return await refuse(send, 413, too_large)

        seen = 0
        started = refused = False

        async def limited_receive():
            # past the limit: answer 413 at once and tell the app the client left (a route that was reading
            # the body stops; FastAPI would turn an exception raised here into a 400)
            nonlocal seen, started, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    if not started:
                        started = True
                        await refuse(send, 413, too_large)
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message):
            nonlocal started
            if refused:
                return                     # the 413 is the answer; whatever the app says after it is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, tracking_send)
