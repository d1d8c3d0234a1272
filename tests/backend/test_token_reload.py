"""Users without restarts (issue 48, item 4), on the real server (uvicorn, real WebSockets; the `FakeEngine`:
the tokens are our code, not vLLM's): a token added to the tokens file of a running backend opens sessions, a
removed one is refused and its open sessions are closed with a typed reason, other users' sessions go on
untouched, a bad version of the file keeps the previous tokens, SIGHUP reloads at once, and requests are
counted per user. JSON logs and the access line per completion are checked on a serving process.

Every wait is for a state (a session that opens, a frame, a counter), bounded only as a hang detector.
"""
from __future__ import annotations

import json
import os
import signal

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed

from quickcode.backend.auth import hash_token, issue, revoke
from quickcode.backend.launch import free_port
from tests.support import fake_serve
from tests.conftest import ARTIFACTS
from tests.support.waits import HANG_S, until
from tests.support.ws_helpers import assert_nothing_queued, complete, http_get, open_session, recv


def opens(url: str, token: str):
    """(connection, welcome) if `token` opens a session now, else None (closed 4401)."""
    try:
        return open_session(url, token=token, timeout_s=10)
    except ConnectionClosed as e:
        assert e.rcvd is not None and e.rcvd.code == 4401, e
        return None


def refused(url: str, token: str) -> str:
    """The close reason of a session `token` cannot open."""
    with pytest.raises(ConnectionClosed) as e:
        ws, _ = open_session(url, token=token, timeout_s=10)
        ws.recv(timeout=10)
    assert e.value.rcvd.code == 4401
    return e.value.rcvd.reason


def samples(http_url: str, token: str) -> dict[tuple[str, tuple], float]:
    status, body = http_get(f"{http_url}/metrics", token=token)
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}


