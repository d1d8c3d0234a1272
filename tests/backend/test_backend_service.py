"""The backend's own logic — session, completion service, scheduler hand-off, health endpoints — over real
WebSockets and HTTP to a real uvicorn server, on the `FakeEngine` (scripted tokens; a `ManualClock` where a
test must hold a request running). What vLLM itself does is tested in test_backend_engine.py.

An abort is proven by what the engine reports: its request finished as "abort", nothing running or waiting,
no token after it — never by a race with the clock.
"""
from __future__ import annotations

import itertools
import json
import logging
import socket
import threading
import time

import pytest
from websockets.exceptions import InvalidStatus

from quickcode.backend.fake_engine import FakeEngine, ManualClock
from quickcode.backend.settings import Settings
from tests.conftest import fake_server
from tests.support.waits import until
from tests.support.ws_helpers import complete, http_get, open_session, read_until_terminal, recv


class RecordingHandler(logging.Handler):
    def __init__(self, level: int):
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


FOREVER = lambda prompt: itertools.repeat(" x")   # noqa: E731 — a request that runs until max_tokens


def held(fake_backend, **settings):
    """A backend whose engine runs on a manual clock: nothing generates until the test advances it."""
    clock = ManualClock()
    s = Settings(spec_method="off", heal_token=False, **settings)
    engine = FakeEngine(s, script=FOREVER, clock=clock)
    return fake_backend(engine, **settings), engine, clock


def first_chunk(b, engine, clock, ws, rid: str) -> dict:
    """Let the engine produce `rid`'s first token and read its chunk."""
    until(lambda: engine.by_client_id(rid) and engine.by_client_id(rid)[0].state == "running",
          f"{rid} running in the engine", poll_s=0.002)
    clock.step(engine.ttft_s)
    m = recv(ws, 5)
    assert m == {"kind": "chunk", "id": rid, "text": m["text"]} and m["text"], m
    return m


def streaming(fake_backend, rid: str, prefix: str):
    """A held backend, a session, and `rid` streaming in it (its first chunk read): (b, engine, clock, ws)."""
    b, engine, clock = held(fake_backend)
    ws, _ = open_session(b.ws_url)
    ws.send(json.dumps({"kind": "complete", "id": rid, "prefix": prefix, "max_tokens": 256}))
    first_chunk(b, engine, clock, ws, rid)
    return b, engine, clock, ws


def assert_aborted_and_idle(engine, clock, rid: str) -> None:
    """The engine ended `rid` as aborted, holds nothing, and writes no token for it however long time runs."""
    (req,) = engine.by_client_id(rid)
    until(lambda: req.state == "finished", f"{rid} finished in the engine", poll_s=0.002)
    assert req.finish_reason == "abort", (req.finish_reason, req.ended_by)
    until(lambda: engine.stats.num_running == engine.stats.num_waiting == 0, "engine idle", poll_s=0.002)
    tokens = len(req.tokens)
    clock.advance(3600.0)
    time.sleep(0.05)
    assert len(req.tokens) == tokens and engine.stats.num_running == 0
    assert "length" not in engine.stats.finished and "stop" not in engine.stats.finished


@pytest.fixture(scope="module")
def plain():
    """One backend on the default fake engine for the tests that only need answers."""
    with fake_server() as b:
        yield b


def assert_silent(ws, for_s: float = 0.2) -> None:
    with pytest.raises(TimeoutError):
        ws.recv(timeout=for_s)


# ── aborts reach the engine

def test_a_superseded_request_is_aborted_in_the_engine(fake_backend):
    b, engine, clock, ws = streaming(fake_backend, "old", "def f(x):\n    ")
    with ws:
        ws.send(json.dumps({"kind": "complete", "id": "new", "prefix": "def f(x):\n    r", "max_tokens": 1}))
        old_done = recv(ws, 5)
        assert old_done["id"] == "old" and old_done["kind"] == "done" and old_done["finish_reason"] == "superseded"
        assert old_done["timing"]["output_tokens"] == 1
        until(lambda: engine.by_client_id("new") and engine.by_client_id("new")[0].state == "running",
              "new running in the engine", poll_s=0.002)
        (old,) = engine.by_client_id("old")
        assert old.state == "finished" and old.finish_reason == "abort"
        clock.step(engine.ttft_s)
        new = read_until_terminal(ws, "new", timeout_s=5)
        assert new.kind == "done" and new.finish_reason == "length" and new.chunks == 1
        assert engine.stats.finished == {"length": 1}     # the new one finished by itself, the old one never
        tokens = len(old.tokens)
        clock.advance(3600.0)
        assert_silent(ws)                                    # exactly one terminal frame for "old", nothing after
        assert len(old.tokens) == tokens and engine.stats.num_running == engine.stats.num_waiting == 0


