"""Auth and limits on a real backend: hashed per-user tokens, the 4401 close, token-protected HTTP endpoints,
session-scoped request ids, the per-user rate limit and the frame/prompt/max_tokens limits — all over TLS
(wss:// and https:// with a self-signed certificate), which is how an operator runs it.

One extra backend (auth on, TLS, small limits) serves the whole module: the real server (uvicorn, TLS, WebSockets)
in this process over the fake engine — auth and limits are our code, not vLLM's.
"""
from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import ssl
import stat
import subprocess
import sys
import time

import httpx
import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus

from quickcode.backend.auth import issue
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.launch import InProcessBackend
from quickcode.backend.settings import Settings
from tests.conftest import REPO
from tests.support.ws_helpers import assert_nothing_queued, complete, http_get, open_session, read_until_terminal, recv


USERS = ("alice", "bob", "flood", "limits", "openai", "doctor")
RATE_PER_S, BURST = 2.0, 4
MAX_FRAME_BYTES, MAX_PROMPT_CHARS, MAX_TOKENS = 65_536, 4_000, 64


def make_self_signed(cert_path, key_path) -> None:
    """A self-signed certificate for localhost / 127.0.0.1 (what an operator makes with openssl req -x509)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))


def issue_token(tokens_file, user: str) -> str:
    """`quickcode token issue`: the token goes to stdout (shown once), only its hash to the file."""
    out = subprocess.run([sys.executable, "-m", "quickcode", "token", "issue", "--user", user, "--file", str(tokens_file)],
                         cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


class Secure:
    def __init__(self, backend: InProcessBackend, tokens: dict[str, str], ctx: ssl.SSLContext, cert_path, tokens_file):
        self.backend, self.tokens, self.ctx, self.cert_path, self.tokens_file = backend, tokens, ctx, cert_path, tokens_file

    def session(self, user: str, **kw):
        return open_session(self.backend.ws_url, token=self.tokens[user], ssl_context=self.ctx, **kw)


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> Secure:
    d = tmp_path_factory.mktemp("secure")
    cert, key, tokens_file = d / "cert.pem", d / "key.pem", d / "tokens"
    make_self_signed(cert, key)
    # the first through the command (the file it creates, the token on stdout), the rest by the function it
    # calls: the same file, without a process start each
    tokens = {USERS[0]: issue_token(tokens_file, USERS[0])} | {u: issue(tokens_file, u) for u in USERS[1:]}
    s = Settings(spec_method="off", auth_tokens_file=tokens_file, ssl_certfile=cert, ssl_keyfile=key,
                 replica_id="secure", rate_limit_per_s=RATE_PER_S, rate_limit_burst=BURST,
                 max_frame_bytes=MAX_FRAME_BYTES, max_prompt_chars=MAX_PROMPT_CHARS, max_tokens_limit=MAX_TOKENS,
                 shutdown_drain_s=0.5)
    b = InProcessBackend(s, FakeEngine(s)).start()
    assert b.tls and b.ws_url.startswith("wss://")
    ctx = ssl.create_default_context(cafile=str(cert))
    yield Secure(b, tokens, ctx, cert, tokens_file)
    b.stop()


def expect_close(fn) -> ConnectionClosed:
    with pytest.raises(ConnectionClosed) as ei:
        ws, _ = fn()
        ws.recv(timeout=5)
    return ei.value


# ── tokens

def test_token_issue_stores_only_the_hash(secure: Secure, tmp_path):
    lines = secure.tokens_file.read_text().splitlines()
    assert [line.split(":")[0] for line in lines] == list(USERS)
    for line, user in zip(lines, USERS):
        token = secure.tokens[user]
        assert token.startswith("qc_") and len(token) > 40
        assert token not in secure.tokens_file.read_text()
        assert line == f"{user}:{hashlib.sha256(token.encode()).hexdigest()}"
    assert stat.S_IMODE(os.stat(secure.tokens_file).st_mode) == 0o600
    # revoke on a copy (the running backend keeps the original)
    copy = tmp_path / "tokens"
    copy.write_text(secure.tokens_file.read_text())
    r = subprocess.run([sys.executable, "-m", "quickcode", "token", "revoke", "--user", "bob", "--file", str(copy)],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "revoked 1" in r.stderr
    assert "bob:" not in copy.read_text() and "alice:" in copy.read_text()


# ── the WebSocket handshake

def test_valid_token_in_bearer_header_or_query_opens_a_session_over_wss(secure: Secure):
    ws, welcome = secure.session("alice")
    with ws:
        assert welcome["replica"] == "secure" and welcome["max_frame_bytes"] == MAX_FRAME_BYTES
        assert welcome["max_prompt_chars"] == MAX_PROMPT_CHARS and welcome["max_tokens"] == MAX_TOKENS
        r = complete(ws, "q1", max_tokens=4)
        assert r.kind == "done" and r.finish_reason in ("length", "stop")
    ws, _ = open_session(secure.backend.ws_url, token=secure.tokens["alice"], query_token=True, ssl_context=secure.ctx)
    ws.close()


@pytest.mark.parametrize("token", [None, "", "qc_not-a-real-token", "Bearer"])
def test_missing_or_invalid_token_is_closed_4401_with_a_reason(secure: Secure, token):
    closed = expect_close(lambda: open_session(secure.backend.ws_url, token=token, ssl_context=secure.ctx))
    assert closed.rcvd is not None and closed.rcvd.code == 4401
    assert "unauthorized" in closed.rcvd.reason and "token" in closed.rcvd.reason
    closed = expect_close(lambda: open_session(secure.backend.ws_url, token=token or "x", query_token=True,
                                               ssl_context=secure.ctx))
    assert closed.rcvd.code == 4401


def test_tls_is_required_and_verified(secure: Secure):
    plain = secure.backend.ws_url.replace("wss://", "ws://")
    with pytest.raises((InvalidMessage, InvalidStatus, ConnectionError, OSError, EOFError)):
        open_session(plain, token=secure.tokens["alice"], timeout_s=5)
    untrusting = ssl.create_default_context()  # the system CAs: the self-signed certificate is not among them
    with pytest.raises(ssl.SSLCertVerificationError):
        open_session(secure.backend.ws_url, token=secure.tokens["alice"], ssl_context=untrusting, timeout_s=5)


# ── HTTP endpoints

def test_http_endpoints_need_the_token(secure: Secure):
    url, ctx, tok = secure.backend.http_url, secure.ctx, secure.tokens["alice"]
    assert http_get(f"{url}/healthz", ssl_context=ctx)[0] == 200      # probes stay open
    assert http_get(f"{url}/readyz", ssl_context=ctx)[0] == 200
    assert http_get(f"{url}/metrics", ssl_context=ctx)[0] == 401
    assert http_get(f"{url}/metrics", token="qc_wrong", ssl_context=ctx)[0] == 401
    status, body = http_get(f"{url}/metrics", token=tok, ssl_context=ctx)
    assert status == 200 and b"quickcode_requests_total" in body
    with httpx.Client(verify=ctx, timeout=30) as http:
        body = {"prompt": "def f():\n    ", "max_tokens": 2}
        r = http.post(f"{url}/v1/completions", json=body)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized" and r.json()["error"]["type"] == "authentication_error"
        r = http.post(f"{url}/v1/completions", json=body, headers={"Authorization": "Bearer qc_wrong"})
        assert r.status_code == 401
        r = http.post(f"{url}/v1/completions", json={"prompt": 5, "n": 3})   # a bad body: still 401 first
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = http.post(f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {secure.tokens['openai']}"})
        assert r.status_code == 200 and r.json()["object"] == "text_completion"


def test_openai_client_without_a_token_gets_401(secure: Secure):
    url = f"{secure.backend.http_url}/v1"
    with httpx.Client(verify=secure.ctx) as http:
        client = openai.OpenAI(base_url=url, api_key="qc_wrong-token", http_client=http, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as ei:
            client.completions.create(model="quickcode-embedded", prompt="def f():", max_tokens=2)
        assert ei.value.status_code == 401 and ei.value.code == "unauthorized"
        client = openai.OpenAI(base_url=url, api_key=secure.tokens["openai"], http_client=http, max_retries=0)
        out = client.completions.create(model="quickcode-embedded", prompt="def f():", suffix="\n", max_tokens=2)
        assert out.choices[0].finish_reason in ("length", "stop")


# ── request ids are scoped to their session

def test_request_ids_are_scoped_to_the_session(secure: Secure):
    a, _ = secure.session("alice")
    b, _ = secure.session("bob")
    a2, _ = secure.session("alice")   # a second editor of the same user
    with a, b, a2:
        t0 = time.perf_counter()
        a.send(json.dumps({"kind": "complete", "id": "same", "prefix": "import os\n", "max_tokens": MAX_TOKENS}))
        first = recv(a, 30)
        assert first["kind"] in ("chunk", "done") and first["id"] == "same"
        b.send(json.dumps({"kind": "cancel", "id": "same"}))       # another user's session: no effect
        a2.send(json.dumps({"kind": "cancel", "id": "same"}))      # another session of the same user: no effect
        rb = complete(b, "same", "class A:\n    ", max_tokens=3)   # the same id is free in b's session
        assert rb.kind == "done" and rb.finish_reason in ("length", "stop")
        ra = read_until_terminal(a, "same", t0) if first["kind"] == "chunk" else None
        terminal = ra.terminal if ra else first
        assert terminal["kind"] == "done" and terminal["finish_reason"] in ("length", "stop"), terminal
        # nobody saw a frame of somebody else's request: no frame is left on any connection
        for ws in (a, b, a2):
            assert_nothing_queued(ws)
        # a duplicate id is refused only within one session
        a.send(json.dumps({"kind": "complete", "id": "dup", "prefix": "x = ", "max_tokens": MAX_TOKENS}))
        a.send(json.dumps({"kind": "complete", "id": "dup", "prefix": "y = ", "max_tokens": 2}))
        frames = [recv(a, 30)]
        while not any(f["kind"] == "error" for f in frames) or not any(f["kind"] == "done" for f in frames):
            frames.append(recv(a, 30))
        err = next(f for f in frames if f["kind"] == "error")
        assert err == {"kind": "error", "code": "duplicate_id", "message": err["message"], "id": "dup"}


# ── rate limit and limits

def test_per_user_rate_limit_is_a_typed_error_and_the_session_goes_on(secure: Secure):
    """The user's bucket runs on a clock the test holds: exactly BURST requests pass, the rest are refused, and
    one request's worth of time later one more passes (the bucket's arithmetic, not a race with the clock)."""
    limits = secure.backend.backend.service.limits
    now_s = [time.monotonic()]
    secure.backend.call(lambda: setattr(limits, "clock", lambda: now_s[0]))
    ws, _ = secure.session("flood")
    try:
        n = 3 * BURST
        for i in range(n):
            ws.send(json.dumps({"kind": "complete", "id": f"r{i}", "prefix": "def g():\n", "max_tokens": 1}))
        terminals: dict[str, dict] = {}
        while len(terminals) < n:
            m = recv(ws, 30)
            if m["kind"] in ("done", "error"):
                terminals[m["id"]] = m
        limited = [rid for rid, m in terminals.items() if m["kind"] == "error"]
        assert all(terminals[rid]["code"] == "rate_limited" and "requests/s" in terminals[rid]["message"]
                   for rid in limited)
        assert sorted(limited) == sorted(f"r{i}" for i in range(BURST, n)), terminals   # a burst of BURST
        # the OpenAI endpoint shares the user's bucket: 429 with OpenAI's error shape
        with httpx.Client(verify=secure.ctx) as http:
            client = openai.OpenAI(base_url=f"{secure.backend.http_url}/v1", api_key=secure.tokens["flood"],
                                   http_client=http, max_retries=0)
            with pytest.raises(openai.RateLimitError) as ei:
                client.completions.create(model="m", prompt="x", max_tokens=1)
            assert ei.value.status_code == 429 and ei.value.code == "rate_limited"
        r = complete(ws, "still-empty", max_tokens=2)
        assert r.code == "rate_limited", r.terminal
        now_s[0] += 1 / RATE_PER_S                             # one request's worth refills
        r = complete(ws, "after", max_tokens=2)
        assert r.kind == "done", r.terminal
    finally:
        ws.close()
        secure.backend.call(lambda: setattr(limits, "clock", time.monotonic))


def test_frame_prompt_and_max_tokens_limits_are_typed_errors(secure: Secure):
    ws, _ = secure.session("limits")
    with ws:
        big = json.dumps({"kind": "complete", "id": "big", "prefix": "x" * MAX_FRAME_BYTES})
        ws.send(big)
        m = recv(ws)
        assert m["kind"] == "error" and m["code"] == "frame_too_large" and str(MAX_FRAME_BYTES) in m["message"]
        r = complete(ws, "long", "y" * (MAX_PROMPT_CHARS - 9), suffix="z" * 10)
        assert r.kind == "error" and r.code == "prompt_too_long" and r.terminal["id"] == "long"
        r = complete(ws, "snip", "a", snippets=[{"path": "b.py", "text": "b" * MAX_PROMPT_CHARS}])
        assert r.kind == "error" and r.code == "prompt_too_long"
        # a file-token template (Qwen2.5-Coder's, StarCoder2's) encodes the path too: bounded, as on Linux
        r = complete(ws, "path", "a", path="d/" * 2100 + "x.py")
        assert r.kind == "error" and r.code == "bad_value" and "path" in r.terminal["message"]
        for bad in (MAX_TOKENS + 1, 0, -5, 10**9):
            r = complete(ws, f"mt{bad}", max_tokens=bad)
            assert r.kind == "error" and r.code == "max_tokens_too_large" and r.terminal["id"] == f"mt{bad}"
        r = complete(ws, "ok", "z" * (MAX_PROMPT_CHARS - 100), max_tokens=MAX_TOKENS)  # at the limits: served
        assert r.kind == "done" and r.finish_reason in ("length", "stop"), r.terminal
        r = complete(ws, "ok2", max_tokens=2)
        assert r.kind == "done"
    with httpx.Client(verify=secure.ctx, headers={"Authorization": f"Bearer {secure.tokens['limits']}"}) as http:
        url = f"{secure.backend.http_url}/v1/completions"
        # an HTTP plugin's prompt past the limit is cut as the token budget would cut it (the WebSocket's own
        # client cuts to the welcome's figure and is refused past it, above)
        r = http.post(url, json={"prompt": "p" * (MAX_PROMPT_CHARS + 1), "max_tokens": 2})
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] > 0
        r = http.post(url, json={"prompt": "p", "max_tokens": MAX_TOKENS + 1})
        assert r.status_code == 400 and r.json()["error"]["code"] == "max_tokens_too_large"


def test_a_frame_beyond_the_transport_limit_closes_with_1009(secure: Secure):
    """Frames up to 4x max_frame_bytes (at least 4 MiB) get the typed error; past that the WebSocket layer
    refuses to buffer the message at all and closes with 1009 (message too big)."""
    ws, _ = secure.session("limits")
    with pytest.raises(ConnectionClosed) as ei:
        ws.send("x" * (5 << 20))
        ws.recv(timeout=10)
    assert ei.value.rcvd is not None and ei.value.rcvd.code == 1009


# ── quickcode doctor: says which step fails, with the fix (and the exit status of that step)

def doctor(secure: Secure, *args: str) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "quickcode", "doctor", "--endpoint", secure.backend.ws_url, "--json",
                        "--timeout", "10", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "QUICKCODE_TOKEN": "", "QUICKCODE_ENDPOINTS": ""})
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["exit"] == r.returncode, r.stdout + r.stderr
    return r.returncode, {c["name"]: c for c in report["checks"]}


def test_doctor_passes_every_check_on_a_healthy_backend(secure: Secure):
    code, checks = doctor(secure, "--token", secure.tokens["doctor"], "--ca-file", str(secure.cert_path))
    assert code == 0, checks      # a warning passes
    assert [c["status"] for n, c in checks.items() if n != "tls"] == ["ok"] * 6, checks
    tls = checks["tls"]             # the test certificate is valid for one day: verified, and due for renewal
    assert tls["status"] == "warn" and "certificate verified" in tls["detail"] and "CN=localhost" in tls["detail"]
    assert "expires in 1 days" in tls["detail"] and tls["fix"] == "renew the certificate"
    assert "quickcode-embedded" in checks["model"]["detail"] and "replica secure" in checks["protocol"]["detail"]
    # the profile the backend serves, and why (the tests' backends serve the light one by name)
    assert "profile light (profile = 'light' was set)" in checks["ready"]["detail"], checks["ready"]
    assert "p50" in checks["latency"]["detail"] and "over 3 requests" in checks["latency"]["detail"]


@pytest.mark.parametrize("token, why", [("qc_revoked-or-mistyped", "rejected"), ("", "none was given")])
def test_doctor_names_a_wrong_or_missing_token(secure: Secure, token, why):
    code, checks = doctor(secure, "--token", token, "--ca-file", str(secure.cert_path))
    assert code == 6, checks
    assert checks["token"]["status"] == "fail" and why in checks["token"]["detail"]
    assert "4401" in checks["token"]["detail"] and "QUICKCODE_TOKEN" in checks["token"]["fix"]
    assert checks["ready"]["status"] == "ok" and checks["latency"]["status"] == "skip"


def test_doctor_names_an_untrusted_certificate(secure: Secure):
    code, checks = doctor(secure, "--token", secure.tokens["doctor"])   # the system CAs only
    assert code == 4, checks
    assert "not trusted" in checks["tls"]["detail"] and "self-signed" in checks["tls"]["detail"]
    assert "--ca-file" in checks["tls"]["fix"]


def test_doctor_names_an_incompatible_protocol_version(secure: Secure):
    """A client of another protocol version (as an older or newer language server would be) meets this server."""
    code, checks = doctor(secure, "--token", secure.tokens["doctor"], "--ca-file", str(secure.cert_path),
                          "--protocol-version", "2")
    assert code == 7, checks
    assert checks["token"]["status"] == "ok" and checks["protocol"]["status"] == "fail"
    assert "server speaks protocol 1, client 2" in checks["protocol"]["detail"]
    assert "upgrade the older side" in checks["protocol"]["fix"]
