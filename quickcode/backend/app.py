"""App factory: the lifespan owns the engine and the completion service; routes are thin.

/healthz answers as soon as the process is up, and turns red only when the engine died or failed to start
(liveness: restart me); /readyz only while the engine serves (red while it starts, after it died, and while
draining for shutdown). The WebSocket endpoint is /v1/ws; its handshake is answered 503 while the engine
starts and while draining (a proxy in front sends the user to another replica), and accepted once the engine
died (the client hears why on every request until the process is restarted).
"""
from __future__ import annotations

import asyncio
import gc
import logging
import secrets
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from quickcode.backend import metrics
from quickcode.backend.auth import TokenStore, hash_token, token_from_headers
from quickcode.backend.debug_api import is_admin
from quickcode.backend.engine import Engine
from quickcode.backend.http_gate import HttpGate, origin_allowed
from quickcode.backend.service import CompletionService
from quickcode.backend.session import CLOSE_GOING_AWAY, CLOSE_TRY_AGAIN_LATER, CLOSE_UNAUTHORIZED, Session
from quickcode.backend.settings import Settings
from quickcode.backend.tenancy import Tenancy, resolve_isolation
from quickcode.backend.token_watch import TokenWatch
from quickcode.protocol import Error, ErrorCode, encode

log = logging.getLogger("quickcode.app")
CLOSE_FORBIDDEN_ORIGIN = 1008   # policy violation (HTTP 403 when closed before the handshake completes)