def test_cancel_aborts_the_engine_request(fake_backend):
    b, engine, clock, ws = streaming(fake_backend, "x", "import os\n")
    with ws:
        ws.send(json.dumps({"kind": "cancel", "id": "x"}))
        done = recv(ws, 5)
        assert done["id"] == "x" and done["finish_reason"] == "cancelled"
        assert_aborted_and_idle(engine, clock, "x")
        assert_silent(ws)
        ws.send(json.dumps({"kind": "cancel", "id": "x"}))    # a late cancel of a finished id is ignored
        ws.send(json.dumps({"kind": "cancel", "id": "never-sent"}))
        ws.send(json.dumps({"kind": "complete", "id": "after", "prefix": "def f(x):\n    ", "max_tokens": 2}))
        clock.step(1.0)
        clock.step(1.0)
        r = read_until_terminal(ws, "after", timeout_s=5)
        assert r.kind == "done" and r.finish_reason == "length"


def test_client_disconnect_aborts_the_engine_request(fake_backend):
    b, engine, clock, ws = streaming(fake_backend, "x", "import os\n")
    ws.socket.shutdown(socket.SHUT_RDWR)                   # the editor dies: no close frame
    ws.socket.close()
    assert_aborted_and_idle(engine, clock, "x")
    until(lambda: not b.backend.sessions, "the session to close", poll_s=0.002)
    assert b.backend.service.live_count == 0
    ws.close()


def test_a_request_queued_in_the_engine_is_aborted_too(fake_backend):
    """Beyond the engine's slots a request waits inside the engine; cancelling it there ends it as aborted."""
    clock = ManualClock()
    s = Settings(spec_method="off", heal_token=False)
    engine = FakeEngine(s, script=FOREVER, clock=clock, max_running=1)
    b = fake_backend(engine, per_user_inflight=4, max_running=4)
    a, _ = open_session(b.ws_url)
    c, _ = open_session(b.ws_url)
    with a, c:
        a.send(json.dumps({"kind": "complete", "id": "run", "prefix": "a = ", "max_tokens": 50}))
        c.send(json.dumps({"kind": "complete", "id": "wait", "prefix": "b = ", "max_tokens": 50}))
        until(lambda: engine.stats.num_running == engine.stats.num_waiting == 1, "one running, one waiting",
              poll_s=0.002)
        c.send(json.dumps({"kind": "cancel", "id": "wait"}))
        assert recv(c, 5)["finish_reason"] == "cancelled"
        (waiting,) = engine.by_client_id("wait")
        until(lambda: waiting.state == "finished", "the waiting request to finish", poll_s=0.002)
        assert waiting.finish_reason == "abort" and waiting.started_s is None and waiting.tokens == []
        assert engine.stats.num_waiting == 0 and engine.stats.num_running == 1
        a.send(json.dumps({"kind": "cancel", "id": "run"}))
        assert recv(a, 5)["finish_reason"] == "cancelled"
        until(lambda: engine.stats.num_running == 0, "the engine to run nothing", poll_s=0.002)


# ── load shedding

