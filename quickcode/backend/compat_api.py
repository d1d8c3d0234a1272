"""The HTTP shapes other completion clients already speak, over the same completion service as /v1/ws.

- `GET /v1/models` (OpenAI: clients list models before they complete);
- llama.cpp server `POST /infill` (llama.vim, llama.vscode): `input_prefix` + `prompt` (the cursor line's
  start) + `input_suffix`, `input_extra` chunks as other files' snippets, `n_predict` (0: a KV warm-up),
  `stream` (SSE), `response_fields`; `cache_prompt` is always on here (vLLM's prefix cache);
- Ollama `POST /api/generate` (Continue, Twinny, Zed…): `prompt` + `suffix`, `raw`, `stream` (NDJSON, on by
  default as in Ollama), `options.num_predict/temperature/stop`; `GET /api/tags`, `GET /api/version`,
  `POST /api/show` (whose template shows `.Suffix`: how Continue decides that a model can infill).

Each request is a one-request session of its user: the same auth, rate limits, scheduler (newest first,
shedding), metrics and engine aborts as the WebSocket. A prompt without a suffix that already holds the
served model's FIM tokens is understood as them; with a suffix it is text (quickcode/backend/fim_templates.py
`client_prompt`). Errors use each API's own shape.
"""
from __future__ import annotations

import secrets
import time
from datetime import datetime, timezone
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quickcode.backend.fim_templates import client_prompt, drop_special_stops
from quickcode.backend.openai_api import QueueSink, _STATUS
from quickcode.protocol import (
    Chunk, Complete, Done, Error, ErrorCode, FinishReason, ProtocolError, Snippet, within_budget,
)

OLLAMA_API_VERSION = "0.6.3"     # the Ollama release whose /api shapes these follow (clients gate on it)
OLLAMA_UNAUTHORIZED = "unauthorized: missing or invalid API token"
DEFAULT_PREDICT = 64             # llama.cpp's and Ollama's "-1 / unset" (until the end): capped for an editor


class ExtraChunk(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = ""
    filename: str = ""


class InfillBody(BaseModel):
    """llama.cpp server's /infill (tools/server/README.md); other sampler fields are accepted and ignored."""
    model_config = ConfigDict(extra="ignore")
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraChunk] = Field(default_factory=list)
    prompt: str = ""
    n_predict: int = -1
    temperature: float = 0.0
    stop: list[str] = Field(default_factory=list)
    stream: bool = False
    cache_prompt: bool = True
    response_fields: list[str] | None = None


class OllamaOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    num_predict: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None


class GenerateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str = ""
    prompt: str = ""
    suffix: str | None = None
    raw: bool = False
    stream: bool = True
    options: OllamaOptions = Field(default_factory=OllamaOptions)


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0] if e.errors() else {}
    return ".".join(str(x) for x in err.get("loc", [])) + ": " + err.get("msg", "invalid request")


def _predict(n: int | None, limit: int) -> int:
    return DEFAULT_PREDICT if n is None or n < 0 else min(n, limit)


class _Run:
    """One request through the completion service; `frames()` yields its Chunk/Done/Error, always ends it."""

    def __init__(self, backend, user: str | None, msg: Complete, prompt_ids: list[int] | None, route: str):
        self.svc = backend.service
        self.sid = "http-" + secrets.token_hex(6)
        self.sink = QueueSink()
        self.t0 = time.perf_counter()
        self.svc.submit(self.sink, self.sid, user or f"anon:{self.sid}", msg, self.t0, prompt_ids, route)

    async def frames(self):
        try:
            while True:
                m = await self.sink.q.get()
                yield m
                if isinstance(m, (Done, Error)):
                    return
        finally:   # also when the client went away mid-stream: the engine request is aborted
            self.svc.drop_session(self.sid)

    async def collect(self) -> tuple[str, Done | Error]:
        parts = []
        async for m in self.frames():
            if isinstance(m, Chunk):
                parts.append(m.text)
            else:
                return "".join(parts), m


