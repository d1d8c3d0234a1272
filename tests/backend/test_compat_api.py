"""The compatible endpoints (quickcode/backend/compat_api.py) with the clients and request shapes that use
them.

Official clients: `openai` (`/v1/models`, `/v1/completions`) and `ollama` (`/api/generate`, `/api/tags`).
Exact request shapes copied from the plugins' source:
- llama.vim, ggml-org/llama.vim `autoload/llama.vim` (`llama#fim`: the FIM request with `response_fields`;
  `s:ring_update`: the `n_predict: 0` warm-up of the extra context);
- llama.vscode, ggml-org/llama.vscode `src/llama-server.ts` (`createRequestPayload`);
- Continue, continuedev/continue `core/autocomplete/templating/AutocompleteTemplate.ts`
  (`stableCodeFimTemplate`: the pre-templated prompt and its stop list) and `core/llm/llms/Ollama.ts`
  (`_getGenerateOptions`: prompt + suffix, raw, options).
The server is the real one (uvicorn, HTTP, SSE/NDJSON) over the fake engine, whose text depends on the whole
prompt: the same text means the same prompt. tests/backend/test_compat_engine.py runs the clients on vLLM.
"""
from __future__ import annotations

import httpx
import ollama
import openai
import pytest
from tokenizers import Tokenizer

from quickcode.backend.auth import hash_token
from quickcode.backend.checks import check_complete
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.launch import InProcessBackend
from quickcode.backend.settings import Settings
from quickcode.protocol import Complete, ErrorCode, ProtocolError, Snippet
from tests.conftest import prompt_words
from tests.support.ws_helpers import complete, http_get, open_session

MODEL = "quickcode-embedded"
PREFIX = "def area(w, h):\n    return w"
SUFFIX = " * h\n\n\nprint(area(2, 3))\n"          # text after the cursor on its line: a FIM prompt


def ws_text(fake, prefix: str, suffix: str, max_tokens: int, **fields) -> str:
    ws, _ = open_session(fake.ws_url)
    with ws:
        r = complete(ws, "ref", prefix, suffix=suffix, max_tokens=max_tokens, **fields)
    assert r.kind == "done", r
    return r.text


