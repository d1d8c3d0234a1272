"""Tenancy (who shares prefix-cache blocks), the bind policy, and the tokens file's records and permissions."""
from __future__ import annotations

import os
import stat

import pytest

from quickcode.backend.auth import TokenStore, hash_token, issue, revoke
from quickcode.backend.tenancy import BindRefused, Tenancy, check_bind, is_loopback, resolve_isolation


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("127.8.0.3", True), ("::1", True), ("[::1]", True),
                                        ("localhost", True), ("0.0.0.0", False), ("::", False),
                                        ("192.168.1.5", False), ("example.com", False), ("", False)])
def test_loopback(host, loop):
    assert is_loopback(host) is loop


def test_auto_isolation_is_per_user_unless_an_open_loopback_server():
    assert resolve_isolation("auto", True, "127.0.0.1") == "user"
    assert resolve_isolation("auto", True, "0.0.0.0") == "user"
    assert resolve_isolation("auto", False, "0.0.0.0") == "user"     # allow_open: every session its own tenant
    assert resolve_isolation("auto", False, "127.0.0.1") == "shared"  # one developer's own machine
    assert resolve_isolation("team", True, "0.0.0.0") == "team"
    assert resolve_isolation("shared", True, "0.0.0.0") == "shared"


def test_salts_separate_users_or_teams_and_shared_has_none():
    users = Tenancy("user", {"alice": "blue", "bob": "blue"})
    assert users.cache_salt("alice") != users.cache_salt("bob")
    assert users.cache_salt("alice") == users.cache_salt("alice") and len(users.cache_salt("alice")) == 64
    teams = Tenancy("team", {"alice": "blue", "bob": "blue", "carol": "red"})
    assert teams.cache_salt("alice") == teams.cache_salt("bob") != teams.cache_salt("carol")
    # a user without a team record is alone, and cannot pose as a team of that name
    assert teams.cache_salt("blue") not in (teams.cache_salt("alice"), teams.cache_salt("carol"))
    assert Tenancy("shared", {}).cache_salt("alice") is None


def test_an_open_server_beyond_loopback_needs_consent(caplog):
    check_bind("127.0.0.1", tokens_enabled=False, allow_open=False)
    check_bind("0.0.0.0", tokens_enabled=True, allow_open=False)
    with pytest.raises(BindRefused) as ei:
        check_bind("0.0.0.0", tokens_enabled=False, allow_open=False)
    assert "without API tokens" in str(ei.value.code) and "allow_open=true" in str(ei.value.code)
    check_bind("0.0.0.0", tokens_enabled=False, allow_open=True)
    assert "OPEN SERVER" in caplog.text


def test_tokens_file_is_created_0600_with_teams(tmp_path, monkeypatch):
    created_modes = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *a, **kw):
        if flags & os.O_CREAT:
            created_modes.append(mode)
        return real_open(path, flags, mode, *a, **kw)

    monkeypatch.setattr(os, "open", spy)
    f = tmp_path / "tokens"
    ta = issue(f, "alice", "blue")
    tb = issue(f, "bob")
    assert created_modes and all(m == 0o600 for m in created_modes)   # created private, never chmodded after
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert f.read_text() == f"alice:{hash_token(ta)}:blue\nbob:{hash_token(tb)}\n"
    store = TokenStore(f)
    assert store.user_for(ta) == "alice" and store.user_for(tb) == "bob" and store.user_for("qc_x") is None
    assert store.team_of == {"alice": "blue", "bob": "bob"}
    assert revoke(f, "alice") == 1 and stat.S_IMODE(f.stat().st_mode) == 0o600
    assert TokenStore(f).user_for(ta) is None and TokenStore(f).user_for(tb) == "bob"
    for bad in ("a:b", "a b", ""):
        with pytest.raises(ValueError):
            issue(f, bad)
