"""`best_of` (quickcode/backend/rerank.py through the service): the greedy line and sampled ones, each scored in the code
around it, the best sent whole — over real WebSockets and HTTP to a real uvicorn server on the `FakeEngine`
(its samples tell themselves apart by `sample_marker`; its `scorer` stands for the model's likelihood). What
vLLM returns for samples and prompt logprobs is tested on the real engine in test_backend_engine.py."""
from __future__ import annotations

import itertools
import json

import pytest

from quickcode.backend.fake_engine import FakeEngine, ManualClock, sample_marker
from tests.conftest import fake_settings
from tests.support.waits import until
from tests.support.ws_helpers import complete, open_session, recv

LINES = {"": ["    return", " a", "\n", "    more"]} | {sample_marker(i): [f"    return b{i}", "\n", "    x"]
                                                          for i in range(8)}


def script(prompt: str):
    for marker, toks in LINES.items():
        if marker and prompt.endswith(marker):
            return toks
    return LINES[""]


def wants(word: str):
    """A scorer that likes the window holding `word` (the model's likelihood, as a test states it)."""
    def score(ids, first):
        return 0.0 if word in engine_text(ids) else -10.0
    return score


def engine_text(ids) -> str:
    return TOK.decode(ids)


TOK = None


@pytest.fixture
def backend(fake_backend):
    global TOK

    def make(scorer, **settings):
        global TOK
        s = fake_settings(**settings)
        engine = FakeEngine(s, script=script, scorer=scorer)
        b = fake_backend(engine, **settings)
        TOK = engine.tokenizer
        return b, engine
    return make


def test_the_line_the_code_around_it_likes_best_is_sent_whole_in_one_chunk(backend):
    b, engine = backend(wants("b3"))
    ws, _ = open_session(b.ws_url)
    r = complete(ws, "r1", "def f(a, b):\n", suffix="\nprint(f(1, 2))\n", best_of=5, max_tokens=16)
    assert (r.kind, r.finish_reason, r.text, r.chunks) == ("done", "stop", "    return b3\n", 1)
    ids = sorted(k.rsplit(":", 1)[1] for k in engine.requests)
    # the greedy line, 4 samples, and a score for each distinct line (5)
    assert ids == sorted(["r1-g-0", *(f"r1-n-{i}" for i in range(4)), *(f"r1-s-s{i}" for i in range(5))]), ids
    assert all(r.state == "finished" for r in engine.requests.values())


def test_the_greedy_line_wins_a_tie_and_best_of_1_streams_the_plain_completion(backend):
    b, _ = backend(lambda ids, first: 0.0)
    ws, _ = open_session(b.ws_url)
    assert complete(ws, "r1", "def f(a, b):\n", best_of=4).text == "    return a\n"
    plain = complete(ws, "r2", "def f(a, b):\n", best_of=1, max_tokens=16)
    assert plain.text == "    return a\n    more" and plain.chunks == 4


def test_the_client_stop_strings_still_cut_the_line(backend):
    b, _ = backend(lambda ids, first: -10.0 if "return a" in engine_text(ids) else 0.0)
    ws, _ = open_session(b.ws_url)
    assert complete(ws, "r1", "x = 1\n", best_of=3, stop=[" b"]).text == "    return"   # not "    return b1"


@pytest.mark.parametrize("best_of", [-1, 10, 1000])
def test_best_of_out_of_range_is_a_typed_error(backend, best_of):
    b, _ = backend(wants("b1"))
    ws, _ = open_session(b.ws_url)
    r = complete(ws, "r1", "x = 1\n", best_of=best_of)
    assert (r.kind, r.code) == ("error", "bad_value") and "best_of" in r.terminal["message"]


def test_the_openai_endpoint_takes_best_of_and_the_servers_default(backend):
    import httpx

    b, _ = backend(wants("b1"), completions_best_of=3)
    body = {"prompt": "def f(a, b):\n", "suffix": "\n", "max_tokens": 16}
    with httpx.Client() as c:
        assert c.post(b.http_url + "/v1/completions", json=body).json()["choices"][0]["text"] == "    return b1\n"
        one = c.post(b.http_url + "/v1/completions", json={**body, "best_of": 1}).json()
        assert one["choices"][0]["text"] == "    return a\n    more"
        bad = c.post(b.http_url + "/v1/completions", json={**body, "best_of": 12})
        assert bad.status_code == 400 and "best_of" in bad.json()["error"]["message"]


def test_cancelling_a_best_of_request_aborts_every_engine_request(fake_backend):
    clock = ManualClock()
    s = fake_settings()
    engine = FakeEngine(s, script=lambda prompt: itertools.repeat(" x"), clock=clock)
    b = fake_backend(engine)
    ws, _ = open_session(b.ws_url)
    ws.send(json.dumps({"kind": "complete", "id": "r1", "prefix": "x = ", "best_of": 4, "max_tokens": 256}))
    until(lambda: len([r for r in engine.requests.values() if r.state == "running"]) == 4, "4 running", poll_s=0.002)
    ws.send(json.dumps({"kind": "cancel", "id": "r1"}))
    m = recv(ws, 5)
    assert (m["kind"], m["finish_reason"]) == ("done", "cancelled"), m
    until(lambda: engine.stats.num_running == engine.stats.num_waiting == 0, "engine idle", poll_s=0.002)
    assert {r.finish_reason for r in engine.requests.values()} == {"abort"}
