"""`/debug/*`: operator knobs on a live engine (benchmarks switch the scheduler between A/B blocks).

Off unless `debug_endpoints = true`, and then only for the admin token (`admin_token_sha256`; a user's token
is not enough, and an open server has no exception). Values are typed by pydantic: `"false"` is false,
`"maybe"` is a 400, unknown fields are a 400 — nothing is coerced by calling a type on a string.
"""
from __future__ import annotations

import secrets
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quickcode.backend.auth import hash_token, token_from_headers


class Rates(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefill_tok_s: float | None = Field(default=None, gt=0)
    decode_tok_s: float | None = Field(default=None, gt=0)
    output_fill: float | None = Field(default=None, gt=0, le=1)
    step_s: float | None = Field(default=None, ge=0, le=60)
    # the prefill line's samples, [prompt tokens, seconds]: restored, the line is fitted again from them
    prefill_samples: list[tuple[int, float]] | None = Field(default=None, max_length=64)


class SchedulerPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: Literal["latency", "fifo", "priority"] | None = None
    ttft_budget_s: float | None = Field(default=None, gt=0)
    max_running: int | None = Field(default=None, ge=1, le=4096)
    shed_enabled: bool | None = None
    per_user_inflight: int | None = Field(default=None, ge=1, le=1024)
    admit_cap: int | None = Field(default=None, ge=0, le=1_000_000)
    rates: Rates | None = None   # restore measured rates (an A/B run switching modes on one engine)


def is_admin(settings, headers, query_params) -> bool:
    token, want = token_from_headers(headers, query_params), settings.admin_token_sha256.lower()
    return bool(token and want) and secrets.compare_digest(hash_token(token), want)


def register(app: FastAPI, backend) -> None:
    settings = backend.settings
    if not settings.debug_endpoints:
        return
    if not settings.admin_token_sha256:
        raise ValueError("debug_endpoints = true needs admin_token_sha256 (make one: quickcode token admin)")

    @app.post("/debug/scheduler")
    async def debug_scheduler(request: Request):
        """Change the scheduler's mode/budget on a live engine; only while nothing is live."""
        if not is_admin(settings, request.headers, request.query_params):
            return JSONResponse({"error": "the admin token is required"}, status_code=401)
        try:
            patch = SchedulerPatch.model_validate_json(await request.body())
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"]))
            return JSONResponse({"error": f"{where}: {first['msg']}"}, status_code=400)
        svc = backend.service
        if svc is None or svc.live_count or svc.sched.jobs:
            return JSONResponse({"error": "requests are live"}, status_code=409)
        cfg, rates = svc.sched.cfg, svc.sched.rates
        for key, value in patch.model_dump(exclude_none=True, exclude={"rates"}).items():
            setattr(cfg, key, value)
        if patch.rates is not None:
            given = patch.rates.model_dump(exclude_none=True)
            samples = given.pop("prefill_samples", None)
            rates.restore(given, samples)
        return {**{k: getattr(cfg, k) for k in ("mode", "ttft_budget_s", "max_running", "shed_enabled",
                                                "per_user_inflight", "admit_cap")},
                "rates": {"prefill_tok_s": rates.prefill_tok_s, "decode_tok_s": rates.decode_tok_s,
                          "output_fill": rates.output_fill, "step_s": rates.step_s,
                          "prefill_samples": [list(x) for x in rates.fit]},
                "lateness_factor": svc.sched.lateness.factor}
