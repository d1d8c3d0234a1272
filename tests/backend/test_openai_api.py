"""The OpenAI-compatible `POST /v1/completions` with the official `openai` client.

Fill-in-the-middle (prompt + suffix), streaming and not, stop strings, max_tokens → `length`, OpenAI's error
shapes, and that it is the same service as the WebSocket: the same text for the same prompt, the same
Prometheus counters, shedding under a burst, and an aborted engine request when a stream is dropped. The
endpoint is our code: the server (uvicorn, HTTP, SSE) is the real one, in this process, over the fake engine,
whose script writes a text that depends on the whole prompt. One test runs it on vLLM (the session's backend).
(401 without a token, and 429 from the shared per-user rate limit, are in test_auth_limits.py: they need auth.)
"""
from __future__ import annotations

import asyncio
import itertools
import time

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from quickcode.backend.fake_engine import FakeEngine, ManualClock
from quickcode.backend.settings import Settings
from tests.conftest import prompt_words
from tests.support.ws_helpers import complete, http_get, open_session

MODEL = "quickcode-embedded"
PREFIX = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "
SUFFIX = "\n\n\nprint(fibonacci(10))\n"


@pytest.fixture(scope="module")
def client(fake):
    c = openai.OpenAI(base_url=f"{fake.http_url}/v1", api_key="unused-on-an-open-server", max_retries=0, timeout=60)
    yield c
    c.close()


def requests_total(backend) -> dict[str, float]:
    status, body = http_get(f"{backend.http_url}/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            if s.name == "quickcode_requests_total":
                out[s.labels["finish_reason"]] = s.value
            elif s.name in ("quickcode_running_requests", "quickcode_queued_requests"):
                out[s.name] = s.value
    return out


def delta(before: dict, after: dict) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after if after[k] != before.get(k, 0.0)}


def test_fim_non_streaming_matches_the_websocket(fake, client):
    out = client.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=12, temperature=0)
    choice = out.choices[0]
    assert out.object == "text_completion" and out.model == MODEL and out.id.startswith("cmpl-")
    assert choice.finish_reason in ("length", "stop") and isinstance(choice.text, str)
    assert 0 < out.usage.completion_tokens <= 12 and out.usage.prompt_tokens > 10
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    assert out.model_extra["quickcode"]["finish_reason"] in ("length", "stop")
    ws, _ = open_session(fake.ws_url)
    with ws:
        r = complete(ws, "same-as-http", PREFIX, suffix=SUFFIX, max_tokens=12)
        other = complete(ws, "other-prompt", PREFIX + "n", suffix=SUFFIX, max_tokens=12)
    assert r.kind == "done" and r.text == choice.text, (r.text, choice.text)   # the same FIM prompt
    assert other.text != r.text                                     # the fake's text follows the prompt


def test_fim_streaming_gives_the_same_text(client):
    whole = client.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=16).choices[0]
    stream = client.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=16, stream=True)
    parts = list(stream)
    assert len(parts) >= 2
    assert all(p.choices[0].finish_reason is None for p in parts[:-1])
    assert parts[-1].choices[0].finish_reason == whole.finish_reason
    assert "".join(p.choices[0].text for p in parts) == whole.text
    assert len({p.id for p in parts}) == 1


def test_max_tokens_ends_with_length(client):
    out = client.completions.create(model=MODEL, prompt="import os\nimport sys\nimport ", max_tokens=2)
    assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 2


def test_stop_strings_cut_the_completion(client):
    free = client.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=24).choices[0].text
    # a stop string taken from the middle of the unconstrained completion: the output must end just before it
    k = next((i for i in range(2, len(free) - 1) if free[i:i + 2].strip()), None)
    if k is None:
        pytest.fail(f"the model's completion is too short to place a stop string in: {free!r}")
    stop = free[k:k + 2]
    out = client.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=24, stop=[stop, "@@@"])
    assert out.choices[0].text == free[:free.index(stop)]
    assert out.choices[0].finish_reason == "stop"
    single = client.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=24, stop=stop)
    assert single.choices[0].text == out.choices[0].text


