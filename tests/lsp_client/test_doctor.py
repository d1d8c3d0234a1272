"""`quickcode doctor` where no backend is needed: nothing listening, a server that is not quickcode, endpoint
parsing. The checks against a real backend (healthy, wrong token, untrusted certificate, another protocol
version) are in tests/backend/test_auth_limits.py, on its TLS + tokens backend."""
from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from quickcode.lsp_client.doctor import EXIT_CODES, Check, exit_code, format_checks, parse_endpoint

REPO = Path(__file__).resolve().parents[2]


def run_doctor(*args: str) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "quickcode", "doctor", *args], cwd=REPO, capture_output=True,
                       text=True, timeout=60, env={**os.environ, "QUICKCODE_TOKEN": "", "QUICKCODE_ENDPOINTS": ""})
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stdout


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]      # nothing listens once the socket is closed


def test_no_backend_fails_at_reachable_with_the_fix():
    port = closed_port()
    code, out = run_doctor("--endpoint", f"ws://127.0.0.1:{port}/v1/ws")
    assert code == EXIT_CODES["reachable"] == 3
    assert f"nothing listens on 127.0.0.1:{port} (connection refused)" in out
    assert "fix: start the backend (`quickcode serve`" in out
    assert "- token     not checked: reachable failed" in out and out.rstrip().endswith("FAILED at reachable")


def test_an_unknown_host_fails_at_reachable():
    code, out = run_doctor("--endpoint", "wss://quickcode.invalid/v1/ws", "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 3 and "cannot resolve 'quickcode.invalid'" in checks["reachable"]["detail"]


def test_a_server_that_is_not_quickcode_fails_at_ready():
    """Something else listens on the port (here a plain HTTP server that answers 501 to everything)."""
    class NotQuickcode(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(501, "not here")

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotQuickcode)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        code, out = run_doctor("--endpoint", f"ws://127.0.0.1:{srv.server_port}", "--json")
    finally:
        srv.shutdown()
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == EXIT_CODES["ready"], checks
    assert checks["reachable"]["status"] == "ok" and checks["tls"]["status"] == "ok"   # loopback: plain is fine
    assert checks["ready"]["detail"] == "/readyz: HTTP 501" and "quickcode backend?" in checks["ready"]["fix"]


@pytest.mark.parametrize("url, ws_url, http_base", [
    ("ws://127.0.0.1:8765/v1/ws", "ws://127.0.0.1:8765/v1/ws", "http://127.0.0.1:8765"),
    ("wss://qc.example.com", "wss://qc.example.com:443/v1/ws", "https://qc.example.com:443"),
    ("https://qc.example.com:8443/", "wss://qc.example.com:8443/v1/ws", "https://qc.example.com:8443"),
    ("ws://[::1]:9000/v1/ws?token=x", "ws://[::1]:9000/v1/ws?token=x", "http://[::1]:9000"),
])
def test_endpoints_are_read_as_the_language_server_reads_them(url, ws_url, http_base):
    t = parse_endpoint(url)
    assert (t.ws_url, t.http_base) == (ws_url, http_base)


def test_a_bad_endpoint_is_its_own_failure():
    code, out = run_doctor("--endpoint", "localhost:8765")
    assert code == EXIT_CODES["endpoint"] and "is not a ws:// or wss:// URL" in out


def test_exit_status_is_the_first_failure_and_warnings_pass():
    checks = [Check("reachable", "ok", "x"), Check("tls", "warn", "plain", "use wss"),
              Check("token", "fail", "rejected", "new token"), Check("protocol", "fail", "other")]
    assert exit_code(checks) == EXIT_CODES["token"]
    assert exit_code(checks[:2]) == 0
    text = format_checks("ws://h/v1/ws", checks)
    assert "fix: use wss" in text and "fix: new token" in text and text.endswith("FAILED at token")
