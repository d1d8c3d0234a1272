"""Shared fixtures. One real backend (`quickcode serve`, real vLLM on the committed tiny models) per test
session, started on first use by any test marked `engine`; editor and LSP tests reuse it (`vllm_server`: vLLM's
own OpenAI-compatible server, for the remote engine's test). `fake_backend` starts
in-process backends (real uvicorn, real sockets) over a `FakeEngine`, for tests of our own code; `fake` is one
such backend shared by a module's tests, whose text depends on the whole prompt (`prompt_words`).

`make test` runs the suite on two pytest-xdist workers: tests/support/xdist_groups.py says which tests share one."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from quickcode.backend.launch import RunningBackend, start_backend, stop_backend
from tests.support import xdist_groups

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts"

# Plumbing tests run on the light profile (the committed 4.2M target: seconds to start, milliseconds a token),
# in this process and in every backend it starts; tests of the default profile ask for it by name.
os.environ.setdefault("QUICKCODE_PROFILE", "light")


def pytest_configure(config):
    xdist_groups.announce(config)


def pytest_unconfigure(config):
    xdist_groups.forget(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return xdist_groups.make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    by_id = xdist_groups.units(items, REPO)
    xdist_groups.order_first(items, by_id)
    xdist_groups.write_units(config, by_id)


# healing off: speculating, the backend heals by vLLM's allowed_token_ids, which the plain greedy reference of
# tests/draft_model/test_draft_equivalence.py cannot follow (tests/backend/test_heal_speculating.py has its own)
SESSION_BACKEND_SETTINGS = {"spec_method": "draft", "heal_token": False}


@pytest.fixture(scope="session")
def backend() -> RunningBackend:
    """The session's one real backend (vLLM engine with the draft model, prefix caching).

    QUICKCODE_TEST_BACKEND_PORT=<port> reuses a `quickcode serve` you already run (development only)."""
    port = os.environ.get("QUICKCODE_TEST_BACKEND_PORT")
    if port:
        yield RunningBackend(int(port), None, Path(os.devnull))
        return
    # the draft, as the GPU profile runs it (the embedded default decodes plainly): speculation's path, its
    # metrics and its token-identical output stay under test
    sets = [f"{k}={v}" for k, v in SESSION_BACKEND_SETTINGS.items()]
    b = start_backend(ARTIFACTS / "logs" / "backend-session.log", *sets, timeout_s=400)
    yield b
    stop_backend(b)


@pytest.fixture(scope="session")
def vllm_server():
    """vLLM's own OpenAI-compatible server on the committed tiny target, once per session (the engine test of
    `engine = "openai"`, tests/backend/test_remote_engine.py): 30-60 s to start, both cores while it does.

    QUICKCODE_TEST_VLLM_PORT=<port> reuses one you already run with `start_vllm_server`'s flags (development
    only; its one model is found by name)."""
    from quickcode.backend.launch import VllmServer, start_vllm_server

    port = os.environ.get("QUICKCODE_TEST_VLLM_PORT")
    if port:
        yield VllmServer(int(port), None, Path(os.devnull))
        return
    server = start_vllm_server(ARTIFACTS / "logs" / "vllm-server-session.log", REPO / "models" / "target",
                               served_model_name="tiny-remote", timeout_s=400)
    yield server
    stop_backend(server)


def prompt_words(prompt: str) -> list[str]:
    """A `FakeEngine` script: 40 tokens that depend on the whole prompt (a changed prompt, a changed text)."""
    h = sum(ord(c) * (i + 1) for i, c in enumerate(prompt)) % 1000
    return [f" w{(h + 7 * i) % 1000}" for i in range(40)]


def fake_settings(**overrides):
    """The settings of the tests' in-process backends: no speculative decoding, and no drain at the end (a
    test's stop need not wait for requests it left running). No token healing past the space: its mask is
    the real engine's (tests/backend/test_logits_engine.py), a fake's script only imitates it; the service's side of
    it is tested on its own (test_backend_service.py). The same for every FakeEngine's settings."""
    from quickcode.backend.settings import Settings

    return Settings(**{"spec_method": "off", "heal_token": False, "shutdown_drain_s": 0.0, "replica_id": "fake",
                       **overrides})


@contextmanager
def fake_server(script=None, **overrides):
    """`with fake_server(script, **settings) as b:` an `InProcessBackend` over a `FakeEngine` writing `script`
    (default: a fixed few tokens), for a module's shared backend."""
    from quickcode.backend.fake_engine import FakeEngine
    from quickcode.backend.launch import InProcessBackend

    s = fake_settings(**overrides)
    with InProcessBackend(s, FakeEngine(s, script=script)) as b:
        yield b


@pytest.fixture(scope="module")
def fake():
    """One in-process backend for the module's tests over a `FakeEngine` writing `prompt_words`: the same text
    means the same prompt (tests that only ask and compare answers; those that need settings of their own or
    an engine's exact counts use `fake_backend`)."""
    with fake_server(prompt_words) as b:
        yield b


@pytest.fixture
def fake_backend():
    """`fake_backend(engine=None, *, wait_ready=True, **settings)` → a started `InProcessBackend` over a
    `FakeEngine` (the given one, or a default one on these settings); all are stopped after the test."""
    from quickcode.backend.fake_engine import FakeEngine
    from quickcode.backend.launch import InProcessBackend

    started = []

    def make(engine=None, *, wait_ready: bool = True, **overrides):
        settings = fake_settings(**overrides)
        b = InProcessBackend(settings, engine or FakeEngine(settings), wait_ready=wait_ready)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()
