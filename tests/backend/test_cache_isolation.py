"""The prefix cache on the real engine (vLLM, prefix caching in 32-token blocks) is per tenant: one user cannot
learn from `cached_tokens` whether another sent the same text, and each user's own repeats still hit.

A backend with two token users and the default `cache_isolation = auto` (= `user` when tokens are on). That every
way in passes its tenant's salt is tested on the fake engine (tests/backend/test_security.py); this is what vLLM does
with the salt.
"""
from __future__ import annotations

import hashlib
import os
import random
import signal

import pytest

from tests.conftest import ARTIFACTS, start_backend, stop_backend
from tests.support.ws_helpers import complete, open_session

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ALICE, BOB = "qc_cache-alice-token", "qc_cache-bob-token"
HANG_S = 60.0   # a hang detector for the exit at SIGTERM, far beyond it on a loaded machine


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture(scope="module")
def token_backend():
    b = start_backend(ARTIFACTS / "logs" / "backend-cache-isolation.log", "spec_method=off",
                      f"auth_tokens=alice:{sha(ALICE)},bob:{sha(BOB)}", "replica_id=tenants")
    yield b
    # a real vLLM backend exits cleanly on SIGTERM to its main process alone (as Kubernetes stops a pod): the
    # drain of running requests is tests/backend/test_faults_backend.py's, on the fake engine
    os.kill(b.proc.pid, signal.SIGTERM)
    try:
        b.proc.wait(HANG_S)
    finally:
        stop_backend(b)
    assert b.proc.returncode == 0, b.log_tail()


def test_a_user_cannot_probe_another_users_prefix_cache(token_backend):
    """Alice's prompt is in the prefix cache; Bob sends the same text: his `cached_tokens` is 0 (his prompt was
    computed from nothing, as if Alice's had never been sent), while Alice's own repeat hits, and so do Bob's."""
    rng = random.Random()
    secret = "".join(f"    secret_{rng.getrandbits(40):x} = {rng.getrandbits(30)}\n" for _ in range(24))
    prompt = "def load_credentials():\n" + secret          # well over 3 blocks of 32 tokens
    a, _ = open_session(token_backend.ws_url, token=ALICE)
    b, _ = open_session(token_backend.ws_url, token=BOB)
    with a, b:
        first = complete(a, "a1", prompt, max_tokens=1)
        assert first.kind == "done", first.terminal
        assert first.terminal["timing"]["prompt_tokens"] >= 96
        again = complete(a, "a2", prompt, max_tokens=1)
        assert again.kind == "done" and again.terminal["timing"]["cached_tokens"] >= 64, again.terminal
        probe = complete(b, "b1", prompt, max_tokens=1)
        assert probe.kind == "done", probe.terminal
        assert probe.terminal["timing"]["cached_tokens"] == 0, probe.terminal
        own = complete(b, "b2", prompt, max_tokens=1)            # Bob's own cache works as Alice's does
        assert own.kind == "done" and own.terminal["timing"]["cached_tokens"] >= 64, own.terminal