def test_a_burst_beyond_the_budget_is_shed_at_once_and_never_reaches_the_engine(fake_backend):
    """24 editors at once, 2 engine slots, 0.2 s of scripted engine time per request against a 200 ms TTFT
    budget: the first ones are served, the rest get an empty `done(shed)` and never enter the engine."""
    engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=FOREVER, ttft_s=0.05, per_token_s=0.01)
    b = fake_backend(engine, max_running=2, ttft_budget_ms=200)
    sessions = [open_session(b.ws_url) for _ in range(24)]
    for ws, _ in sessions:
        ws.send(json.dumps({"kind": "complete", "id": "b", "prefix": "def solve(data):\n", "max_tokens": 16}))
    results = [(welcome["session_id"], read_until_terminal(ws, "b", timeout_s=30)) for ws, welcome in sessions]
    shed = [(sid, r) for sid, r in results if r.finish_reason == "shed"]
    served = [(sid, r) for sid, r in results if r.finish_reason == "length"]
    assert len(shed) + len(served) == 24 and shed and served, [r.finish_reason for _, r in results]
    for sid, r in shed:
        assert r.chunks == 0 and r.terminal["timing"]["output_tokens"] == 0
        assert f"{sid}:b" not in engine.requests                       # shed in our queue, not in the engine
    for sid, r in served:
        assert r.chunks == 16 and engine.requests[f"{sid}:b"].finish_reason == "length"
    assert engine.stats.finished == {"length": len(served)}
    until(lambda: engine.stats.num_running == engine.stats.num_waiting == b.backend.service.live_count == 0,
          "engine and service idle", poll_s=0.002)
    for ws, _ in sessions:
        assert_silent(ws, 0.01)                                          # one terminal frame each
        ws.close()


# ── a bad frame is a typed error; the session goes on

@pytest.mark.parametrize("frame, code_", [
    ("{not json", "bad_json"),
    ('{"kind": "complete", "id": "t1", "prefix": "def f(', "bad_json"),                   # truncated
    ('{"kind": "complete", "id": "t2", "prefix": "x", "max_tokens": "ten"}', "wrong_type"),
    ('{"kind": "complete", "id": "t3", "prefix": 42}', "wrong_type"),
    ('{"kind": "complete", "id": "t4"}', "missing_field"),
    ('{"kind": "explode", "id": "t5"}', "unknown_kind"),
    ('{"id": "t6"}', "missing_field"),
    ("[1, 2, 3]", "bad_json"),
    (b"\xff\xfe\x00 not utf-8", "not_utf8"),                                               # binary frame
    ("OVERSIZED", "frame_too_large"),
    ('{"kind": "welcome", "protocol_version": 1, "session_id": "x"}', "unknown_kind"),   # server-only kind
    ('{"kind": "complete", "id": "t7", "prefix": "x", "max_tokens": 100000}', "max_tokens_too_large"),
    ('{"kind": "hello", "protocol_version": 1}', "bad_value"),                            # a second hello
    ('{"kind": "complete", "id": "t8", "prefix": "x", "temperature": 9}', "bad_value"),
    ('{"kind": "complete", "id": "t9", "prefix": "x", "max_words": -1}', "bad_value"),
    ('{"kind": "complete", "id": "t10", "prefix": "x", "max_words": "one"}', "wrong_type"),
])
def test_a_bad_frame_gets_a_typed_error_and_the_session_keeps_working(plain, frame, code_):
    ws, welcome = open_session(plain.ws_url)
    with ws:
        if frame == "OVERSIZED":
            frame = json.dumps({"kind": "complete", "id": "big", "prefix": "x" * (welcome["max_frame_bytes"] + 10)})
        ws.send(frame)
        err = recv(ws, 5)
        assert err["kind"] == "error" and err["code"] == code_ and err["message"], err
        r = complete(ws, "ok", "def add(a, b):\n    return", max_tokens=4, timeout_s=10)
        assert r.kind == "done" and r.finish_reason in ("stop", "length") and r.text


def test_a_duplicate_id_is_refused_while_the_first_runs(fake_backend):
    b, engine, clock = held(fake_backend)
    ws, _ = open_session(b.ws_url)
    with ws:
        ws.send(json.dumps({"kind": "complete", "id": "dup", "prefix": "x = ", "max_tokens": 8}))
        ws.send(json.dumps({"kind": "complete", "id": "dup", "prefix": "y = ", "max_tokens": 2}))
        err = recv(ws, 5)
        assert err == {"kind": "error", "code": "duplicate_id", "message": err["message"], "id": "dup"}
        for _ in range(8):
            clock.step(1.0)
        r = read_until_terminal(ws, "dup", timeout_s=5)
        assert r.kind == "done" and r.finish_reason == "length" and r.chunks == 8
        assert len(engine.requests) == 1


def test_a_wrong_protocol_version_closes_the_session_with_4400(plain):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with connect(plain.ws_url) as ws:
        ws.send(json.dumps({"kind": "hello", "protocol_version": 99}))
        err = json.loads(ws.recv(timeout=5))
        assert err["kind"] == "error" and err["code"] == "version_mismatch"
        with pytest.raises(ConnectionClosed) as ei:
            ws.recv(timeout=5)
        assert ei.value.rcvd.code == 4400