def register(app: FastAPI, backend) -> None:
    settings = backend.settings

    def engine_bits():
        eng = backend.engine
        return getattr(eng, "tokenizer", None), getattr(eng, "template", None)

    # ── what /infill and /api/generate share; `error(status, message)` makes each API's own error shape
    async def admit(request: Request, body_type: type[BaseModel], error, unauthorized: str):
        """(user, body, None) of an authorised request with a valid body, else (None, None, the error
        reply)."""
        ok, user = backend.user_for(request.headers, request.query_params)
        if not ok:
            return None, None, error(401, unauthorized)
        try:
            return user, body_type.model_validate_json(await request.body()), None
        except ValidationError as e:
            return None, None, error(400, _first_error(e))

    def start(user: str | None, msg: Complete, prompt_ids: list[int] | None, error,
              route: str) -> _Run | JSONResponse:
        try:
            return _Run(backend, user, msg, prompt_ids, route)
        except ProtocolError as e:
            return error(_STATUS.get(e.code, 400), e.message)

    async def whole(run: _Run, final, error):
        """The non-streamed reply: `final(text, done)`, or the error the run ended with."""
        text, end = await run.collect()
        if isinstance(end, Error):
            return error(_STATUS.get(ErrorCode(end.code), 500), end.message)
        return final(text, end)

    # ── OpenAI: the model list
    @app.get("/v1/models")
    async def models(request: Request):
        ok, _ = backend.user_for(request.headers, request.query_params)
        if not ok:
            err = {"message": "missing or invalid API token", "type": "authentication_error", "param": None,
                   "code": ErrorCode.UNAUTHORIZED.value}
            return JSONResponse({"error": err}, status_code=401)
        started = int(time.time() - (time.monotonic() - backend.started_s))
        return {"object": "list", "data": [{"id": settings.served_model_name, "object": "model",
                                            "created": started, "owned_by": "quickcode"}]}

    # ── llama.cpp server
    def llama_error(status: int, message: str) -> JSONResponse:
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "unavailable_error",
                503: "unavailable_error"}.get(status, "server_error")
        return JSONResponse({"error": {"code": status, "message": message, "type": kind}}, status_code=status)

    @app.post("/infill")
    async def infill(request: Request):
        user, body, refused = await admit(request, InfillBody, llama_error, "Invalid API Key")
        if refused is not None:
            return refused
        tok, template = engine_bits()
        stop = drop_special_stops(tok, body.stop, template)
        snippets = [Snippet(path=c.filename or "extra", text=c.text) for c in body.input_extra if c.text]
        # llama.vim's ring of chunks grows past the limit on wide code: its oldest chunks go first (llama.cpp
        # keeps the newest extra context too)
        prefix, suffix, snippets = within_budget(body.input_prefix + body.prompt, body.input_suffix, snippets,
                                                 settings.max_prompt_chars, drop_from_front=True)
        warmup = body.n_predict == 0                 # llama.vim's ring-buffer update: cache the context only
        msg = Complete(id="infill-" + secrets.token_hex(6), prefix=prefix,
                       suffix=suffix, max_tokens=_predict(body.n_predict if not warmup else 1,
                                                          settings.max_tokens_limit),
                       temperature=body.temperature, stop=stop, prefill_only=warmup, snippets=snippets)
        run = start(user, msg, None, llama_error, "/infill")
        if isinstance(run, JSONResponse):
            return run

        def final(text: str, d: Done) -> dict:
            t = d.timing
            prompt_ms, predicted_ms = t.ttft_ms + t.queue_ms, t.generate_ms
            stop_type = "limit" if d.finish_reason == FinishReason.LENGTH else "eos"
            out = {"content": text, "id_slot": 0, "stop": True, "model": settings.served_model_name,
                   "tokens_predicted": t.output_tokens, "tokens_evaluated": t.prompt_tokens,
                   "generation_settings": {"n_predict": msg.max_tokens, "temperature": msg.temperature,
                                           "stop": stop},
                   "prompt": "", "has_new_line": "\n" in text, "truncated": False, "stop_type": stop_type,
                   "stopping_word": "", "tokens_cached": t.cached_tokens,
                   "timings": {"prompt_n": t.prompt_tokens - t.cached_tokens, "prompt_ms": prompt_ms,
                               "prompt_per_token_ms": prompt_ms / max(1, t.prompt_tokens - t.cached_tokens),
                               "prompt_per_second": 1000 * (t.prompt_tokens - t.cached_tokens) / prompt_ms
                               if prompt_ms else 0.0,
                               "predicted_n": t.output_tokens, "predicted_ms": predicted_ms,
                               "predicted_per_token_ms": predicted_ms / max(1, t.output_tokens),
                               "predicted_per_second": t.tokens_per_s},
                   "quickcode": {"finish_reason": d.finish_reason.value}}
            if body.response_fields is not None:     # llama.cpp: only these, nested ones by their "a/b" path
                picked = {}
                for f in body.response_fields:
                    v: Any = out
                    for part in f.split("/"):
                        v = v.get(part) if isinstance(v, dict) else None
                    if v is not None:
                        picked[f] = v
                return picked
            return out

        if not body.stream:
            return await whole(run, final, llama_error)

        async def events():
            parts = []
            async for m in run.frames():
                if isinstance(m, Chunk):
                    parts.append(m.text)
                    yield b"data: " + orjson.dumps({"content": m.text, "stop": False, "id_slot": 0}) + b"\n\n"
                elif isinstance(m, Error):
                    err = {"code": 500, "message": m.message, "type": "server_error"}
                    yield b"error: " + orjson.dumps(err) + b"\n\n"
                else:
                    yield b"data: " + orjson.dumps({**final("".join(parts), m), "content": ""}) + b"\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # ── Ollama
    def ollama_error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    def now_iso() -> str:
        return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")

    @app.post("/api/generate")
    async def generate(request: Request):
        user, body, refused = await admit(request, GenerateBody, ollama_error, OLLAMA_UNAUTHORIZED)
        if refused is not None:
            return refused
        model = body.model or settings.served_model_name
        if not body.prompt and body.suffix is None:   # Ollama: an empty prompt loads the model, nothing more
            return {"model": model, "created_at": now_iso(), "response": "", "done": True,
                    "done_reason": "load"}
        tok, template = engine_bits()
        prefix, suffix, ids = client_prompt(tok, template, body.prompt, body.suffix)
        prefix, suffix, _ = within_budget(prefix, suffix, [], settings.max_prompt_chars)
        opts = body.options
        msg = Complete(id="gen-" + secrets.token_hex(6), prefix=prefix, suffix=suffix,
                       max_tokens=_predict(opts.num_predict, settings.max_tokens_limit),
                       temperature=opts.temperature or 0.0,
                       stop=drop_special_stops(tok, opts.stop or [], template))
        run = start(user, msg, ids, ollama_error, "/api/generate")
        if isinstance(run, JSONResponse):
            return run

        def final(text: str, d: Done) -> dict:
            t = d.timing
            return {"model": model, "created_at": now_iso(), "response": text, "done": True,
                    "done_reason": "length" if d.finish_reason == FinishReason.LENGTH else "stop",
                    "context": [],
                    "total_duration": int(t.total_ms * 1e6), "load_duration": 0,
                    "prompt_eval_count": t.prompt_tokens,
                    "prompt_eval_duration": int((t.queue_ms + t.ttft_ms) * 1e6),
                    "eval_count": t.output_tokens, "eval_duration": int(t.generate_ms * 1e6)}

        if not body.stream:
            return await whole(run, final, ollama_error)

        async def lines():
            async for m in run.frames():
                if isinstance(m, Chunk):
                    yield orjson.dumps({"model": model, "created_at": now_iso(), "response": m.text,
                                        "done": False}) + b"\n"
                elif isinstance(m, Error):
                    yield orjson.dumps({"error": m.message}) + b"\n"
                else:
                    yield orjson.dumps(final("", m)) + b"\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    def model_entry() -> dict:
        _, template = engine_bits()
        return {"name": settings.served_model_name, "model": settings.served_model_name,
                "modified_at": now_iso(), "size": 0, "digest": "",
                "details": {"parent_model": "", "format": "safetensors",
                            "family": getattr(template, "name", ""),
                            "families": None, "parameter_size": "", "quantization_level": settings.precision}}

    @app.get("/api/tags")
    async def tags(request: Request):
        ok, _ = backend.user_for(request.headers, request.query_params)
        if not ok:
            return ollama_error(401, OLLAMA_UNAUTHORIZED)
        return {"models": [model_entry()]}

    @app.get("/api/version")
    async def version():
        return {"version": OLLAMA_API_VERSION}

    @app.post("/api/show")
    async def show(request: Request):
        ok, _ = backend.user_for(request.headers, request.query_params)
        if not ok:
            return ollama_error(401, OLLAMA_UNAUTHORIZED)
        entry = model_entry()
        # what Ollama's template of an infilling model looks like: the server builds the FIM prompt itself
        tmpl = "{{- if .Suffix }}<fim: {{ .Prompt }} | {{ .Suffix }}>{{- else }}{{ .Prompt }}{{- end }}"
        return {"modelfile": "", "parameters": "", "template": tmpl, "details": entry["details"],
                "model_info": {}, "capabilities": ["completion", "insert"],
                "modified_at": entry["modified_at"]}
