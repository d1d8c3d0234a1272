"""/debug/*: off unless enabled, the admin token only, typed values; client state files created 0600.

Here with quickcode/backend/: the /debug/ endpoints are the subject; the client's state files ride along."""
from __future__ import annotations

import os
import stat

import pytest
from fastapi.testclient import TestClient

from quickcode.backend.app import create_app
from quickcode.backend.auth import hash_token
from quickcode.backend.service import CompletionService
from quickcode.backend.settings import Settings

ADMIN, USER = "qc_admin-token", "qc_user-token"


def app_with_service(**over):
    """The real app and completion service; the engine is never started (the lifespan does not run)."""
    s = Settings(spec_method="off", auth_tokens=f"alice:{hash_token(USER)}", **over)
    app = create_app(s)
    app.state.backend.service = CompletionService(s, app.state.backend.engine)
    return app, app.state.backend.service


def test_debug_is_off_by_default():
    app, svc = app_with_service(admin_token_sha256=hash_token(ADMIN))
    client = TestClient(app)
    for token in (None, USER):
        r = client.post("/debug/scheduler", json={"mode": "fifo"},
                        headers={"Authorization": f"Bearer {token}"} if token else {})
        assert r.status_code == 401
    r = client.post("/debug/scheduler", json={"mode": "fifo"}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 404 and svc.sched.cfg.mode == "latency"        # no such route


def test_debug_needs_an_admin_token_configured():
    with pytest.raises(ValueError, match="admin_token_sha256"):
        app_with_service(debug_endpoints=True)


def test_debug_takes_only_the_admin_token_and_typed_values():
    app, svc = app_with_service(debug_endpoints=True, admin_token_sha256=hash_token(ADMIN))
    client = TestClient(app)
    url = "/debug/scheduler"
    assert client.post(url, json={"mode": "fifo"}).status_code == 401
    assert client.post(url, json={"mode": "fifo"}, headers={"Authorization": f"Bearer {USER}"}).status_code == 401
    admin = {"Authorization": f"Bearer {ADMIN}"}
    assert svc.sched.cfg.shed_enabled is True
    r = client.post(url, json={"shed_enabled": "false", "mode": "fifo", "max_running": "3"}, headers=admin)
    assert r.status_code == 200, r.text
    assert r.json()["shed_enabled"] is False and svc.sched.cfg.shed_enabled is False      # "false" is false
    assert svc.sched.cfg.mode == "fifo" and svc.sched.cfg.max_running == 3
    for bad in ({"shed_enabled": "maybe"}, {"mode": "lifo"}, {"max_running": 0}, {"max_running": "x"},
                {"unknown": 1}, {"rates": {"prefill_tok_s": -1}}, {"rates": "fast"}):
        r = client.post(url, json=bad, headers=admin)
        assert r.status_code == 400, (bad, r.text)
    assert svc.sched.cfg.shed_enabled is False and svc.sched.cfg.max_running == 3       # nothing half-applied
    r = client.post(url, json={"mode": "priority", "admit_cap": 6}, headers=admin)
    assert r.status_code == 200 and r.json()["admit_cap"] == 6 and svc.sched.cfg.mode == "priority"
    assert client.post(url, json={"admit_cap": -1}, headers=admin).status_code == 400
    r = client.post(url, json={"rates": {"decode_tok_s": 123.0}}, headers=admin)
    assert r.status_code == 200 and r.json()["rates"]["decode_tok_s"] == 123.0
    line = [[t, 0.05 + t / 2000] for t in (10, 100, 400, 800, 1200, 1500, 200, 50)]
    r = client.post(url, json={"rates": {"prefill_samples": line}}, headers=admin)     # an A/B run's restore
    assert r.status_code == 200 and r.json()["rates"]["step_s"] == pytest.approx(0.05)
    assert svc.sched.rates.prefill_tok_s == pytest.approx(2000) and len(r.json()["rates"]["prefill_samples"]) == 8
    too_many = {"rates": {"prefill_samples": [[1, 1.0]] * 65}}
    assert client.post(url, json=too_many, headers=admin).status_code == 400


def test_client_state_files_are_created_private(tmp_path, monkeypatch):
    from quickcode.lsp_client.debounce import AdaptiveDebounce
    from quickcode.lsp_client.predictor import AcceptancePredictor

    created = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *a, **kw):
        if flags & os.O_CREAT:
            created.append((str(path), mode))
        return real_open(path, flags, mode, *a, **kw)

    monkeypatch.setattr(os, "open", spy)
    state = tmp_path / "state"
    (state / "pauses.tmp").parent.mkdir()
    (state / "pauses.tmp").write_text("old")             # a leftover temporary file, 0644
    os.chmod(state / "pauses.tmp", 0o644)
    AdaptiveDebounce().save(state / "pauses.json")
    AcceptancePredictor().save(state / "predictor.json")
    assert len(created) == 2 and all(mode == 0o600 for _, mode in created), created
    for name in ("pauses.json", "predictor.json"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600