# ── what a done frame says

def test_done_carries_the_timing_breakdown(fake_backend):
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), script=FOREVER, ttft_s=0.01, per_token_s=0.002))
    ws, _ = open_session(b.ws_url)
    with ws:
        t0 = time.perf_counter()
        r = complete(ws, "t", "import os\n\ndef main():\n    ", max_tokens=6, timeout_s=10)
        elapsed_ms = (time.perf_counter() - t0) * 1000
    t = r.terminal["timing"]
    assert r.finish_reason == "length" and r.chunks == 6 and t["output_tokens"] == 6
    assert t["prompt_tokens"] > 5 and t["cached_tokens"] == 0
    assert t["queue_ms"] >= 0 and t["tokenize_ms"] > 0 and t["ttft_ms"] > 0
    assert t["first_decode_ms"] > 0 and t["generate_ms"] >= t["first_decode_ms"] and t["tokens_per_s"] > 0
    assert t["queue_ms"] + t["ttft_ms"] + t["generate_ms"] <= t["total_ms"] + 1
    assert t["total_ms"] <= elapsed_ms                      # the client's view includes the network


def test_a_stop_string_and_max_tokens_reach_the_engine(fake_backend):
    words = lambda prompt: iter(["    a", " =", " 1", "\n", "    b", " =", " 2", "\n"])  # noqa: E731
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), script=words))
    ws, _ = open_session(b.ws_url)
    with ws:
        r = complete(ws, "s", "def f():\n", max_tokens=32, stop=["\n"], timeout_s=10)
        assert r.finish_reason == "stop" and r.text == "    a = 1"
        r = complete(ws, "l", "def f():\n", max_tokens=2, timeout_s=10)
        assert r.finish_reason == "length" and r.text == "    a ="
        r = complete(ws, "e", "def f():\n", max_tokens=32, timeout_s=10)
        assert r.finish_reason == "stop" and r.text == "    a = 1\n    b = 2\n"



def test_a_healed_piece_is_asked_of_the_engine_written_again_and_taken_off_the_stream(fake_backend):
    """heal_token: the prefix's last piece (` sel`) is given back — the prompt ends before it, the engine is
    asked to keep to it (`healed`) with as many tokens more as it took typed (` se` `l`: 2) — and what the
    client gets starts after it."""
    words = lambda prompt: iter([" self", ".", "name", "\n"])  # noqa: E731
    engine = FakeEngine(Settings(spec_method="off", heal_token=True), script=words)
    b = fake_backend(engine, heal_token=True)
    ws, _ = open_session(b.ws_url)
    with ws:
        r = complete(ws, "h", "class A:\n    def f(self):\n        y = sel", max_tokens=8, timeout_s=10)
    assert r.finish_reason == "stop" and r.text == "f.name\n", (r.finish_reason, r.text)
    (req,) = engine.by_client_id("h")
    assert engine.tokenizer.decode(req.prompt_ids).endswith("    y =") and req.max_tokens == 8 + 2
    assert "".join(req.tokens) == " self.name\n"


def test_a_crlf_document_is_prompted_in_lf(fake_backend):
    """The model never saw a `\\r` in training (quickcode/draft_model/corpus.py normalises): the prompt of a
    CRLF document has LF line breaks only, snippets included; the completion stays LF (editors insert it in
    the document's line ending)."""
    words = lambda prompt: iter(["    a", " =", " 1", "\n", "    b", " =", " 2", "\n"])  # noqa: E731
    engine = FakeEngine(Settings(spec_method="off", heal_token=False, fim_policy="always"), script=words)
    b = fake_backend(engine, fim_policy="always")
    ws, _ = open_session(b.ws_url)
    with ws:
        r = complete(ws, "c", "import os\r\n\r\ndef f():\r\n", suffix="\r\nprint(f())\r\n", max_tokens=32,
                     snippets=[{"path": "b.py", "text": "X = 1\r\nY = 2\r\n"}], timeout_s=10)
        assert r.finish_reason == "stop" and r.text == "    a = 1\n    b = 2\n", r.text
    (req,) = engine.by_client_id("c")
    prompt = engine.tokenizer.decode(req.prompt_ids)
    assert "\r" not in prompt and "def f():\n" in prompt and "print(f())" in prompt and "Y = 2" in prompt, prompt


