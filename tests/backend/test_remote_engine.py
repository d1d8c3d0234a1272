"""`engine = "openai"`: the backend in front of vLLM's own OpenAI-compatible server — a real one on the committed
tiny target (tests/conftest.py `vllm_server`), reached through `quickcode.backend.remote_engine.RemoteEngine`.

Completions stream through our WebSocket protocol with the text the server writes for our token ids; a superseded
request is aborted on the server (its own /metrics: only the newer request finished, and the older one generated
far fewer tokens than it asked for); each user's prefix cache stays theirs (`cache_salt`); a server that does not
serve the model, or serves it with another tokenizer, is refused at start with the reason.
"""
from __future__ import annotations

import hashlib
import json
import random
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from quickcode.backend.fim import complete_prompt
from quickcode.backend.launch import InProcessBackend
from quickcode.backend.remote_engine import RemoteEngine
from quickcode.backend.settings import Settings
from quickcode.protocol import Complete
from tests.support import vocab
from tests.conftest import REPO
from tests.support.waits import until
from tests.support.ws_helpers import complete, http_get, open_session, read_until_terminal, recv

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ALICE, BOB = "qc_remote-alice-token", "qc_remote-bob-token"
# greedy on the tiny target this runs to its max_tokens (a numbered comment line, repeated), never to a stop
LONG_PROMPT = "# a list of numbers\nvalues = [1, 2, 3,"
LONG_TOKENS = 200
SUPERSEDE_TRIES = 3
HANG_S = 60.0        # a hang detector for what the server's metrics must come to, far beyond it on a loaded machine


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def settings(server, **overrides) -> Settings:
    # the folder the server serves (a bare Settings takes its model from the embedded profile)
    return Settings(**{"model": REPO / "models" / "target", "engine": "openai", "engine_url": server.base_url,
                       "engine_model": server.model,
                       "engine_priority": True, "auth_tokens": f"alice:{sha(ALICE)},bob:{sha(BOB)}",
                       "replica_id": "remote", "shutdown_drain_s": 0.0, **overrides})


@pytest.fixture(scope="module")
def remote(vllm_server):
    with InProcessBackend(settings(vllm_server)) as b:
        yield b


def server_metrics(server, token: str | None = None) -> dict[tuple[str, tuple], float]:
    """A server's /metrics (vLLM's, or our backend's with a token): {(sample name, sorted label items without
    engine/model): value}."""
    status, body = http_get(f"{server.http_url}/metrics", token=token, timeout_s=10)
    assert status == 200, body
    text = body.decode()
    out: dict[tuple[str, tuple], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("engine", "model_name")))
            out[(s.name, labels)] = out.get((s.name, labels), 0.0) + s.value
    return out


def finished_by_itself(m: dict) -> float:
    """Requests the server finished (stop or length): an aborted one is not among them."""
    return sum(m.get(("vllm:request_success_total", (("finished_reason", r),)), 0.0) for r in ("stop", "length"))