def requests_served(fake) -> float:
    body = http_get(f"{fake.http_url}/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith("quickcode_requests_total{"))


# ── OpenAI

def test_openai_client_lists_the_served_model(fake):
    with openai.OpenAI(base_url=f"{fake.http_url}/v1", api_key="x", max_retries=0) as c:
        models = c.models.list()
    assert [m.id for m in models.data] == [MODEL] and models.data[0].owned_by == "quickcode"


def test_continue_pretemplated_prompt_gives_the_suffix_forms_text(fake):
    """Continue's stableCodeFimTemplate `<fim_prefix>{{{prefix}}}<fim_suffix>{{{suffix}}}<fim_middle>` sent as
    the whole prompt, with its stop list: the markers are the model's FIM tokens, so the completion is the one
    of prompt + suffix (the embedded model's real order is SPM: the prompt is rebuilt, not passed as text)."""
    continue_stop = ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>", "<|endoftext|>",
                     "</fim_middle>", "</code>"]
    with openai.OpenAI(base_url=f"{fake.http_url}/v1", api_key="x", max_retries=0) as c:
        templated = c.completions.create(model=MODEL, prompt=f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>",
                                         max_tokens=8, temperature=0, stop=continue_stop)
        suffix_form = c.completions.create(model=MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=8, temperature=0)
        # another family's markers are not this model's tokens: plain text, another prompt
        as_text = c.completions.create(model=MODEL, prompt=f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
                                       max_tokens=8, temperature=0)
    assert templated.choices[0].text == suffix_form.choices[0].text == ws_text(fake, PREFIX, SUFFIX, 8)
    assert templated.usage.prompt_tokens == suffix_form.usage.prompt_tokens
    assert as_text.choices[0].text != suffix_form.choices[0].text     # a different prompt: the check can fail


def test_a_prompt_with_more_than_the_template_goes_to_the_model_as_its_tokens(fake):
    tok = fake.engine.tokenizer
    prompt = f"<file_sep>util.py\ndef helper(): pass\n<file_sep>main.py\n<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>"
    before = set(fake.engine.requests)
    with openai.OpenAI(base_url=f"{fake.http_url}/v1", api_key="x", max_retries=0) as c:
        out = c.completions.create(model=MODEL, prompt=prompt, max_tokens=4)
    (new,) = [r for k, r in fake.engine.requests.items() if k not in before]
    as_tokens = Tokenizer.from_file(str(fake.settings.target_path / "tokenizer.json")).encode(prompt).ids
    assert new.prompt_ids == as_tokens                         # special tokens as themselves, nothing added
    assert new.prompt_ids[0] == tok.token_to_id("<file_sep>") and new.prompt_ids[-1] == tok.token_to_id("<fim_middle>")
    assert out.usage.prompt_tokens == len(new.prompt_ids)


def test_a_file_that_spells_the_markers_is_text_when_the_request_gives_a_suffix(fake):
    """A prompt + suffix request is the text around the cursor, whatever it spells: a file that writes the
    model's FIM tokens (quickcode/backend/fim_templates.py does) longer than the prompt budget is cut and
    completed as the WebSocket would, the markers in it text — not refused as a prompt the client templated
    itself."""
    tok = fake.engine.tokenizer
    markers = [tok.token_to_id(n) for n in ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")]
    prefix = "".join(f"# <fim_prefix>{i}<fim_suffix>x<fim_middle>\n" for i in range(1000)) + PREFIX
    before = set(fake.engine.requests)
    with openai.OpenAI(base_url=f"{fake.http_url}/v1", api_key="x", max_retries=0) as c:
        out = c.completions.create(model=MODEL, prompt=prefix, suffix=SUFFIX, max_tokens=8, temperature=0)
        at_end = c.completions.create(model=MODEL, prompt=prefix, suffix="", max_tokens=8, temperature=0)
    sent = [r for k, r in fake.engine.requests.items() if k not in before]
    assert out.choices[0].text == ws_text(fake, prefix, SUFFIX, 8)
    assert at_end.choices[0].text == ws_text(fake, prefix, "", 8)
    counts = [sent[0].prompt_ids.count(m) for m in markers]
    assert counts[:2] == [1, 1] and counts[2] <= 1          # the template's own only (SPM: no middle token)
    assert out.usage.prompt_tokens <= fake.backend.service.prompt_budget_tokens


# ── Ollama

def test_ollama_client_generates_with_suffix_streaming_or_not(fake):
    """Continue's Ollama request (`_getGenerateOptions`): prompt, suffix, raw, options, keep_alive, stream."""
    client = ollama.Client(host=fake.http_url)
    opts = {"temperature": 0.0, "num_predict": 8, "stop": ["<|endoftext|>"], "top_p": 0.9, "num_ctx": 4096}
    whole = client.generate(model=MODEL, prompt=PREFIX, suffix=SUFFIX, options=opts, keep_alive=1800, raw=False)
    parts = list(client.generate(model=MODEL, prompt=PREFIX, suffix=SUFFIX, options=opts, stream=True))
    assert whole.done and whole.done_reason == "length" and whole.eval_count == 8
    assert whole.response == ws_text(fake, PREFIX, SUFFIX, 8)
    assert "".join(p.response for p in parts) == whole.response and parts[-1].done and not parts[0].done
    assert whole.prompt_eval_count > 10 and whole.total_duration > 0


def test_ollama_raw_pretemplated_prompt_is_the_suffix_form(fake):
    client = ollama.Client(host=fake.http_url)
    raw = client.generate(model=MODEL, prompt=f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>", raw=True,
                          options={"num_predict": 6})
    assert raw.response == client.generate(model=MODEL, prompt=PREFIX, suffix=SUFFIX, options={"num_predict": 6}).response


def test_ollama_model_list_version_and_show(fake):
    client = ollama.Client(host=fake.http_url)
    assert [m.model for m in client.list().models] == [MODEL]
    shown = client.show(MODEL)
    assert ".Suffix" in shown.template and "insert" in shown.capabilities   # Continue: FIM supported
    with httpx.Client() as http:
        assert http.get(f"{fake.http_url}/api/version").json()["version"].count(".") == 2
        r = http.post(f"{fake.http_url}/api/generate", json={"model": MODEL, "prompt": "x", "options": {"num_predict": "lots"}})
        assert r.status_code == 400 and "num_predict" in r.json()["error"]
        r = http.post(f"{fake.http_url}/api/generate", json={"model": MODEL, "prompt": "x", "stream": False,
                                                              "options": {"num_predict": 10**6}})
        assert r.status_code == 200 and r.json()["eval_count"] <= 256       # capped at max_tokens_limit


# ── llama.cpp server

LLAMA_VIM_FIELDS = ["content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms",
                    "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms",
                    "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached"]


def llama_vim_request(prefix_lines: str, line_prefix: str, suffix: str, extra: list[dict]) -> dict:
    """llama#fim's json_encode({...}) in ggml-org/llama.vim autoload/llama.vim, field for field."""
    return {"input_prefix": prefix_lines, "input_suffix": suffix, "input_extra": extra, "prompt": line_prefix,
            "n_predict": 8, "n_indent": 4, "top_k": 40, "top_p": 0.99, "stream": False,
            "samplers": ["top_k", "top_p", "infill"], "cache_prompt": True, "t_max_prompt_ms": 500,
            "t_max_predict_ms": 1500, "response_fields": LLAMA_VIM_FIELDS}


def test_llama_vim_infill_request_gets_a_completion(fake):
    lines, cur = PREFIX.rsplit("\n", 1)
    extra = [{"text": "def volume(w, h, d):\n    return w * h * d\n", "time": [1732, 5], "filename": "geo.py"}]
    with httpx.Client(timeout=30) as http:
        r = http.post(f"{fake.http_url}/infill", json=llama_vim_request(lines + "\n", cur, SUFFIX, extra))
    assert r.status_code == 200
    body = r.json()
    assert set(body) == set(LLAMA_VIM_FIELDS)      # only those, nested ones by their flat "a/b" key, as llama.cpp
    assert body["content"] == ws_text(fake, PREFIX, SUFFIX, 8, snippets=[{"path": "geo.py", "text": extra[0]["text"]}])
    assert body["timings/predicted_n"] == 8 and body["timings/prompt_n"] > 10 and body["truncated"] is False


def test_llama_vims_full_ring_on_wide_code_is_cut_not_refused(fake):
    """llama.vim's defaults (a ring of 16 chunks of 64 lines, 256 lines of prefix) on 100-character lines send
    ~130,000 characters, past `max_prompt_chars`: the oldest chunks go (llama.cpp keeps the newest extra
    context), then the prefix's head — every request of such a user was refused before."""
    line = "x = compute_something(alpha, beta, gamma) + other_value * factor  # a wide line of code......\n"
    extra = [{"text": f"# chunk {i}\n" + line * 64, "time": [i, 0], "filename": f"f{i}.py"} for i in range(16)]
    prefix = line * 256
    with httpx.Client(timeout=30) as http:
        r = http.post(f"{fake.http_url}/infill", json=llama_vim_request(prefix, "y = ", SUFFIX, extra))
    assert r.status_code == 200, r.text
    limit = fake.settings.max_prompt_chars
    assert len(prefix) + len(SUFFIX) + sum(len(c["text"]) for c in extra) > limit
    room, kept = limit - len(prefix + "y = ") - len(SUFFIX), []
    for c in reversed(extra):                                  # the newest chunks that fit
        room -= len(c["text"]) + len(c["filename"])
        if room < 0:
            break
        kept.insert(0, c)
    assert 0 < len(kept) < len(extra)
    snippets = [{"path": c["filename"], "text": c["text"]} for c in kept]
    assert r.json()["content"] == ws_text(fake, prefix + "y = ", SUFFIX, 8, snippets=snippets)


def test_llama_vim_ring_update_warmup_generates_nothing(fake):
    """s:ring_update: input_prefix/suffix empty, the chunks in input_extra, n_predict 0, response_fields [""]."""
    chunk = {"text": "import os\n", "time": [1, 2], "filename": "a.py"}
    body = {"input_prefix": "", "input_suffix": "", "input_extra": [chunk], "prompt": "", "n_predict": 0,
            "temperature": 0.0, "stream": False, "samplers": [], "cache_prompt": True, "t_max_prompt_ms": 1,
            "t_max_predict_ms": 1, "response_fields": [""]}
    before = set(fake.engine.requests)
    with httpx.Client(timeout=30) as http:
        r = http.post(f"{fake.http_url}/infill", json=body)
    assert r.status_code == 200 and r.json() == {}
    (new,) = [r for k, r in fake.engine.requests.items() if k not in before]
    assert new.max_tokens == 1 and "import os" in fake.engine.tokenizer.decode(new.prompt_ids)


def test_llama_vscode_infill_request_and_stream(fake):
    """createRequestPayload(false, …) of ggml-org/llama.vscode src/llama-server.ts."""
    lines, cur = PREFIX.rsplit("\n", 1)
    payload = {"input_prefix": lines + "\n", "input_suffix": SUFFIX, "input_extra": [], "prompt": cur, "n_predict": 8,
               "top_k": 40, "top_p": 0.99, "stream": False, "samplers": ["top_k", "top_p", "infill"],
               "cache_prompt": True, "n_indent": 4, "t_max_prompt_ms": 500, "t_max_predict_ms": 2500}
    with httpx.Client(timeout=30) as http:
        r = http.post(f"{fake.http_url}/infill", json=payload)
        assert r.status_code == 200
        body = r.json()
        assert body["stop"] is True and body["tokens_predicted"] == 8 and body["timings"]["predicted_n"] == 8
        assert body["content"] == ws_text(fake, PREFIX, SUFFIX, 8)
        with http.stream("POST", f"{fake.http_url}/infill", json={**payload, "stream": True}) as s:
            events = [line[6:] for line in s.iter_lines() if line.startswith("data: ")]
    import json
    parsed = [json.loads(e) for e in events]
    assert "".join(p["content"] for p in parsed) == body["content"] and parsed[-1]["stop"] and not parsed[0]["stop"]


def test_infill_errors_have_llama_cpp_shape(fake):
    with httpx.Client(timeout=30) as http:
        r = http.post(f"{fake.http_url}/infill", content=b"{not json")
        assert r.status_code == 400 and set(r.json()["error"]) == {"code", "message", "type"}
        r = http.post(f"{fake.http_url}/infill", json={"input_prefix": "x", "n_predict": 2, "temperature": 5})
        assert r.status_code == 400 and "temperature" in r.json()["error"]["message"]
        assert set(r.json()["error"]) == {"code", "message", "type"}


def test_compat_requests_go_through_the_shared_service(fake):
    before = requests_served(fake)
    with httpx.Client(timeout=30) as http:
        http.post(f"{fake.http_url}/infill", json={"input_prefix": "x = ", "n_predict": 2})
        http.post(f"{fake.http_url}/api/generate", json={"prompt": "y = ", "stream": False, "options": {"num_predict": 2}})
    assert requests_served(fake) - before == 2


def test_auth_applies_to_every_compat_endpoint(fake_backend):
    b = fake_backend(auth_tokens=f"alice:{hash_token('qc_alice')}")
    with httpx.Client(timeout=30) as http:
        assert http.get(f"{b.http_url}/v1/models").status_code == 401
        assert http.get(f"{b.http_url}/api/tags").status_code == 401
        # refused by the HTTP gate before any route (quickcode/backend/http_gate.py), in each API's error
        # shape
        r = http.post(f"{b.http_url}/infill", json={"input_prefix": "x", "n_predict": 1})
        assert r.status_code == 401 and r.json()["error"]["code"] == 401
        r = http.post(f"{b.http_url}/api/generate", json={"prompt": "x"})
        assert r.status_code == 401 and isinstance(r.json()["error"], str)
        good = {"Authorization": "Bearer qc_alice"}
        assert http.get(f"{b.http_url}/v1/models", headers=good).status_code == 200
        r = http.post(f"{b.http_url}/api/generate", json={"prompt": "x", "stream": False, "options": {"num_predict": 2}},
                      headers=good)
        assert r.status_code == 200 and r.json()["done"]
    client = ollama.Client(host=b.http_url, headers={"Authorization": "Bearer qc_alice"})
    assert client.generate(model=MODEL, prompt="def f():", options={"num_predict": 2}).done


def test_a_byo_qwen_folder_gets_its_preset_through_every_endpoint(tmp_path):
    """A model folder with Qwen2.5's real vocabulary and no quickcode_fim.json (the fake engine reads only its
    config and tokenizer; vLLM serves the same folder with weights in tests/backend/test_byo_model.py): WebSocket,
    OpenAI, Ollama and llama.cpp requests all reach the engine as Qwen2.5-Coder's FIM prompt."""
    import json

    from tests.support import vocab

    folder = tmp_path / "qwen"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(vocab.qwen25_tokenizer_json())
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    s = Settings(spec_method="off", heal_token=False, model=folder, fim_policy="always", heal_space=False, shutdown_drain_s=0.5)
    ref = vocab.qwen_reference()
    want = [151659, *ref.encode(PREFIX, allowed_special=set()), 151661, *ref.encode(SUFFIX, allowed_special=set()),
            151660]
    with InProcessBackend(s, FakeEngine(s, script=prompt_words)) as b:
        assert b.engine.template.name == "qwen2.5-coder"
        texts = [ws_text(b, PREFIX, SUFFIX, 4)]
        with openai.OpenAI(base_url=f"{b.http_url}/v1", api_key="x", max_retries=0) as c:
            texts.append(c.completions.create(model="m", prompt=PREFIX, suffix=SUFFIX, max_tokens=4).choices[0].text)
            texts.append(c.completions.create(model="m", max_tokens=4, stop=["<|fim_pad|>", "<|file_sep|>"],
                                              prompt=f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>"
                                              ).choices[0].text)
        texts.append(ollama.Client(host=b.http_url).generate(model="m", prompt=PREFIX, suffix=SUFFIX,
                                                             options={"num_predict": 4}).response)
        lines, cur = PREFIX.rsplit("\n", 1)
        with httpx.Client(timeout=30) as http:
            texts.append(http.post(f"{b.http_url}/infill", json={"input_prefix": lines + "\n", "prompt": cur,
                                                                  "input_suffix": SUFFIX, "n_predict": 4}).json()["content"])
        prompts = [r.prompt_ids for r in b.engine.requests.values()]
    assert prompts == [want] * 5
    assert len(set(texts)) == 1 and texts[0]


def test_a_lone_surrogate_is_read_as_the_web_reads_it_on_a_tokenizer_without_the_fast_path(tmp_path):
    """Python's JSON parser (FastAPI's, /v1/completions) lets `\\ud800` through — a JS editor's broken text —
    and a tokenizer encoding the text itself (DeepSeek's, the profile's SmolLM2) raised on it: a 500 and a reset
    connection. Now it is U+FFFD, as a browser's TextEncoder writes it, and the request is served; a Complete that
    still holds one anywhere gets a typed error, never an exception."""
    import json

    from tests.support import vocab

    folder = tmp_path / "deepseek"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(vocab.deepseek_tokenizer().to_str())
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    s = Settings(spec_method="off", heal_token=False, model=folder, shutdown_drain_s=0.5)
    raw = b'{"prompt": "x = \\ud800", "suffix": "\\udfff\\n", "stop": ["\\udc00"], "max_tokens": 4}'
    with InProcessBackend(s, FakeEngine(s, script=prompt_words)) as b, httpx.Client(timeout=30) as http:
        r = http.post(f"{b.http_url}/v1/completions", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == ws_text(b, "x = \ufffd", "\ufffd\n", 4)
    # the WebSocket's parser (orjson) refuses such a frame (`bad_json`); any other way in meets the check
    with pytest.raises(ProtocolError) as refused:
        check_complete(Complete(id="lone", prefix="x", snippets=[Snippet(path="a.py", text="\ud800")]), s)
    assert refused.value.code == ErrorCode.BAD_VALUE and "surrogate" in refused.value.message