@pytest.mark.parametrize("max_words, text", [(1, " self.name"), (2, " self.name ="), (0, " self.name = 1\n")])
def test_max_words_ends_the_request_once_its_words_are_written(fake_backend, max_words, text):
    """The engine stops at the token that completes the words asked for (a character after them written: the
    request's text ends with it); the engine request is aborted there, no token after it."""
    words = lambda prompt: iter([" self", ".", "name", " =", " 1", "\n"])  # noqa: E731
    engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=words)
    b = fake_backend(engine)
    ws, _ = open_session(b.ws_url)
    with ws:
        r = complete(ws, "w", "class A:\n    def f(self):\n        y =", max_tokens=32, max_words=max_words, timeout_s=10)
    assert r.finish_reason == "stop" and r.text == text, (r.finish_reason, r.text)
    assert r.terminal["timing"]["output_tokens"] == r.chunks
    (req,) = engine.by_client_id("w")
    until(lambda: req.state == "finished", "the engine request to end", poll_s=0.002)
    assert req.finish_reason == ("abort" if max_words else "stop") and "".join(req.tokens) == text


# ── health

def test_healthz_and_readyz_follow_the_engine_from_start_to_death(fake_backend):
    gate = threading.Event()
    s = Settings(spec_method="off", heal_token=False)
    engine = FakeEngine(s, hold_start=gate)
    b = fake_backend(engine, wait_ready=False)
    status, body = http_get(f"{b.http_url}/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"            # starting is alive
    status, body = http_get(f"{b.http_url}/readyz")
    assert status == 503 and json.loads(body) == {"ready": False, "reason": "engine starting"}
    # a starting replica takes no sessions: the handshake is answered 503 (a proxy tries another replica), and
    # uvicorn logs no ERROR for it (its websockets-sansio would: quickcode/backend/logs.py DENIAL_NOISE)
    errors = RecordingHandler(logging.ERROR)
    logging.getLogger("uvicorn.error").addHandler(errors)
    try:
        with pytest.raises(InvalidStatus) as ei:
            open_session(b.ws_url)
        time.sleep(0.2)                  # the server logs after the app has returned
    finally:
        logging.getLogger("uvicorn.error").removeHandler(errors)
    assert ei.value.response.status_code == 503 and json.loads(ei.value.response.body) == {"reason": "engine starting"}
    assert errors.messages == []
    gate.set()
    until(lambda: engine.ready, "the engine to be ready", poll_s=0.002)
    status, body = http_get(f"{b.http_url}/readyz")
    assert status == 200 and json.loads(body)["ready"] is True
    ws, _ = open_session(b.ws_url)
    with ws:
        assert complete(ws, "served", "x = ", max_tokens=2, timeout_s=5).kind == "done"
        engine.die()
        status, body = http_get(f"{b.http_url}/healthz")
        assert status == 503 and json.loads(body) == {"status": "engine_dead", "reason": "engine core died"}
        assert http_get(f"{b.http_url}/readyz")[0] == 503
        r = complete(ws, "late", "x = ", max_tokens=2, timeout_s=5)
        assert r.kind == "error" and r.code == "engine_unavailable"
    ws, _ = open_session(b.ws_url)      # dead (a restart is due): sessions open, and hear why on each request
    with ws:
        assert complete(ws, "dead", "x = ", max_tokens=2, timeout_s=5).code == "engine_unavailable"


def test_the_engine_dying_mid_stream_ends_the_request_with_a_typed_error(fake_backend):
    b, engine, clock, ws = streaming(fake_backend, "x", "import os\n")
    with ws:
        b.call(engine.die)
        err = recv(ws, 5)
        assert err["kind"] == "error" and err["id"] == "x" and err["code"] == "engine_unavailable"
        assert "Traceback" not in err["message"]
        assert_silent(ws)
    assert b.backend.service.live_count == 0


def test_an_engine_that_fails_to_start_turns_healthz_red(fake_backend):
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), start_error="OSError: no model"), wait_ready=False)
    until(lambda: http_get(f"{b.http_url}/healthz")[0] == 503, "/healthz to turn red", poll_s=0.002)
    status, body = http_get(f"{b.http_url}/readyz")
    assert status == 503 and json.loads(body)["reason"] == "OSError: no model"