def replace(path, text: str | bytes) -> None:
    """Write a new version of the file in one step, as `quickcode token revoke` does."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    os.replace(tmp, path)


def user_requests(m: dict, user: str) -> float:
    return m.get(("quickcode_user_requests_total", (("user", user),)), 0.0)


def test_a_token_added_works_a_removed_one_is_refused_and_only_its_sessions_close(fake_backend, tmp_path):
    tokens = tmp_path / "tokens"
    alice, bob = issue(tokens, "alice"), issue(tokens, "bob")
    b = fake_backend(auth_tokens_file=tokens)       # the default poll interval
    before = samples(b.http_url, alice)
    ws_a, welcome_a = open_session(b.ws_url, token=alice)
    ws_b, _ = open_session(b.ws_url, token=bob)
    ws_b2, _ = open_session(b.ws_url, token=bob)
    assert complete(ws_a, "a1").kind == "done" and complete(ws_b, "b1").kind == "done"

    carol = issue(tokens, "carol")
    ws_c, _ = until(lambda: opens(b.ws_url, carol), "carol's new token to open a session")
    assert complete(ws_c, "c1").kind == "done"

    assert revoke(tokens, "bob") == 1
    for ws in (ws_b, ws_b2):                         # each of bob's open sessions: a typed error, then 4401
        frame = recv(ws, HANG_S)
        assert frame["kind"] == "error" and frame["code"] == "unauthorized" and "revoked" in frame["message"]
        with pytest.raises(ConnectionClosed) as e:
            ws.recv(timeout=HANG_S)
        assert e.value.rcvd.code == 4401 and e.value.rcvd.reason == "unauthorized: API token revoked"
    assert "unauthorized" in refused(b.ws_url, bob)
    status, _ = http_get(f"{b.http_url}/v1/models", token=bob)
    assert status == 401

    # alice's session is the same one, was sent nothing meanwhile, and serves; so does carol's
    assert_nothing_queued(ws_a)
    assert complete(ws_a, "a2").kind == "done" and complete(ws_c, "c2").kind == "done"
    ws_a.close()
    ws_c.close()
    after = samples(b.http_url, alice)
    assert after[("quickcode_sessions_revoked_total", ())] - before[("quickcode_sessions_revoked_total", ())] == 2
    assert after[("quickcode_auth_tokens", ())] == 2
    grew = {u: user_requests(after, u) - user_requests(before, u) for u in ("alice", "bob", "carol")}
    assert grew == {"alice": 2, "bob": 1, "carol": 2}


def test_a_bad_version_of_the_file_keeps_the_previous_tokens_and_says_why(fake_backend, tmp_path, caplog):
    tokens = tmp_path / "tokens"
    alice = issue(tokens, "alice")
    good = tokens.read_text()
    b = fake_backend(auth_tokens_file=tokens, tokens_reload_s=0.2)
    ws_a, _ = open_session(b.ws_url, token=alice)
    pasted = "qc_" + "x" * 43
    bad_versions = {
        "garbage": f"{good}this is not a token line\ndave:{pasted}\nmallory:{'z' * 64}\n",
        "binary": b"\x89PNG\r\n\x1a\n\x00\x00",
        "empty": "",
        "missing": None,
    }
    for name, text in bad_versions.items():
        refused_before = samples(b.http_url, alice)[("quickcode_auth_tokens_reloads_total", (("result", "refused"),))]
        if text is None:
            tokens.unlink()
        else:
            replace(tokens, text)

        def refused_now() -> bool:
            m = samples(b.http_url, alice)
            return m[("quickcode_auth_tokens_reloads_total", (("result", "refused"),))] > refused_before
        until(refused_now, f"the {name} version of the tokens file to be refused")
        ws, _ = open_session(b.ws_url, token=alice)           # the previous tokens are still in force
        ws.close()
        assert complete(ws_a, f"a-{name}").kind == "done"
    said = [r.getMessage() for r in caplog.records if r.name == "quickcode.auth" and r.levelname == "ERROR"]
    assert len(said) == len(bad_versions) and all("NOT reloaded" in s for s in said)
    assert "line 2: not user:sha256hex[:team]" in said[0] and "line 3: this looks like a token" in said[0]
    assert "line 4: the hash is not 64 hex digits" in said[0] and pasted not in "".join(said)
    assert "not UTF-8" in said[1] and "no tokens in it" in said[2] and "cannot read it" in said[3]

    erin = issue(tokens, "erin")                              # a good version again: it is installed
    replace(tokens, good + f"erin:{hash_token(erin)}\n")
    until(lambda: opens(b.ws_url, erin), "the good version after the bad ones to be installed")
    assert complete(ws_a, "a-after").kind == "done"
    ws_a.close()


def test_an_open_server_counts_every_request_under_one_fixed_user_label(fake_backend):
    b = fake_backend()
    before = samples(b.http_url, "")
    for _ in range(2):
        ws, _ = open_session(b.ws_url)
        assert complete(ws, "q").kind == "done"
        ws.close()
    after = samples(b.http_url, "")
    assert user_requests(after, "open") - user_requests(before, "open") == 2
    assert not [k for k in after if k[0] == "quickcode_user_requests_total" and "anon" in str(k[1])]


def test_sighup_reloads_the_tokens_of_a_serving_process(tmp_path):
    tokens = tmp_path / "tokens"
    alice = issue(tokens, "alice")
    b = fake_serve.start(ARTIFACTS / "logs" / "backend-sighup.log", free_port(),
                         "--set", f"auth_tokens_file={tokens}", "--set", "tokens_reload_s=0")
    try:
        ws, _ = open_session(b.ws_url, token=alice)
        carol = issue(tokens, "carol")
        assert opens(b.ws_url, carol) is None        # no polling (tokens_reload_s = 0): the file waits for SIGHUP
        os.kill(b.pid, signal.SIGHUP)
        ws_c, _ = until(lambda: opens(b.ws_url, carol), lambda: f"SIGHUP to reload:\n{b.log_tail()}")
        assert b.proc.poll() is None
        assert complete(ws, "a1").kind == "done" and complete(ws_c, "c1").kind == "done"
        ws.close()
        ws_c.close()
    finally:
        b.stop()


def test_json_logs_carry_an_access_line_per_completion(tmp_path):
    tokens = tmp_path / "tokens"
    alice = issue(tokens, "alice")
    log_path = ARTIFACTS / "logs" / "backend-json-logs.log"
    b = fake_serve.start(log_path, free_port(), "--set", f"auth_tokens_file={tokens}", "--set", "log_format=json",
                         "--set", "access_log=true", "--set", "log_level=info")
    hostile_id = 'q2\n2026-01-01 INFO forged line user="root"'
    try:
        ws, _ = open_session(b.ws_url, token=alice)
        assert complete(ws, "q1").kind == "done" and complete(ws, hostile_id).kind == "done"
        ws.close()
        r = httpx.post(f"{b.http_url}/v1/completions", headers={"Authorization": f"Bearer {alice}"},
                       json={"prompt": "def f():\n    ", "max_tokens": 4}, timeout=30)
        assert r.status_code == 200
    finally:
        b.stop()
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]               # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert any(r["logger"].startswith("uvicorn") for r in records)   # uvicorn's own lines too
    access = [r for r in records if r["logger"] == "quickcode.access"]
    assert [r["route"] for r in access] == ["ws", "ws", "/v1/completions"]
    first = access[0]
    assert first["request_id"].endswith(":q1") and first["user"] == "alice" and first["status"] in ("stop", "length")
    assert first["output_tokens"] > 0 and first["prompt_tokens"] > 0 and first["total_ms"] >= first["queue_ms"] >= 0
    assert {"ttft_ms", "first_chunk_ms", "cached_tokens"} <= first.keys()
    assert access[1]["request_id"].endswith(hostile_id)            # the client's id is a value, never a line
