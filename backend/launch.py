"""Start a backend for tests, benchmarks and the demo: in this process (`InProcessBackend`: a real uvicorn server
on a real port, in a thread with its own event loop, over any `Engine` — the fake one in tests).

The server is the one `quickcode serve` runs (backend/serve.py's uvicorn settings): real HTTP, real WebSockets,
TLS when the settings name a certificate. Port 0 (the default here) lets the OS pick a free port.
"""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any, Awaitable, Callable

import uvicorn

from backend.engine import Engine
from backend.settings import Settings


class InProcessBackend:
    """`with InProcessBackend(settings, engine) as b:` — serving at `b.ws_url` / `b.http_url` once the engine is ready
    (or has failed to start, when `wait_ready=False`). `b.call(fn)` runs `fn()` (sync or async) on the server's
    event loop and returns its result: how a test touches the engine or the service without a data race."""

    def __init__(self, settings: Settings | None = None, engine: Engine | None = None, *, wait_ready: bool = True,
                 start_timeout_s: float = 60.0, **uvicorn_overrides: Any):
        from backend.app import create_app
        from backend.serve import uvicorn_config

        self.settings = (settings or Settings()).model_copy(update={"port": 0})
        self.app = create_app(self.settings, engine)
        self.backend = self.app.state.backend
        self.engine = self.backend.engine
        overrides = {"log_level": "warning", **uvicorn_overrides}
        self.server = uvicorn.Server(uvicorn_config(self.app, self.settings, **overrides))
        self.wait_ready, self.start_timeout_s = wait_ready, start_timeout_s
        self.port = 0
        self.tls = self.settings.ssl_certfile is not None
        self._thread: threading.Thread | None = None

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://127.0.0.1:{self.port}/v1/ws"

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> InProcessBackend:
        self._thread = threading.Thread(target=self.server.run, name="in-process-backend", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the in-process backend exited during start-up (see the log above)")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the in-process backend did not start in {self.start_timeout_s} s")
            time.sleep(0.005)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        while self.wait_ready and not self.engine.ready:
            if self.engine.dead or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the engine did not become ready: {self.engine.error}")
            time.sleep(0.005)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)

    def call(self, fn: Callable[[], Any | Awaitable[Any]], timeout_s: float = 10.0) -> Any:
        async def run():
            out = fn()
            return await out if asyncio.iscoroutine(out) else out

        fut: Future = asyncio.run_coroutine_threadsafe(run(), self.backend.loop)
        return fut.result(timeout_s)

    def __enter__(self) -> InProcessBackend:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
