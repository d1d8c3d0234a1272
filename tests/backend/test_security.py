"""A hostile client against a real server (uvicorn, real WebSockets and HTTP; the `FakeEngine` where vLLM's own
behaviour is not the point): what it sends must not grow the server's metrics or memory, an open port is the
operator's decision, every per-user bound holds, and each request carries its tenant's prefix-cache salt.

The cross-user prefix-cache test on the real engine is in tests/backend/test_auth_limits.py; the threat table that
names each of these tests is docs/security.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import string
import subprocess
import sys
import threading
import time
import urllib.request

import httpx
import psutil
import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close, Opcode
from websockets.protocol import State
from websockets.sync.client import connect
from websockets.uri import parse_uri

from quickcode.protocol.languages import KNOWN_LANGUAGE_IDS
from tests.conftest import REPO, fake_server
from tests.support.waits import until
from tests.support.ws_helpers import complete, open_session, recv

ALICE, BOB, CAROL = "qc_alice-token", "qc_bob-token", "qc_carol-token"


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


TOKENS = f"alice:{sha(ALICE)}:blue,bob:{sha(BOB)}:blue,carol:{sha(CAROL)}"


def metric_series(http_url: str, token: str | None = None) -> dict[str, float]:
    req = urllib.request.Request(f"{http_url}/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def rss_bytes() -> int:
    """The server runs in this process (InProcessBackend): its memory is ours."""
    return psutil.Process().memory_info().rss


def drained(ws, tag: str) -> None:
    """Frames are handled in order: once an unknown kind sent last is answered, everything before it was."""
    ws.send(json.dumps({"kind": tag}))
    while True:
        m = recv(ws, 60)
        if m["kind"] == "error" and repr(tag) in m["message"]:
            return


# ── telemetry

def test_telemetry_flood_with_random_languages_keeps_metrics_bounded_and_memory_flat(fake_backend):
    b = fake_backend()
    rng = random.Random(16)
    known = ["python", "rust", "go", "typescript", "c"]

    def frame(i: int) -> str:
        lang = rng.choice(known) if i % 10 == 0 else "".join(rng.choices(string.ascii_letters + "-_.é", k=rng.randint(1, 40)))
        return json.dumps({"kind": "telemetry", "event": rng.choice(["shown", "accepted", "partial", "dismissed"]),
                           "id": f"t{i}", "language": lang, "shown_chars": rng.randint(-10**9, 10**12),
                           "accepted_chars": rng.randint(-10**9, 10**12)})

    ws, _ = open_session(b.ws_url, ping_interval=None)
    with ws:
        for i in range(1000):           # warm-up: whatever a first telemetry frame allocates once
            ws.send(frame(i))
        drained(ws, "sentinel-warm")
        series0, rss0 = metric_series(b.http_url), rss_bytes()
        t0 = time.perf_counter()
        for i in range(10_000):
            ws.send(frame(i))
        drained(ws, "sentinel-flood")
        sent_s = time.perf_counter() - t0
        series1, rss1 = metric_series(b.http_url), rss_bytes()
    new = sorted(set(series1) - set(series0))
    langs = {k.split('language="')[1].split('"')[0] for k in series1 if k.startswith("quickcode_completion_events_total{")}
    print(f"\n10,000 telemetry frames in {sent_s:.1f} s: {len(series0)} → {len(series1)} series, "
          f"RSS {rss0 >> 20} → {rss1 >> 20} MiB; languages {sorted(langs)}")
    assert len(series1) - len(series0) <= 50, new
    assert langs <= KNOWN_LANGUAGE_IDS | {"other", "unknown"}    # random strings that happen to be ids count
    # the counts are clamped to one completion's size, and most of the flood was dropped by the rate limit
    assert series1["quickcode_shown_chars_total"] - series0["quickcode_shown_chars_total"] <= 16_384 * 11_000
    assert series1["quickcode_telemetry_dropped_total"] - series0.get("quickcode_telemetry_dropped_total", 0) > 5_000
    assert rss1 - rss0 < 8 << 20, (rss0, rss1)


# ── the prefix cache is per tenant: every request reaches the engine with its tenant's salt

@pytest.mark.parametrize("isolation", ["auto", "user", "team", "shared"])
def test_each_request_carries_its_tenants_cache_salt(fake_backend, isolation):
    b = fake_backend(auth_tokens=TOKENS, cache_isolation=isolation)
    salts = {}
    for name, token in (("alice", ALICE), ("bob", BOB), ("carol", CAROL)):
        ws, _ = open_session(b.ws_url, token=token)
        with ws:
            assert complete(ws, f"{name}-ws", max_tokens=2).kind == "done"
        r = httpx.post(f"{b.http_url}/v1/completions", json={"prompt": "x = ", "max_tokens": 2},
                       headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 200, r.text
        ws_salt = b.engine.by_client_id(f"{name}-ws")[0].cache_salt
        http_salt = next(q.cache_salt for key, q in b.engine.requests.items() if key.startswith("http-")
                         and q.cache_salt == ws_salt) if ws_salt else None
        assert http_salt == ws_salt      # the OpenAI endpoint (and any HTTP route) is salted alike
        salts[name] = ws_salt
    if isolation == "shared":
        assert set(salts.values()) == {None}
    elif isolation == "team":             # alice and bob are team blue; carol has no team: alone
        assert salts["alice"] == salts["bob"] != salts["carol"] and None not in salts.values()
    else:                                 # auto with tokens = user
        assert len(set(salts.values())) == 3 and None not in salts.values()


def test_an_open_loopback_server_shares_and_an_allowed_open_one_isolates_sessions(fake_backend):
    shared = fake_backend()
    ws, _ = open_session(shared.ws_url)
    with ws:
        complete(ws, "s1", max_tokens=1)
    assert shared.engine.by_client_id("s1")[0].cache_salt is None
    isolated = fake_backend(host="0.0.0.0", allow_open=True)   # InProcessBackend listens on loopback anyway
    salts = []
    for i in range(2):
        ws, _ = open_session(isolated.ws_url)
        with ws:
            complete(ws, f"o{i}", max_tokens=1)
        salts.append(isolated.engine.by_client_id(f"o{i}")[0].cache_salt)
    assert None not in salts and salts[0] != salts[1]      # every anonymous session is its own tenant


# ── sessions: a cap per user, an absolute hello deadline

def test_one_user_over_the_session_cap_gets_a_typed_error_and_others_are_served(fake_backend):
    cap = 3
    b = fake_backend(auth_tokens=TOKENS, max_sessions_per_user=cap)
    held = [open_session(b.ws_url, token=ALICE)[0] for _ in range(cap)]
    try:
        for _ in range(cap):                            # 2x the cap in all
            with connect(b.ws_url, additional_headers={"Authorization": f"Bearer {ALICE}"}, open_timeout=10,
                         close_timeout=2) as ws:
                first = json.loads(ws.recv(timeout=10))
                assert first["kind"] == "error" and first["code"] == "too_many_sessions", first
                assert "max_sessions_per_user" in first["message"]
                with pytest.raises(ConnectionClosed) as ei:
                    ws.recv(timeout=10)
                assert ei.value.rcvd is not None and ei.value.rcvd.code == 1013
        # the user's own sessions and another user go on
        assert complete(held[0], "still", max_tokens=1).kind == "done"
        other, _ = open_session(b.ws_url, token=CAROL)
        with other:
            assert complete(other, "other", max_tokens=1).kind == "done"
    finally:
        for ws in held:
            ws.close()
    until(lambda: b.call(lambda: b.backend.sessions_of.get("alice", 0)) == 0, "alice's sessions to end")
    ws, _ = open_session(b.ws_url, token=ALICE)           # the user's slots are free again
    ws.close()


@pytest.mark.timeout(120)     # a hang detector: a deadline that junk kept resetting would never close
def test_junk_before_hello_does_not_extend_the_hello_deadline(fake_backend):
    """Junk comes every 0.1 s for 20 s, far more often than the 0.6 s hello deadline: a deadline that each
    frame reset would never pass while it comes. The session is closed with 4408 while the junk is still
    coming (the loop does not run out: pytest.raises), each junk frame until then answered with its typed
    error."""
    b = fake_backend(hello_timeout_s=0.6)
    answered = 0
    with connect(b.ws_url, open_timeout=10, close_timeout=2) as ws, pytest.raises(ConnectionClosed) as ei:
        for i in range(200):
            ws.send(json.dumps({"kind": "complete", "id": f"j{i}", "prefix": "x"}))
            assert json.loads(ws.recv(timeout=10))["code"] == "hello_required"
            answered += 1
            time.sleep(0.1)
    print(f"\nclosed {ei.value.rcvd and ei.value.rcvd.code} after {answered} answered junk frames of 200")
    assert ei.value.rcvd is not None
    assert (ei.value.rcvd.code, ei.value.rcvd.reason) == (4408, "no hello frame")


# ── HTTP bodies: the token before the body, a bounded body

HUGE_BYTES = 100 << 20


def _huge_post(port: int, token: str | None, chunked: bool, total_bytes: int = HUGE_BYTES):
    """POST /v1/completions with a 100 MB body streamed as fast as the socket takes it, from a second thread;
    returns (status line, seconds from the request head to the answer, bytes sent before it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = ["POST /v1/completions HTTP/1.1", "Host: localhost", "Content-Type: application/json"]
    head += ["Transfer-Encoding: chunked"] if chunked else [f"Content-Length: {total_bytes}"]
    head += [f"Authorization: Bearer {token}"] if token else []
    sent = [0]
    stop = threading.Event()

    def pump():
        piece = b"x" * (1 << 16)
        frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
        try:
            while sent[0] < total_bytes and not stop.is_set():
                sock.sendall(frame)
                sent[0] += len(piece)
        except OSError:
            pass          # the server answered and closed: the rest is never read

    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    t0 = time.perf_counter()
    writer = threading.Thread(target=pump, daemon=True)
    writer.start()
    try:
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        elapsed = time.perf_counter() - t0
    finally:
        stop.set()
        sock.close()
        writer.join(10)
    return answer.split(b"\r\n", 1)[0].decode(), elapsed, sent[0]


@pytest.fixture(scope="module")
def tokens_backend():
    """One backend with TOKENS for the tests that only send to it."""
    with fake_server(auth_tokens=TOKENS) as b:
        yield b


@pytest.mark.parametrize("token, chunked, status", [(None, False, 401), (None, True, 401), (ALICE, False, 413),
                                                    (ALICE, True, 413)])
def test_a_100mb_post_is_refused_before_the_server_reads_it(tokens_backend, token, chunked, status):
    b = tokens_backend
    rss0 = rss_bytes()
    line, elapsed_s, sent = _huge_post(b.port, token, chunked)
    rss1 = rss_bytes()
    print(f"\n{line!r} after {elapsed_s * 1000:.0f} ms; {sent >> 20} MiB sent; RSS {rss0 >> 20} → {rss1 >> 20} MiB")
    assert line.startswith(f"HTTP/1.1 {status} "), line
    # the server did not take the body in first: it answered while most of it was still unsent (a reading server
    # drains all 100 MB before it answers) — proven by bytes, not by a speed
    assert sent < HUGE_BYTES // 2, f"{sent >> 20} MiB of {HUGE_BYTES >> 20} were sent before the answer"
    assert rss1 - rss0 < 20 << 20
    r = httpx.post(f"{b.http_url}/v1/completions", json={"prompt": "p", "max_tokens": 1},
                   headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)
    assert r.status_code == 200, r.text   # the server is fine afterwards


# ── an open port is a decision

def _serve(log, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "quickcode", "serve", *args], cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def test_an_open_server_refuses_a_non_loopback_bind(tmp_path):
    with open(tmp_path / "serve.log", "w") as log:
        proc = _serve(log, "--host", "0.0.0.0", "--port", "8799")
        proc.wait(timeout=120)
    out = (tmp_path / "serve.log").read_text()
    assert proc.returncode == 1, out
    assert "refusing to listen on '0.0.0.0' without API tokens" in out and "allow_open=true" in out
    assert "Traceback" not in out


@pytest.mark.engine
@pytest.mark.slow
def test_allow_open_starts_and_says_so_loudly(tmp_path):
    from quickcode.backend.launch import free_port

    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    proc = _serve(log, "--host", "0.0.0.0", "--port", str(port), "--set", "allow_open=true", "--set", "spec_method=off")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("the open server did not start")
    finally:
        # it is up: stop it at once — SIGKILL to the whole group (the engine is still starting; a graceful stop
        # would wait for it), which the orphan guard and the shared process group make take the engine too
        os.killpg(proc.pid, 9)
        proc.wait(timeout=60)
        log.close()
    out = (tmp_path / "serve.log").read_text()
    assert "OPEN SERVER: listening on 0.0.0.0 WITHOUT API tokens" in out


def test_the_gpu_profile_listens_on_the_network_with_tokens_and_tls(monkeypatch):
    from quickcode.backend.settings import Settings
    from quickcode.backend.tenancy import check_bind, is_loopback

    monkeypatch.setenv("QUICKCODE_CONFIG", str(REPO / "configs" / "gpu-13b-int8.toml"))
    s = Settings()
    assert not is_loopback(s.host) and s.auth_tokens_file and s.ssl_certfile and s.ssl_keyfile and not s.allow_open
    check_bind(s.host, bool(s.auth_tokens_file), s.allow_open)     # it starts without allow_open
    doc = (REPO / "docs" / "operators.md").read_text()
    assert "--host 0.0.0.0 --set auth_tokens_file" in doc.replace("\\\n    ", "") and "allow_open" in doc


# ── web pages: any site the developer visits can reach 127.0.0.1

def test_a_web_page_cannot_use_the_server_unless_its_origin_is_allowed(fake_backend):
    from websockets.exceptions import InvalidStatus

    b = fake_backend()                                   # an open loopback server: no token to stop a page
    with pytest.raises(InvalidStatus) as ei:
        connect(b.ws_url, origin="https://evil.example", open_timeout=10)
    assert ei.value.response.status_code == 403
    r = httpx.post(f"{b.http_url}/v1/completions", json={"prompt": "x", "max_tokens": 1},
                   headers={"Origin": "https://evil.example"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["type"] == "permission_error"
    ws, _ = open_session(b.ws_url)                       # editors send no Origin
    ws.close()
    ok = fake_backend(allowed_origins=["https://ide.example"])
    with connect(ok.ws_url, origin="https://ide.example", open_timeout=10) as ws:
        ws.send(json.dumps({"kind": "hello", "protocol_version": 1}))
        assert json.loads(ws.recv(timeout=10))["kind"] == "welcome"
    with pytest.raises(InvalidStatus):
        connect(ok.ws_url, origin="https://evil.example", open_timeout=10)


# ── a client that does not read what it asked for

class NonReadingClient:
    """A WebSocket client that reads nothing unless told to: websockets' sans-I/O protocol over a plain socket
    (its threaded clients read ahead into their own buffers, which then decide when the server sees a full
    socket)."""

    def __init__(self, ws_url: str, port: int):
        self.proto = ClientProtocol(parse_uri(ws_url), max_size=None)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.proto.send_request(self.proto.connect())
        self._flush()
        while self.proto.state is State.CONNECTING:
            self.proto.receive_data(self.sock.recv(4096))
        assert self.proto.state is State.OPEN, self.proto.handshake_exc
        self.proto.events_received()      # the 101 response

    def send(self, text: str, times: int = 1) -> None:
        for _ in range(times):
            self.proto.send_text(text.encode())
        self._flush()

    def read_until_close(self) -> tuple[list[dict], Close | None]:
        """Read everything the server sent, up to its close frame (None: the connection ended without one)."""
        frames: list[dict] = []
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                return frames, None
            self.proto.receive_data(data)
            for ev in self.proto.events_received():
                if ev.opcode is Opcode.TEXT:
                    frames.append(json.loads(ev.data))
                elif ev.opcode is Opcode.CLOSE:
                    return frames, Close.parse(ev.data)

    def _flush(self) -> None:
        for data in self.proto.data_to_send():
            if data:
                self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


def test_a_client_that_stops_reading_is_cut_off_with_memory_bounded(fake_backend):
    """Every junk frame earns an error frame; a client that never reads them fills the socket buffers, then
    the session's outbox (`MAX_OUTBOX` frames): the server stops queueing for it and gives the session up — it
    does not buffer without end. Proven by state and frames, not by time: the server marks the session closed
    while the flood goes on, and once the client reads again it finds the close 4429 behind the answers it
    left unread; then the session is gone."""
    from quickcode.backend.session import CLOSE_SLOW_CONSUMER, MAX_OUTBOX

    b = fake_backend()
    frame = json.dumps({"kind": "k" * 100, "id": "i" * 120})      # each answered by a ~200-byte error frame
    client = NonReadingClient(b.ws_url, b.port)
    try:
        client.send(json.dumps({"kind": "hello", "protocol_version": 1}))
        (session,) = until(lambda: b.call(lambda: list(b.backend.sessions)), "the session to open")
        rss0, sent, peak = rss_bytes(), 0, 0
        while not b.call(lambda: session.closed):
            assert sent < 1_000_000, "the server buffers a client that does not read without end"
            client.send(frame, 1_000)
            sent += 1_000
            peak = max(peak, rss_bytes() - rss0)
        frames, close = client.read_until_close()
    finally:
        client.close()
    print(f"\ngiven up after {sent} frames sent unread; {len(frames)} answers were on their way; "
          f"peak RSS growth {peak >> 20} MiB")
    assert close is not None and close.code == CLOSE_SLOW_CONSUMER, close
    assert frames[0]["kind"] == "welcome" and {f["code"] for f in frames[1:]} == {"unknown_kind"}
    assert MAX_OUTBOX < len(frames) <= sent + 1 and peak < 100 << 20
    until(lambda: b.call(lambda: len(b.backend.sessions)) == 0, "the session to end")
