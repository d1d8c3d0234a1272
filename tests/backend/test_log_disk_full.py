"""The disk the server logs to is full: `quickcode serve` (the real server over the fake engine, in a process of
its own: tests/support/fake_serve.py) writes its log and access lines to /dev/full, where every write fails with
ENOSPC. It must keep serving (a completion streams to its end), answer its probes, and still drain and exit 0
at SIGTERM — a write that fails must never take the server down. (`quickcode bench faults` fills a real log
disk under real vLLM replicas while editors type.)"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from quickcode.backend.launch import free_port
from tests.conftest import REPO
from tests.support.waits import until
from tests.support.ws_helpers import complete, http_get, open_session

HANG_S = 60.0


def _ready(url: str, proc: subprocess.Popen) -> bool:
    assert proc.poll() is None, f"the server exited with {proc.returncode} with its log disk full"
    try:
        return http_get(f"{url}/readyz", timeout_s=2)[0] == 200
    except OSError:
        return False


def test_a_full_log_disk_never_stops_the_server():
    port = free_port()
    with open("/dev/full", "w") as full:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.fake_serve", "--port", str(port),
                                 "--set", "log_level=info", "--set", "access_log=true"],
                                cwd=REPO, stdout=full, stderr=full, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        until(lambda: _ready(url, proc), "the server to be ready with its log disk full", hang_s=HANG_S)
        ws, _ = open_session(f"ws://127.0.0.1:{port}/v1/ws")
        with ws:
            for i in range(3):                       # each one an access line that cannot be written
                r = complete(ws, f"full-{i}", max_tokens=5, timeout_s=HANG_S)
                assert r.kind == "done" and r.chunks >= 1, r.terminal
        assert http_get(f"{url}/healthz", timeout_s=5)[0] == 200
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(HANG_S) == 0                # the drain, then the exit's last flush of the logs
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