def test_error_shapes(fake, client):
    with pytest.raises(openai.BadRequestError) as ei:
        client.completions.create(model=MODEL, prompt="x", max_tokens=10**6)
    assert ei.value.status_code == 400 and ei.value.code == "max_tokens_too_large"
    assert ei.value.body["type"] == "invalid_request_error" and "max_tokens" in ei.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ei:
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, n=2)
    assert ei.value.code == "bad_value" and "n" in ei.value.body["message"]
    with pytest.raises(openai.BadRequestError) as ei:
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, stop=["s"] * 9)
    assert ei.value.code == "bad_value"
    with pytest.raises(openai.BadRequestError) as ei:
        client.completions.create(model=MODEL, prompt="x", max_tokens=2, extra_body={"temperature": "hot"})
    assert ei.value.code == "bad_value"
    with httpx.Client(timeout=30) as http:
        url = f"{fake.http_url}/v1/completions"
        for raw in (b"{not json", b"[]", b'{"prompt": 3}'):
            r = http.post(url, content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 400, raw
            err = r.json()["error"]
            assert set(err) == {"message", "type", "param", "code"} and err["code"] == "bad_value"
        r = http.post(url, json={"prompt": "def f():", "max_tokens": None, "temperature": None})   # nulls: defaults
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 16


def test_it_goes_through_the_same_scheduler_and_metrics(fake, client):
    before = requests_total(fake)
    for _ in range(3):
        client.completions.create(model=MODEL, prompt="class Stack:\n    def ", max_tokens=3)
    d = delta(before, requests_total(fake))
    assert sum(v for k, v in d.items() if not k.startswith("quickcode_")) == 3, d


def test_a_burst_is_shed_by_the_shared_scheduler(fake_backend):
    """More concurrent requests than the engine's slots can start within the TTFT budget (24 requests, 2 slots,
    0.2 s of scripted engine time each, a 200 ms budget): some get the immediate empty answer (`shed`), counted
    in the same quickcode_requests_total as WebSocket requests."""
    engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=prompt_words, ttft_s=0.05, per_token_s=0.01)
    b = fake_backend(engine, max_running=2, ttft_budget_ms=200)

    async def burst(n: int):
        async with openai.AsyncOpenAI(base_url=f"{b.http_url}/v1", api_key="x", max_retries=0, timeout=120) as c:
            return await asyncio.gather(*(c.completions.create(model=MODEL, prompt=f"# task {i}\ndef solve_{i}(data):\n",
                                                               max_tokens=16) for i in range(n)))
    before = requests_total(b)
    outs = asyncio.run(burst(24))
    d = delta(before, requests_total(b))
    reasons = [o.model_extra["quickcode"]["finish_reason"] for o in outs]
    shed = [o for o, r in zip(outs, reasons) if r == "shed"]
    assert shed and len(shed) < 24, reasons
    assert all(o.choices[0].text == "" and o.choices[0].finish_reason == "stop" for o in shed)
    assert d.get("shed", 0) == len(shed) and sum(v for k, v in d.items() if not k.startswith("quickcode_")) == 24, d
    assert len(engine.requests) == 24 - len(shed)                  # the shed ones never reached the engine


def test_dropping_a_stream_aborts_its_engine_request(fake_backend):
    clock = ManualClock()
    engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=lambda p: itertools.repeat(" x"), clock=clock)
    b = fake_backend(engine)
    before = requests_total(b)
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", f"{b.http_url}/v1/completions",
                         json={"prompt": "import os\n", "max_tokens": 200, "stream": True}) as r:
            clock.step(engine.ttft_s)
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    break   # first chunk seen: hang up
    (req,) = engine.requests.values()
    deadline = time.monotonic() + 10
    while req.state != "finished" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert req.finish_reason == "abort" and len(req.tokens) < 200, req     # aborted in the engine
    assert engine.stats.num_running == engine.stats.num_waiting == 0 and not engine.stats.finished
    while delta(before, requests_total(b)).get("cancelled") != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    after = requests_total(b)
    assert delta(before, after).get("cancelled") == 1 and after["quickcode_running_requests"] == 0, after
    tokens = len(req.tokens)
    clock.advance(3600.0)
    time.sleep(0.05)
    assert len(req.tokens) == tokens                                       # no token after the abort


@pytest.mark.engine
def test_the_endpoint_serves_vllms_greedy_text_as_the_websocket_does(backend):
    """On vLLM: the HTTP endpoint and the WebSocket build the same FIM prompt, so greedy output is identical."""
    with openai.OpenAI(base_url=f"{backend.http_url}/v1", api_key="unused", max_retries=0, timeout=60) as c:
        out = c.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=12, temperature=0)
    choice = out.choices[0]
    assert choice.finish_reason in ("length", "stop") and 0 < out.usage.completion_tokens <= 12
    ws, _ = open_session(backend.ws_url)
    with ws:
        r = complete(ws, "same-as-http", PREFIX, suffix=SUFFIX, max_tokens=12)
    assert r.kind == "done" and r.text == choice.text, (r.text, choice.text)
