"""Shared fixtures. One real backend (`quickcode serve`, real vLLM on the committed tiny models) per test
session, started on first use by any test marked `engine`; editor and LSP tests reuse it. `fake_backend` starts
in-process backends (real uvicorn, real sockets) over a `FakeEngine`, for tests of our own code."""
from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningBackend:
    port: int
    proc: subprocess.Popen
    log_path: Path
    tls: bool = False           # started with ssl_certfile/ssl_keyfile: wss:// and https://

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://127.0.0.1:{self.port}/v1/ws"

    @property
    def http_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


def start_backend(log_path: Path, *settings: str, port: int | None = None, env: dict | None = None,
                  timeout_s: float = 400.0) -> RunningBackend:
    """Start `quickcode serve` and wait for /readyz. `settings` are `--set KEY=VALUE` overrides."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "quickcode", "serve", "--port", str(port)]
    for kv in settings:
        cmd += ["--set", kv]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})
    backend = RunningBackend(port, proc, log_path, tls=any(kv.startswith("ssl_certfile=") for kv in settings))
    # readiness only: the certificate itself is checked by the TLS tests
    probe_ctx = ssl._create_unverified_context() if backend.tls else None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"backend exited with {proc.returncode}:\n{backend.log_tail()}")
        try:
            with urllib.request.urlopen(f"{backend.http_url}/readyz", timeout=2, context=probe_ctx) as r:
                if r.status == 200:
                    return backend
        except Exception:
            pass
        if _engine_failed(backend.http_url, probe_ctx):   # the engine will never come up: say why at once
            stop_backend(backend)
            raise RuntimeError(f"the backend's engine failed to start:\n{backend.log_tail()}")
        time.sleep(0.5)
    stop_backend(backend)
    raise RuntimeError(f"backend not ready after {timeout_s} s:\n{backend.log_tail()}")


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
    if backend.proc.poll() is None:
        os.killpg(backend.proc.pid, signal.SIGTERM)
        try:
            backend.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(backend.proc.pid, signal.SIGKILL)
            backend.proc.wait(10)


@pytest.fixture(scope="session")
def backend() -> RunningBackend:
    """The session's one real backend (vLLM engine with the draft model, prefix caching).

    QUICKCODE_TEST_BACKEND_PORT=<port> reuses a `quickcode serve` you already run (development only)."""
    port = os.environ.get("QUICKCODE_TEST_BACKEND_PORT")
    if port:
        yield RunningBackend(int(port), None, Path(os.devnull))
        return
    b = start_backend(ARTIFACTS / "logs" / "backend-session.log")
    yield b
    stop_backend(b)


@pytest.fixture
def fake_backend():
    """`fake_backend(engine=None, *, wait_ready=True, **settings)` → a started `InProcessBackend` over a
    `FakeEngine` (the given one, or a default one on these settings); all are stopped after the test."""
    from backend.fake_engine import FakeEngine
    from backend.launch import InProcessBackend
    from backend.settings import Settings

    started = []

    def make(engine=None, *, wait_ready: bool = True, **overrides):
        settings = Settings(**{"spec_method": "off", "shutdown_drain_s": 0.5, "replica_id": "fake", **overrides})
        b = InProcessBackend(settings, engine or FakeEngine(settings), wait_ready=wait_ready)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()
