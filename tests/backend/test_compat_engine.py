"""The compatible endpoints on the real engine (the session's vLLM backend over the committed tiny models):
the `openai` and `ollama` clients and llama.vim's /infill request get completions, and Continue's pre-templated
prompt gives the text of the suffix form. Shapes and their sources: tests/backend/test_compat_api.py."""
from __future__ import annotations

import httpx
import ollama
import openai
import pytest

from tests.backend.test_compat_api import LLAMA_VIM_FIELDS, MODEL, llama_vim_request

pytestmark = [pytest.mark.engine]

PREFIX = "import os\nimport sys\n\n\ndef main():\n    for name in os.listdir('.'):\n        print(name"
SUFFIX = ")\n\n\nif __name__ == '__main__':\n    main()\n"


def test_openai_models_and_continue_template_on_vllm(backend):
    with openai.OpenAI(base_url=f"{backend.http_url}/v1", api_key="x", max_retries=0, timeout=120) as c:
        assert [m.id for m in c.models.list().data] == [MODEL]
        suffix_form = c.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=12, temperature=0)
        # continuedev/continue core/autocomplete/templating/AutocompleteTemplate.ts stableCodeFimTemplate
        templated = c.completions.create(model=MODEL, max_tokens=12, temperature=0,
                                         prompt=f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>",
                                         stop=["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>",
                                               "<|endoftext|>", "</fim_middle>", "</code>"])
    print(f"\nsuffix form {suffix_form.choices[0].text!r}, Continue template {templated.choices[0].text!r}")
    assert suffix_form.usage.completion_tokens > 0
    assert templated.choices[0].text == suffix_form.choices[0].text
    assert templated.usage.prompt_tokens == suffix_form.usage.prompt_tokens


def test_ollama_client_on_vllm(backend):
    client = ollama.Client(host=backend.http_url, timeout=120)
    assert [m.model for m in client.list().models] == [MODEL]
    out = client.generate(model=MODEL, prompt=PREFIX, suffix=SUFFIX, options={"num_predict": 12, "temperature": 0})
    streamed = "".join(p.response for p in client.generate(model=MODEL, prompt=PREFIX, suffix=SUFFIX, stream=True,
                                                           options={"num_predict": 12, "temperature": 0}))
    print(f"\nollama: {out.response!r} ({out.eval_count} tokens)")
    assert out.done and out.eval_count > 0 and streamed == out.response


def test_llama_vim_infill_on_vllm(backend):
    lines, cur = PREFIX.rsplit("\n", 1)
    with httpx.Client(timeout=120) as http:
        r = http.post(f"{backend.http_url}/infill", json=llama_vim_request(lines + "\n", cur, SUFFIX, []))
    assert r.status_code == 200, r.text
    body = r.json()
    print(f"\nllama.vim /infill: {body['content']!r}")
    # the prompt: prefix + suffix tokens and the FIM markers (ten with the embedded model's SPM, which has no
    # middle token after the prefix)
    assert set(body) == set(LLAMA_VIM_FIELDS) and body["timings/predicted_n"] > 0 and body["timings/prompt_n"] >= 10
