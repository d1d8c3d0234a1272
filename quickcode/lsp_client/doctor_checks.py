"""`quickcode doctor`'s vocabulary and pure parts: a check's result (`Check`), an endpoint taken apart
(`Target`), the TLS trust, the HTTP/JSON/certificate readers, the exit status, the printed report and the
command's arguments. The steps that talk to a backend are in doctor.py."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from quickcode.protocol import PROTOCOL_VERSION

DEFAULT_ENDPOINT = "ws://127.0.0.1:8765/v1/ws"
CLOSE_UNAUTHORIZED = 4401          # quickcode/backend/session.py: missing or invalid API token
CLOSE_BAD_HELLO = 4400             # quickcode/backend/session.py: protocol version mismatch
SLOW_FIRST_CHUNK_MS = 1000.0       # above this a suggestion arrives after most people have typed on
CERT_EXPIRY_WARN_DAYS = 14
LATENCY_PROMPT = "def add(a, b):\n    return "

# exit status of the first failed check, by kind
EXIT_CODES = {"endpoint": 2, "reachable": 3, "tls": 4, "ready": 5, "token": 6, "protocol": 7, "model": 8,
              "latency": 9}


@dataclass(frozen=True)
class Check:
    name: str                  # one of EXIT_CODES
    status: str                # "ok", "warn", "fail" or "skip"
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Target:
    """An endpoint taken apart: the WebSocket URL, and the HTTP base of the same server."""
    ws_url: str
    host: str
    port: int
    tls: bool

    @property
    def http_base(self) -> str:
        return urlunsplit(("https" if self.tls else "http", _netloc(self.host, self.port), "", "", ""))


def parse_endpoint(url: str) -> Target:
    """ws://, wss:// (http:// and https:// are read as the same server); the path defaults to /v1/ws."""
    parts = urlsplit(url.strip())
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"{url!r} is not a ws:// or wss:// URL (e.g. {DEFAULT_ENDPOINT})")
    tls = scheme == "wss"
    port = parts.port or (443 if tls else 80)
    path = parts.path if parts.path not in ("", "/") else "/v1/ws"
    ws_url = urlunsplit((scheme, _netloc(parts.hostname, port), path, parts.query, ""))
    return Target(ws_url, parts.hostname, port, tls)


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """The trust the language server uses: the system store (SSL_CERT_FILE / SSL_CERT_DIR apply), plus `ca_file`."""
    ctx = ssl.create_default_context()
    if ca_file:
        ctx.load_verify_locations(cafile=ca_file)
    return ctx


def _http_get(url: str, ctx: ssl.SSLContext | None, timeout_s: float) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=ctx) as r:
            return r.status, _json(r.read())
    except urllib.error.HTTPError as e:
        return e.code, _json(e.read())
    except (urllib.error.URLError, OSError) as e:
        return 0, {"error": str(getattr(e, "reason", e))}


def _json(raw: bytes) -> dict:
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _decode_der(der: bytes | None) -> dict | None:
    """Subject and validity of a DER certificate (via the ssl module's own decoder; no extra package)."""
    if not der:
        return None
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(ssl.DER_cert_to_PEM_cert(der))
    try:
        return ssl._ssl._test_decode_cert(f.name)
    except Exception:
        return None
    finally:
        os.unlink(f.name)


def _describe_cert(cert: dict | None) -> str:
    if not cert:
        return ""
    subject = dict(x[0] for x in cert.get("subject", ()))
    issuer = dict(x[0] for x in cert.get("issuer", ()))
    who = subject.get("commonName", "?")
    by = "self-signed" if subject == issuer else f"issued by {issuer.get('commonName', '?')}"
    return f" (CN={who}, {by}, valid until {cert.get('notAfter', '?')})"


def _days_left(cert: dict | None) -> float | None:
    if not cert or "notAfter" not in cert:
        return None
    end_s = ssl.cert_time_to_seconds(cert["notAfter"])
    return (end_s - datetime.datetime.now(datetime.timezone.utc).timestamp()) / 86400


def exit_code(checks: list[Check]) -> int:
    failed = [c for c in checks if c.status == "fail"]
    return EXIT_CODES[failed[0].name] if failed else 0


MARKS = {"ok": "✓", "warn": "!", "fail": "✗", "skip": "-"}


def format_checks(endpoint: str, checks: list[Check]) -> str:
    lines = [f"quickcode doctor: {endpoint}"]
    for c in checks:
        lines.append(f"  {MARKS[c.status]} {c.name:<9} {c.detail}")
        if c.fix and c.status in ("fail", "warn"):
            lines.append(f"    {'':<9} fix: {c.fix}")
    failed = [c for c in checks if c.status == "fail"]
    lines.append(f"  → {'OK: completions should work' if not failed else f'FAILED at {failed[0].name}'}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", action="append", default=None,
                   help="backend WebSocket URL (repeatable); default $QUICKCODE_ENDPOINTS or " + DEFAULT_ENDPOINT)
    p.add_argument("--token", default=None, help="API token (default $QUICKCODE_TOKEN)")
    p.add_argument("--ca-file", default=None, help="CA certificate (PEM) that signed the backend's certificate")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per network step (default 5)")
    p.add_argument("--samples", type=int, default=3, help="completion requests for the latency check (default 3)")
    p.add_argument("--protocol-version", type=int, default=PROTOCOL_VERSION,
                   help=f"check as a client of this protocol version would (default {PROTOCOL_VERSION}, this release)")
    p.add_argument("--json", action="store_true", help="one JSON object per endpoint instead of text")
