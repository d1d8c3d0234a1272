"""A next-edit request (`edit`) through the backend's own path — the session, the validation, the scheduler
(a user's newer request supersedes the older, whichever kind), the engine's stream read to the region's end
marker — over a real WebSocket to a real uvicorn server on the `FakeEngine`."""
from __future__ import annotations

import json

import pytest

from quickcode.backend.edit_prompt import REGION_END, REGION_START
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.settings import Settings
from tests.backend.test_backend_service import first_chunk, held
from tests.support.waits import until
from tests.support.ws_helpers import open_session, recv

REGION = "def add(a, b):\n    return a + b\n"


def rewrite(prompt: str):
    """The engine's script: an edit prompt gets the region with `+` made `*`, the end marker, then more."""
    if prompt.endswith(REGION_START + "\n"):
        return iter(["def add(a, b):\n", "    return a", " * b\n", REGION_END, "\n", "junk", " more"])
    return iter([" x", "\n"])


def frames(ws, rid: str) -> list[dict]:
    """Every frame of `rid` up to and with its terminal one."""
    out = []
    while not out or out[-1]["kind"] not in ("done", "error"):
        out.append(recv(ws, 10))
        assert out[-1].get("id") == rid, out
    return out


def send_edit(ws, rid: str, **fields) -> None:
    ws.send(json.dumps({"kind": "edit", "id": rid, "region": REGION, "cursor_chars": 27,
                        "events": ["@@ -1,1 +1,1 @@\n-x\n+y\n"], "before": "import os\n", "max_tokens": 32,
                        **fields}))


def test_an_edit_answers_one_replace_then_done_and_stops_the_engine_at_the_end_marker(fake_backend):
    engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite)
    b = fake_backend(engine)
    ws, _ = open_session(b.ws_url)
    with ws:
        send_edit(ws, "e1")
        got = frames(ws, "e1")
    assert got[0] == {"kind": "replace", "id": "e1", "start_chars": 28, "end_chars": 29, "text": "*"}
    assert got[1]["kind"] == "done" and got[1]["finish_reason"] == "stop" and len(got) == 2
    (req,) = engine.by_client_id("e1")
    until(lambda: req.state == "finished", "e1 finished in the engine", poll_s=0.002)
    assert req.finish_reason == "abort" and "junk" not in req.text       # nothing past the marker generated
    assert req.stop == [] and req.temperature == 0.0


@pytest.mark.parametrize("script, finish", [
    (lambda p: iter([REGION, REGION_END]), "stop"),                       # kept as it was: no edit
    (lambda p: iter(["def add(a, b):\n", "    return"] + [" a"] * 40), "length"),   # never closed
])
def test_no_replace_when_the_region_is_kept_or_never_closed(fake_backend, script, finish):
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), script=script))
    ws, _ = open_session(b.ws_url)
    with ws:
        send_edit(ws, "e2")
        got = frames(ws, "e2")
    assert [m["kind"] for m in got] == ["done"] and got[0]["finish_reason"] == finish


def test_a_users_edit_supersedes_their_running_completion_and_a_completion_the_edit(fake_backend):
    b, engine, clock = held(fake_backend)
    ws, _ = open_session(b.ws_url)
    with ws:
        ws.send(json.dumps({"kind": "complete", "id": "c1", "prefix": "def f(x):\n    ", "max_tokens": 256}))
        first_chunk(b, engine, clock, ws, "c1")
        send_edit(ws, "e3")
        old = recv(ws, 5)
        assert old["id"] == "c1" and old["kind"] == "done" and old["finish_reason"] == "superseded"
        until(lambda: engine.by_client_id("e3") and engine.by_client_id("e3")[0].state == "running",
              "e3 running", poll_s=0.002)
        ws.send(json.dumps({"kind": "complete", "id": "c2", "prefix": "def f(x):\n    r", "max_tokens": 1}))
        edit_end = recv(ws, 5)
        assert edit_end == {**edit_end, "id": "e3", "kind": "done", "finish_reason": "superseded"}
        (e3,) = engine.by_client_id("e3")
        until(lambda: e3.state == "finished", "e3 aborted", poll_s=0.002)
        assert e3.finish_reason == "abort"


@pytest.mark.parametrize("fields, code", [
    ({"cursor_chars": len(REGION) + 1}, "bad_value"),
    ({"cursor_chars": -1}, "bad_value"),
    ({"events": ["x"] * 65}, "bad_value"),
    ({"region": "x" * 9000, "cursor_chars": 0}, "prompt_too_long"),
    ({"before": "x" * 40_000}, "prompt_too_long"),
    ({"max_tokens": 10**6}, "max_tokens_too_large"),
    ({"path": "p" * 5000}, "bad_value"),
    ({"events": [3]}, "wrong_type"),
])
def test_a_hostile_edit_gets_a_typed_error_and_the_session_goes_on(fake_backend, fields, code):
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite),
                     max_prompt_chars=32_000)
    ws, _ = open_session(b.ws_url)
    with ws:
        send_edit(ws, "bad", **fields)
        err = recv(ws, 5)
        assert err["kind"] == "error" and err["code"] == code and err["id"] == "bad", err
        send_edit(ws, "good")
        assert frames(ws, "good")[0]["kind"] == "replace"


def test_an_edit_predicted_past_the_ttft_budget_is_shed_and_never_reaches_the_engine(fake_backend):
    b, engine, clock = held(fake_backend, ttft_budget_ms=1)
    busy, _ = open_session(b.ws_url)
    other, _ = open_session(b.ws_url)                  # another user (an open server: one per session)
    with busy, other:
        busy.send(json.dumps({"kind": "complete", "id": "c1", "prefix": "def f(x):\n    ", "max_tokens": 256}))
        first_chunk(b, engine, clock, busy, "c1")
        send_edit(other, "e4")
        (end,) = frames(other, "e4")
        assert end["kind"] == "done" and end["finish_reason"] == "shed"
        assert engine.by_client_id("e4") == []


def test_an_edit_needs_room_in_the_context_for_its_region_written_again(fake_backend):
    """A prompt that fits the completion budget but leaves no room for `max_tokens` more is refused."""
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite))
    region = "value = compute(a, b)\n" * 80
    ws, _ = open_session(b.ws_url)
    with ws:
        send_edit(ws, "long", region=region, cursor_chars=0, max_tokens=256, before="", events=[])
        err = recv(ws, 5)
        assert err["kind"] == "error" and err["code"] == "prompt_too_long" and err["id"] == "long", err
        send_edit(ws, "short", region=region, cursor_chars=0, max_tokens=64, before="", events=[])
        assert frames(ws, "short")[-1]["kind"] == "done"