class Backend:
    """Everything the lifespan owns, reachable from handlers as `app.state.backend`."""

    def __init__(self, settings: Settings, engine: Engine):
        self.settings = settings
        self.engine = engine
        self.service: CompletionService | None = None
        self.tokens = TokenStore(settings.auth_tokens_file, settings.auth_tokens)
        isolation = resolve_isolation(settings.cache_isolation, self.tokens.enabled, settings.host)
        self.tenancy = Tenancy(isolation, self.tokens.team_of)
        self.user_label = metrics.UserLabels(self.tokens.team_of.__contains__, self.tokens.enabled)
        # the tokens file is watched while the server runs (reload on change or SIGHUP: `token_watch.ask`)
        self.token_watch = TokenWatch(self.tokens, settings.tokens_reload_s, self.close_revoked) \
            if settings.auth_tokens_file is not None else None
        self._watch_task: asyncio.Task | None = None
        self.sessions: set[Session] = set()
        self.sessions_of: dict[str, int] = {}     # open sessions per authenticated user
        self.draining = False
        self.started_s = time.monotonic()
        self._engine_task: asyncio.Task | None = None
        self._lag_probe: asyncio.Task | None = None
        self._gc_task: asyncio.Task | None = None
        self._metrics_server = None
        self.loop: asyncio.AbstractEventLoop | None = None   # the server's event loop (tests call into it)

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.settings.metrics_bind:
            self._metrics_server = metrics.serve_separately(self.settings.metrics_bind)
        self.service = CompletionService(self.settings, self.engine)
        self.service.salt_for = self.tenancy.cache_salt
        self.service.user_label = self.user_label
        self.service.start()
        metrics.watch_engine(lambda: self.engine.stats)
        self._lag_probe = asyncio.create_task(metrics.probe_loop_lag(), name="loop-lag-probe")
        metrics.watch_gc()
        self._gc_task = asyncio.create_task(self._freeze_sessions(), name="gc-freeze-sessions")
        self._engine_task = asyncio.create_task(self._start_engine(), name="engine-start")
        if self.token_watch is not None:
            self._watch_task = asyncio.create_task(self.token_watch.run(), name="tokens-watch")

    async def _freeze_sessions(self, every_s: float = 1.0, step: int = 200) -> None:
        """Open sessions are long-lived objects too (~100 each): 10k of them made every full collection of the
        cyclic GC a 1–4 s stop of the event loop. Freeze them out of the collector whenever `step` more
        sessions have opened; when half of the frozen ones have closed, unfreeze, so that what they left in
        reference cycles is collected (one full collection, when load has dropped)."""
        frozen_at = 0
        while True:
            await asyncio.sleep(every_s)
            n = len(self.sessions)
            if n >= frozen_at + step:
                gc.freeze()
                frozen_at = n
            elif frozen_at and n < frozen_at // 2:
                gc.unfreeze()
                frozen_at = 0

    async def _start_engine(self) -> None:
        try:
            await asyncio.to_thread(self.engine.start)
            # Everything imported and built so far (torch, vLLM, the engine client) lives as long as the
            # process: freeze it out of the cyclic GC, whose full collections would otherwise walk millions of
            # objects and stop the event loop for 100+ ms (vLLM's own API server does the same).
            gc.collect()
            gc.freeze()
            metrics.READY.set(1)
        except Exception:
            log.exception("the engine failed to start; /readyz stays red")

    async def drain(self, deadline_s: float) -> None:
        """Stop taking requests, let running ones finish until the deadline, then close every session."""
        self.draining = True
        if self.service is not None:
            self.service.closing = True
            end = time.monotonic() + deadline_s
            while self.service.live_count and time.monotonic() < end:
                await asyncio.sleep(0.02)
            await self.service.close()
        await asyncio.sleep(0.05)  # let the writers flush the last done frames
        await asyncio.gather(*(s.close(CLOSE_GOING_AWAY, "server shutting down")
                               for s in list(self.sessions)))

    async def stop(self) -> None:
        if not self.draining:
            await self.drain(self.settings.shutdown_drain_s)
        metrics.READY.set(0)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        if self._lag_probe is not None:
            self._lag_probe.cancel()
        if self._gc_task is not None:
            self._gc_task.cancel()
        if self._watch_task is not None:
            self._watch_task.cancel()
        if self._engine_task is not None and not self._engine_task.done():
            self._engine_task.cancel()
        await asyncio.to_thread(self.engine.shutdown)

    async def close_revoked(self, digests: frozenset[str]) -> int:
        """Close every session opened with one of these (no longer valid) token hashes; returns how many."""
        gone = [s for s in self.sessions if s.token_hash in digests]
        await asyncio.gather(*(s.revoke() for s in gone))
        metrics.SESSIONS_REVOKED.inc(len(gone))
        return len(gone)

    def user_for(self, headers, query_params) -> tuple[bool, str | None]:
        """(allowed, user). An open server (no tokens configured) allows everyone, user None."""
        if not self.tokens.enabled:
            return True, None
        user = self.tokens.user_for(token_from_headers(headers, query_params))
        return user is not None, user

    def may_reach(self, path: str, headers, query_params) -> bool:
        """The HTTP gate's question: /metrics takes the scrape token too, /debug/* only the admin token
        (checked again by its route), everything else a user's token (or nothing on an open server)."""
        if path == "/metrics":
            return self.may_scrape(headers, query_params)
        if path.startswith("/debug/"):
            return is_admin(self.settings, headers, query_params)
        return self.user_for(headers, query_params)[0]

    def may_scrape(self, headers, query_params) -> bool:
        """/metrics: open server, a user's token, or the scrape-only token (`metrics_token_sha256`)."""
        if self.user_for(headers, query_params)[0]:
            return True
        token, want = token_from_headers(headers, query_params), self.settings.metrics_token_sha256.lower()
        return bool(token and want) and secrets.compare_digest(hash_token(token), want)


async def refuse_session(ws: WebSocket, message: str) -> None:
    """A session over a cap: one typed error frame, then close 1013 (try again later)."""
    metrics.ERRORS.labels(ErrorCode.TOO_MANY_SESSIONS.value).inc()
    try:
        await ws.send_text(encode(Error(code=ErrorCode.TOO_MANY_SESSIONS.value, message=message)).decode())
        await ws.close(CLOSE_TRY_AGAIN_LATER, "session limit reached")
    except Exception:  # the client left first
        pass


def build_engine(settings: Settings) -> Engine:
    """The engine `settings.engine` names: vLLM in this process, or a remote OpenAI-compatible vLLM server."""
    if settings.engine == "openai":
        from quickcode.backend.remote_engine import RemoteEngine

        return RemoteEngine(settings)
    from quickcode.backend.vllm_engine import VllmEngine

    return VllmEngine(settings)


