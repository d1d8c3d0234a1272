"""The first token of a server started beyond loopback with none configured (auth_bootstrap_dir, what the container
images set): the real server in its own process (tests/support/fake_serve.py, `quickcode serve`'s run over the fake
engine) starts, says why in its log, serves only with the token it made, and a restart keeps that token."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from quickcode.backend import first_token
from quickcode.backend.auth import hash_token
from quickcode.backend.launch import free_port
from quickcode.backend.settings import Settings
from tests.support import fake_serve
from tests.support.ws_helpers import complete, http_get, open_session

REASON = "no API tokens are configured"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_first_start_makes_one_token_says_why_and_a_restart_keeps_it(tmp_path):
    state = tmp_path / "state"
    log1, log2 = tmp_path / "first.log", tmp_path / "second.log"
    port = free_port()
    b = fake_serve.start(log1, port, "--host", "0.0.0.0", "--auth-bootstrap-dir", str(state))
    try:
        token = (state / first_token.INITIAL).read_text().strip()
        tokens_text = (state / first_token.TOKENS).read_text()
        assert f"{first_token.USER}:{hash_token(token)}" in tokens_text.splitlines()
        assert _mode(state / first_token.INITIAL) == 0o600 and _mode(state / first_token.TOKENS) == 0o600
        assert http_get(f"{b.http_url}/metrics")[0] == 401          # not open
        assert http_get(f"{b.http_url}/metrics", token=token)[0] == 200
        ws, welcome = open_session(b.ws_url, token=token)
        with ws:
            assert complete(ws, "r1", max_tokens=4).terminal["kind"] == "done"
        log = log1.read_text()
        assert REASON in log and "beyond loopback" in log and str(state / first_token.INITIAL) in log, log
        assert token not in log                                      # the log is kept elsewhere: never the token
    finally:
        b.stop()
    b = fake_serve.start(log2, port, "--host", "0.0.0.0", "--auth-bootstrap-dir", str(state))
    try:
        assert (state / first_token.TOKENS).read_text() == tokens_text      # no second token
        assert http_get(f"{b.http_url}/metrics", token=token)[0] == 200
        assert REASON not in log2.read_text()                               # said once, at the first start
    finally:
        b.stop()


@pytest.mark.parametrize("given,expected", [
    ({}, True),
    ({"auth_tokens": "alice:" + "0" * 64}, False),          # tokens given: they are used, nothing is made
    ({"auth_tokens_file": Path("tokens")}, False),
    ({"host": "127.0.0.1"}, False),                          # loopback: one developer's own machine, open
    ({"allow_open": True}, False),                           # the operator chose an open server
    ({"auth_bootstrap_dir": None}, False),                   # not asked for: the bind is refused as before
])
def test_a_token_is_made_only_where_the_bind_would_be_refused(tmp_path, given, expected):
    s = Settings(**{"host": "0.0.0.0", "auth_bootstrap_dir": tmp_path, **given})
    assert first_token.needed(s) is expected
    out = first_token.ensure(s)
    assert (out.auth_tokens_file == tmp_path / first_token.TOKENS) is expected
    assert (tmp_path / first_token.TOKENS).exists() is expected


def test_a_folder_it_cannot_write_is_said_in_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    s = Settings(host="0.0.0.0", auth_bootstrap_dir=tmp_path / "file" / "state")
    with pytest.raises(SystemExit, match="auth_bootstrap_dir .*file/state"):
        first_token.ensure(s)
