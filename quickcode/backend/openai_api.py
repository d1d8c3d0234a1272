"""OpenAI-compatible `POST /v1/completions` (prompt + suffix = fill-in-the-middle), streaming (SSE) or not.

It goes through the same completion service and scheduler as the WebSocket: each HTTP request is a
one-request session, so existing plugins (Continue, llm.nvim, Zed, Tabby's OpenAI backend) share the queue,
the shedding and the metrics. Errors use OpenAI's shape: {"error": {"message", "type", "code"}}.
"""
from __future__ import annotations

import asyncio
import secrets
import time

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from quickcode.backend.checks import as_usv
from quickcode.backend.fim_templates import client_prompt, drop_special_stops
from quickcode.protocol import (
    Chunk, Complete, Done, Error, ErrorCode, FinishReason, Message, ProtocolError, within_budget,
)

_STATUS = {ErrorCode.UNAUTHORIZED: 401, ErrorCode.RATE_LIMITED: 429, ErrorCode.ENGINE_UNAVAILABLE: 503,
           ErrorCode.SHUTTING_DOWN: 503, ErrorCode.INTERNAL: 500}


class CompletionBody(BaseModel):
    model: str = ""
    prompt: str | list[str] = ""
    suffix: str | None = None
    max_tokens: int | None = 16      # null (sent by some plugins) means OpenAI's default, 16
    temperature: float | None = 0.0
    stream: bool = False
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1, le=1)
    # OpenAI's: the best of several completions, not streamable. Here: the first line, the best of the greedy
    # line and best_of - 1 samples by the likelihood of the code around it (quickcode/backend/rerank.py);
    # null: the server's `completions_best_of`
    best_of: int | None = Field(default=None, ge=1, le=9)
    user: str | None = None


class QueueSink:
    def __init__(self):
        self.q: asyncio.Queue[Message] = asyncio.Queue()

    def send(self, msg: Message) -> None:
        self.q.put_nowait(msg)


def _error(status: int, message: str, code: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}},
                        status_code=status)


def _unauthorized() -> JSONResponse:
    return _error(401, "missing or invalid API token", ErrorCode.UNAUTHORIZED.value, "authentication_error")


def register(app: FastAPI, backend) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError):
        ok, _ = backend.user_for(request.headers, request.query_params)
        if not ok:  # FastAPI validates the body before the handler runs: a stranger learns nothing from it
            return _unauthorized()
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", []) if x != "body")
        return _error(400, f"{where}: {first.get('msg', 'invalid request')}", ErrorCode.BAD_VALUE.value)

    @app.post("/v1/completions")
    async def completions(body: CompletionBody, request: Request):
        ok, user = backend.user_for(request.headers, request.query_params)
        if not ok:
            return _unauthorized()
        # FastAPI's JSON parser lets a lone surrogate through (broken text of a JS editor): read as the web
        prompt = as_usv(body.prompt if isinstance(body.prompt, str) else "".join(body.prompt[:1]))
        given_suffix = None if body.suffix is None else as_usv(body.suffix)
        tok, template = getattr(backend.engine, "tokenizer", None), getattr(backend.engine, "template", None)
        stop = [as_usv(x) for x in ([body.stop] if isinstance(body.stop, str) else list(body.stop or []))]
        stop = drop_special_stops(tok, stop, template)
        # a prompt in the served model's own FIM template (Continue's, llama.vscode's): its markers are the
        # special tokens, not text (quickcode/backend/fim_templates.py client_prompt)
        prefix, suffix, ids = client_prompt(tok, template, prompt, given_suffix)
        # past the limit only what the token budget would cut anyway: cut, not refused
        prefix, suffix, _ = within_budget(prefix, suffix, [], backend.settings.max_prompt_chars)
        sid = "http-" + secrets.token_hex(6)
        rid = "cmpl-" + secrets.token_hex(8)
        msg = Complete(id=rid, prefix=prefix, suffix=suffix,
                       max_tokens=16 if body.max_tokens is None else body.max_tokens,
                       temperature=body.temperature or 0.0, stop=stop, language="", path="",
                       best_of=backend.settings.completions_best_of if body.best_of is None else body.best_of)
        sink = QueueSink()
        svc = backend.service
        try:
            svc.submit(sink, sid, user or f"anon:{sid}", msg, time.perf_counter(), ids,
                       route="/v1/completions")
        except ProtocolError as e:
            return _error(_STATUS.get(e.code, 400), e.message, e.code.value)
        created = int(time.time())
        model = body.model or backend.settings.served_model_name

        def choice(text: str, finish: str | None) -> dict:
            return {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}

        def openai_finish(d: Done) -> str:
            return "length" if d.finish_reason == FinishReason.LENGTH else "stop"

        if not body.stream:
            parts: list[str] = []
            try:
                while True:
                    m = await sink.q.get()
                    if isinstance(m, Chunk):
                        parts.append(m.text)
                    elif isinstance(m, Error):
                        return _error(_STATUS.get(ErrorCode(m.code), 500), m.message, m.code, "server_error")
                    elif isinstance(m, Done):
                        break
            finally:
                svc.drop_session(sid)
            t = m.timing
            return {"id": rid, "object": "text_completion", "created": created, "model": model,
                    "choices": [choice("".join(parts), openai_finish(m))],
                    "usage": {"prompt_tokens": t.prompt_tokens, "completion_tokens": t.output_tokens,
                              "total_tokens": t.prompt_tokens + t.output_tokens},
                    "quickcode": {"finish_reason": m.finish_reason.value, "timing_ms": {
                        "queue": t.queue_ms, "ttft": t.ttft_ms, "total": t.total_ms}}}

        async def events():
            def sse(obj) -> bytes:
                return b"data: " + orjson.dumps(obj) + b"\n\n"

            head = {"id": rid, "object": "text_completion", "created": created, "model": model}
            try:
                while True:
                    m = await sink.q.get()
                    if isinstance(m, Chunk):
                        yield sse({**head, "choices": [choice(m.text, None)]})
                    elif isinstance(m, Error):
                        yield sse({"error": {"message": m.message, "type": "server_error", "code": m.code}})
                        break
                    elif isinstance(m, Done):
                        yield sse({**head, "choices": [choice("", openai_finish(m))]})
                        break
                yield b"data: [DONE]\n\n"
            finally:  # also runs when the client disconnects mid-stream: the engine request is aborted
                svc.drop_session(sid)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