def create_app(settings: Settings | None = None, engine: Engine | None = None) -> FastAPI:
    """The app over `engine` (default: `build_engine(settings)`; tests pass a
    `quickcode.backend.fake_engine.FakeEngine`)."""
    settings = settings or Settings()
    engine = engine if engine is not None else build_engine(settings)
    backend = Backend(settings, engine)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await backend.start()
        yield
        await backend.stop()

    app = FastAPI(title="quickcode backend", lifespan=lifespan)
    app.state.backend = backend
    # every HTTP route, present and future, behind one gate: token from the headers, then a bounded body
    app.add_middleware(HttpGate, max_body_bytes=settings.max_body_bytes, allowed=backend.may_reach,
                       allowed_origins=settings.allowed_origins)

    @app.get("/healthz")
    async def healthz():
        # liveness: red only once the engine is gone for good (died, or failed to start), since only a
        # restart cures that; a starting or draining backend is alive
        eng = backend.engine
        if eng.dead:
            return JSONResponse({"status": "engine_dead", "reason": eng.error}, status_code=503)
        return {"status": "ok", "uptime_s": round(time.monotonic() - backend.started_s, 1)}

    @app.get("/readyz")
    async def readyz():
        eng = backend.engine
        if backend.draining:
            return JSONResponse({"ready": False, "reason": "draining"}, status_code=503)
        if not eng.ready:
            return JSONResponse({"ready": False, "reason": eng.error}, status_code=503)
        return {"ready": True, "model": settings.served_model_name, "profile": settings.profile_served,
                "profile_why": settings.profile_why, "target": settings.target_path.name,
                "precision": settings.precision, "spec_method": settings.spec_method,
                "dtype": eng.dtype, "replica": settings.replica_id,
                "engine_start_s": round(eng.started_s or 0, 1)}

    @app.get("/metrics")
    async def prometheus(request: Request):
        if not backend.may_scrape(request.headers, request.query_params):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return PlainTextResponse(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.websocket("/v1/ws")
    async def ws_endpoint(ws: WebSocket):
        ok, user = backend.user_for(ws.headers, ws.query_params)
        digest = backend.tokens.identify(token_from_headers(ws.headers, ws.query_params))[1] \
            if backend.tokens.enabled else None
        if not origin_allowed(ws.headers, settings.allowed_origins):   # a web page (cross-site WebSocket)
            await ws.close(CLOSE_FORBIDDEN_ORIGIN)   # before accept: the handshake is answered 403
            return
        if backend.draining:   # the handshake answered 503: a proxy (nginx) tries another replica
            await ws.send_denial_response(JSONResponse({"reason": "draining"}, status_code=503))
            return
        eng = backend.engine
        if not eng.ready and not eng.dead:   # starting: 503 too, another replica serves meanwhile
            await ws.send_denial_response(JSONResponse({"reason": eng.error}, status_code=503))
            return
        await ws.accept()
        if not ok:
            await ws.close(CLOSE_UNAUTHORIZED, "unauthorized: missing or invalid API token")
            return
        if len(backend.sessions) >= settings.max_sessions:
            await refuse_session(ws, f"the server holds its limit of {settings.max_sessions} sessions")
            return
        if user is not None and backend.sessions_of.get(user, 0) >= settings.max_sessions_per_user:
            await refuse_session(ws, f"user {user!r} already holds {settings.max_sessions_per_user} sessions "
                                     f"(max_sessions_per_user)")
            return
        if backend.tokens.enabled and not backend.tokens.knows(digest):   # revoked while it was accepted
            await ws.close(CLOSE_UNAUTHORIZED, "unauthorized: API token revoked")
            return
        session = Session(ws, backend.service, settings, user, settings.served_model_name)
        session.token_hash = digest
        backend.sessions.add(session)   # no await since the check: a reload cannot slip in between
        if user is not None:
            backend.sessions_of[user] = backend.sessions_of.get(user, 0) + 1
        try:
            await session.run()
        finally:
            backend.sessions.discard(session)
            if user is not None:
                left = backend.sessions_of.get(user, 1) - 1
                if left > 0:
                    backend.sessions_of[user] = left
                else:
                    backend.sessions_of.pop(user, None)

    from quickcode.backend.debug_api import register as register_debug

    register_debug(app, backend)
    from quickcode.backend.openai_api import register as register_openai

    register_openai(app, backend)
    from quickcode.backend.compat_api import register as register_compat

    register_compat(app, backend)
    return app
