"""Start a backend for tests, benchmarks and the demo — the one place that does it:

  * `start_backend` runs `quickcode serve` as a process (real vLLM) and waits for /readyz; `stop_backend`;
  * `InProcessBackend` runs the same uvicorn server in this process, in a thread with its own event loop, over
    any `Engine` (the fake one in tests): real HTTP and WebSockets on a real port the OS picks;
  * `start_vllm_server` runs vLLM's own OpenAI-compatible server (what `engine = "openai"` is put in front
    of).

Both serve quickcode/backend/serve.py's uvicorn settings, with TLS when the settings name a certificate.
"""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

import uvicorn

from quickcode.backend.engine import Engine
from quickcode.backend.settings import Settings

REPO = Path(__file__).resolve().parents[2]   # `python -m quickcode` from this checkout (or install)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a process that must be told its port before it starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Addressed:
    """The URLs of a backend at `host`:`port` (`tls`: wss:// and https://)."""
    host: str
    port: int
    tls: bool

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://{self.host}:{self.port}/v1/ws"

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"


@dataclass
class RunningBackend(_Addressed):
    """A `quickcode serve` process (`proc` None: one somebody else runs, never stopped here)."""
    port: int
    proc: subprocess.Popen | None
    log_path: Path
    tls: bool = False           # started with ssl_certfile/ssl_keyfile: wss:// and https://
    host: str = "127.0.0.1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self, timeout_s: float = 30.0) -> None:
        stop_backend(self, timeout_s)


def backend_at(url: str) -> RunningBackend:
    """ws://host:port/v1/ws (or http(s)://host:port) → a RunningBackend that is not ours to stop."""
    tls = url.startswith(("wss://", "https://"))
    hostport = url.split("://", 1)[1].split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    return RunningBackend(int(port), None, Path(os.devnull), tls=tls, host=host)


def start_backend(log_path: Path, *settings: str, port: int | None = None, env: dict | None = None,
                  timeout_s: float = 600.0, on_wait: Callable[[float], None] | None = None) -> RunningBackend:
    """Start `quickcode serve` and wait for /readyz. `settings` are `--set KEY=VALUE` overrides; `on_wait(s)`
    is called while it starts (progress display). The process has its own group: `stop_backend` ends all of
    it."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "quickcode", "serve", "--port", str(port)]
    for kv in settings:
        cmd += ["--set", kv]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
    backend = RunningBackend(port, proc, log_path, tls=any(kv.startswith("ssl_certfile=") for kv in settings))
    # readiness only: the certificate itself is checked by the TLS tests
    probe_ctx = ssl._create_unverified_context() if backend.tls else None
    t0 = time.monotonic()
    try:                          # whatever else ends the wait (Ctrl-C, a failing on_wait) stops the server
        while time.monotonic() - t0 < timeout_s:
            if proc.poll() is not None:
                raise RuntimeError(f"backend exited with {proc.returncode}:\n{backend.log_tail()}")
            try:
                with urllib.request.urlopen(f"{backend.http_url}/readyz", timeout=2, context=probe_ctx) as r:
                    if r.status == 200:
                        return backend
            except Exception:
                pass
            if _engine_failed(backend.http_url, probe_ctx):   # the engine will never come up: say why at once
                raise RuntimeError(f"the backend's engine failed to start:\n{backend.log_tail()}")
            if on_wait is not None:
                on_wait(time.monotonic() - t0)
            time.sleep(0.5)
        raise RuntimeError(f"backend not ready after {timeout_s} s:\n{backend.log_tail()}")
    except BaseException:
        stop_backend(backend)
        raise


def _engine_failed(http_url: str, ctx) -> bool:
    """/healthz is 503 once the engine failed to start (or died): no point waiting for /readyz."""
    try:
        urllib.request.urlopen(f"{http_url}/healthz", timeout=2, context=ctx).close()
    except urllib.error.HTTPError as e:
        return e.code == 503
    except Exception:
        pass
    return False


def stop_backend(backend: RunningBackend, timeout_s: float = 30.0) -> None:
    """SIGTERM to the process group (the drain), SIGKILL after `timeout_s`."""
    if backend.proc is not None and backend.proc.poll() is None:
        os.killpg(backend.proc.pid, signal.SIGTERM)
        try:
            backend.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(backend.proc.pid, signal.SIGKILL)
            backend.proc.wait(10)


@dataclass
class VllmServer(RunningBackend):
    """vLLM's OpenAI-compatible server process: `base_url` is what `engine_url` takes, `model` its served
    name."""
    model: str = ""

    @property
    def base_url(self) -> str:
        return f"{self.http_url}/v1"


def start_vllm_server(log_path: Path, model: Path, *args: str, served_model_name: str = "remote",
                      max_model_len: int = 512, kv_cache_gib: int = 1, port: int | None = None,
                      timeout_s: float = 600.0) -> VllmServer:
    """Start `python -m vllm.entrypoints.openai.api_server` on `model` (the CLI entry `vllm serve` needs
    package metadata the CPU wheel lacks) and wait until it lists the model. CPU flags: eager, 32-token blocks
    with prefix caching, cached-token counts in usage, priority scheduling; `args` add to them."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--host", "127.0.0.1", "--port", str(port), "--served-model-name", served_model_name,
           "--max-model-len", str(max_model_len), "--enforce-eager", "--block-size", "32",
           "--enable-prefix-caching", "--enable-prompt-tokens-details", "--scheduling-policy", "priority",
           *args]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib)}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env)
    server = VllmServer(port, proc, log_path, model=served_model_name)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM's server exited with {proc.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.base_url}/models", timeout=2) as r:
                if r.status == 200:
                    return server
        except Exception:
            pass
        time.sleep(0.5)
    stop_backend(server)
    raise RuntimeError(f"vLLM's server not ready after {timeout_s} s:\n{server.log_tail()}")


class InProcessBackend(_Addressed):
    """`with InProcessBackend(settings, engine) as b:` — serving at `b.ws_url` / `b.http_url` once the engine
    is ready (or has failed to start, when `wait_ready=False`). `b.call(fn)` runs `fn()` (sync or async) on
    the server's event loop and returns its result: how a test touches the engine or the service without a
    data race."""

    def __init__(self, settings: Settings | None = None, engine: Engine | None = None, *,
                 wait_ready: bool = True, start_timeout_s: float = 60.0, **uvicorn_overrides: Any):
        from quickcode.backend.app import create_app
        from quickcode.backend.serve import uvicorn_config

        self.settings = (settings or Settings()).model_copy(update={"port": 0})
        self.app = create_app(self.settings, engine)
        self.backend = self.app.state.backend
        self.engine = self.backend.engine
        overrides = {"log_level": "warning", **uvicorn_overrides}
        self.server = uvicorn.Server(uvicorn_config(self.app, self.settings, **overrides))
        self.wait_ready, self.start_timeout_s = wait_ready, start_timeout_s
        self.host, self.port = "127.0.0.1", 0
        self.tls = self.settings.ssl_certfile is not None
        self._thread: threading.Thread | None = None

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