def direct(remote, ids: list[int], max_tokens: int) -> dict:
    """The same token ids straight to the server, greedy, with a salt of their own (no cache shared with ours)."""
    body = {"model": remote.engine.model, "prompt": ids, "max_tokens": max_tokens, "temperature": 0.0,
            "stop_token_ids": list(remote.engine.template.stop_ids), "cache_salt": f"direct-{random.random()}"}
    req = urllib.request.Request(f"{remote.settings.engine_url}/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=HANG_S) as r:
        return json.loads(r.read())["choices"][0]


def prompt_ids(remote, prefix: str, suffix: str = "") -> list[int]:
    """The ids the service builds for a `complete` of `prefix` (no text given back to the model: it does not end
    in a space)."""
    svc = remote.backend.service
    ids, healed = complete_prompt(Complete(id="x", prefix=prefix, suffix=suffix), remote.settings,
                                  remote.engine.tokenizer, remote.engine.template, svc.prompt_budget_tokens)
    assert healed == ""
    return ids


def test_completions_stream_through_the_websocket_with_the_servers_text(remote):
    prefix = "def add(a, b):\n    return"
    ws, welcome = open_session(remote.ws_url, token=ALICE)
    with ws:
        assert welcome["max_prompt_tokens"] == 512 - remote.settings.reserve_output_tokens   # the server's context
        r = complete(ws, "s1", prefix, max_tokens=8)
        assert r.kind == "done" and r.finish_reason in ("length", "stop"), r.terminal
        assert r.chunks >= 2 and r.terminal["timing"]["output_tokens"] >= 2, r     # streamed, token by token
        assert r.text == direct(remote, prompt_ids(remote, prefix), 8)["text"]
        # a prefetch carries vLLM's priority 1 (the server schedules by priority): served as well
        p = complete(ws, "p1", prefix + " a", max_tokens=4, priority="prefetch")
        assert p.kind == "done" and p.text, p.terminal
    assert remote.call(lambda: remote.engine.stats.num_running) == 0


def test_each_user_hits_only_their_own_prefix_cache_on_the_server(remote):
    rng = random.Random()
    secret = "".join(f"    secret_{rng.getrandbits(40):x} = {rng.getrandbits(30)}\n" for _ in range(12))
    prompt = "def load_credentials():\n" + secret           # over 3 blocks of 32 tokens
    ours = server_metrics(remote, ALICE)
    a, _ = open_session(remote.ws_url, token=ALICE)
    b, _ = open_session(remote.ws_url, token=BOB)
    with a, b:
        first = complete(a, "a1", prompt, max_tokens=1)
        assert first.kind == "done" and first.terminal["timing"]["prompt_tokens"] >= 96, first.terminal
        again = complete(a, "a2", prompt, max_tokens=2)
        assert again.kind == "done" and again.terminal["timing"]["cached_tokens"] >= 64, again.terminal
        probe = complete(b, "b1", prompt, max_tokens=2)
        assert probe.kind == "done" and probe.terminal["timing"]["cached_tokens"] == 0, probe.terminal
        own = complete(b, "b2", prompt, max_tokens=2)
        assert own.kind == "done" and own.terminal["timing"]["cached_tokens"] >= 64, own.terminal
    # our own metrics over the remote engine: each request's first token timed, the cache hits it reported
    after = server_metrics(remote, ALICE)
    delta = {k: after.get(k, 0.0) - ours.get(k, 0.0) for k in after}
    assert delta[("quickcode_engine_ttft_seconds_count", ())] == 4
    hits = again.terminal["timing"]["cached_tokens"] + own.terminal["timing"]["cached_tokens"]
    assert delta[("quickcode_prefix_cache_hits_tokens_total", ())] == hits


def test_a_superseded_request_is_aborted_on_the_server(remote, vllm_server):
    """vLLM 0.32 counts no client abort in `vllm:request_success_total` (an abort is no finish): the server's own
    evidence is that, of the two requests, only the newer one finished, with nothing left running or waiting,
    and that fewer tokens were generated than the older one alone would have run to. The newer request is sent
    once the older one streams; a fast engine under a loaded machine can finish the older one first (a race the
    machine's speed decides), so that is tried again, a few times: with aborts broken, every try finishes it."""
    ids = prompt_ids(remote, LONG_PROMPT)
    assert direct(remote, ids, LONG_TOKENS)["finish_reason"] == "length"    # unaborted, it runs all the way
    for _ in range(SUPERSEDE_TRIES):
        wait_idle(vllm_server)
        before = server_metrics(vllm_server)
        ws, _ = open_session(remote.ws_url, token=ALICE)
        with ws:
            ws.send(json.dumps({"kind": "complete", "id": "old", "prefix": LONG_PROMPT, "max_tokens": LONG_TOKENS}))
            first = recv(ws, HANG_S)
            assert first["kind"] == "chunk" and first["id"] == "old", first    # running on the server
            ws.send(json.dumps({"kind": "complete", "id": "new", "prefix": "def add(a, b):\n    return",
                                "max_tokens": 4}))
            old = read_until_terminal(ws, "old", timeout_s=HANG_S)
            new = read_until_terminal(ws, "new", timeout_s=HANG_S)
            assert new.kind == "done" and new.finish_reason in ("length", "stop"), new.terminal
        if old.finish_reason != "length":
            break
    assert old.kind == "done" and old.finish_reason == "superseded", old.terminal
    deadline = time.monotonic() + HANG_S
    while True:
        after = server_metrics(vllm_server)
        if idle(after) and finished_by_itself(after) > finished_by_itself(before) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert idle(after), "the server still runs or queues a request"
    assert finished_by_itself(after) - finished_by_itself(before) == 1       # the new one; the old was aborted
    generated = after[("vllm:generation_tokens_total", ())] - before[("vllm:generation_tokens_total", ())]
    assert generated < LONG_TOKENS, generated
    assert remote.call(lambda: (remote.engine.stats.num_running, len(remote.engine._streams))) == (0, 0)


def idle(m: dict) -> bool:
    """A server's metrics say it runs and queues nothing."""
    return all(m.get((f"vllm:num_requests_{g}", ()), 1.0) == 0 for g in ("running", "waiting"))


def wait_idle(server) -> None:
    """Until the server runs and queues nothing (a try's requests are over before the next one's counts)."""
    until(lambda: idle(server_metrics(server)), "the server to run and queue nothing", hang_s=HANG_S, poll_s=0.1)


def test_a_model_the_server_does_not_serve_is_refused_with_the_reason(vllm_server):
    engine = RemoteEngine(settings(vllm_server, engine_model="no-such-model"))
    with pytest.raises(RuntimeError, match="does not serve engine_model 'no-such-model'"):
        engine.start()
    assert engine.dead and "no-such-model" in engine.error


def test_a_model_folder_with_another_tokenizer_is_refused(vllm_server, tmp_path):
    """Our ids are decoded by the server's tokenizer: a folder whose tokenizer is not the served model's would
    give garbage completions, so start() compares the two on a probe (vLLM's /tokenize) and refuses."""
    (tmp_path / "config.json").write_text((REPO / "models" / "target" / "config.json").read_text())
    vocab.deepseek_tokenizer().save(str(tmp_path / "tokenizer.json"))
    engine = RemoteEngine(settings(vllm_server, model=tmp_path))
    with pytest.raises(RuntimeError, match="is not the one"):
        engine.start()
    assert engine.dead and not engine.ready


def test_a_text_prompt_for_routers_that_read_strings_completes_as_the_ids_do(remote, vllm_server):
    """`engine_prompt = "text"` (for the Gateway API Inference Extension's endpoint picker): a fill-in-the-middle
    prompt, its special tokens spelled out, is tokenized back by the server into our ids: the same completion.
    (Last in the file: a second backend in this process takes over the process-wide engine metrics.)"""
    prefix, suffix = "def add(a, b):\n    return a", " + b\n\nprint(add(1, 2))\n"   # text after the cursor: FIM
    ids = prompt_ids(remote, prefix, suffix)
    assert remote.engine.template.prefix_id in ids
    with InProcessBackend(settings(vllm_server, engine_prompt="text")) as text_backend:
        ws, _ = open_session(text_backend.ws_url, token=BOB)
        with ws:
            r = complete(ws, "t1", prefix, suffix=suffix, max_tokens=6)
    assert r.kind == "done", r.terminal
    assert r.text == direct(remote, ids, 6)["text"]
