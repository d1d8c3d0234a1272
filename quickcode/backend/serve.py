"""`quickcode serve`: uvicorn around the app factory, with a shutdown that drains before it closes.

On SIGTERM/SIGINT the first signal starts the drain (new requests get `shutting_down`, running ones may
finish until `shutdown_drain_s`, then every session is closed with 1001); uvicorn stops after that, the engine
is shut down and the process exits at once. SIGHUP reloads the tokens file (quickcode/backend/token_watch.py).
"""
from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import sys
from pathlib import Path

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from quickcode.backend import logs
from quickcode.backend.settings import Settings


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, backend):
        super().__init__(config)
        self.backend = backend
        self._draining: asyncio.Task | None = None

    def handle_exit(self, sig, frame) -> None:
        if self._draining is None and not self.should_exit:
            loop = asyncio.get_event_loop()
            self._draining = loop.create_task(self._drain_then_exit())
        else:
            super().handle_exit(sig, frame)  # a second signal: stop now

    async def _drain_then_exit(self) -> None:
        try:
            await self.backend.drain(self.backend.settings.shutdown_drain_s)
        finally:
            self.should_exit = True


def uvicorn_config(app, settings: Settings, **overrides) -> uvicorn.Config:
    """How uvicorn serves the app (`quickcode serve`, and the in-process servers of tests:
    quickcode/backend/launch.py)."""
    kw = dict(host=settings.host, port=settings.port, log_level=settings.log_level, loop="uvloop",
              http="httptools", ws="websockets-sansio",
              ws_max_size=max(4 * settings.max_frame_bytes, 1 << 22), ws_ping_interval=20.0,
              ws_ping_timeout=20.0, ssl_certfile=settings.ssl_certfile, ssl_keyfile=settings.ssl_keyfile,
              timeout_graceful_shutdown=int(settings.shutdown_drain_s) + 5, backlog=4096, access_log=False,
              # JSON: uvicorn's loggers go through the root handler (quickcode/backend/logs.py), not its own
              # text ones
              log_config=None if settings.log_format == "json" else LOGGING_CONFIG)
    config = uvicorn.Config(app, **{**kw, **overrides})   # (configures uvicorn's loggers)
    logs.quiet_denials()
    return config


def check_files(settings: Settings) -> None:
    """The files the operator named are there, and the tokens parse, before anything starts: one line (a line
    per bad token line), not a traceback from inside uvicorn's TLS set-up ("No such file or directory", no
    name) or the token store."""
    from quickcode.backend.auth import TokensFileError, parse_entries, read_tokens_file

    for name in ("ssl_certfile", "ssl_keyfile", "auth_tokens_file"):
        path = getattr(settings, name)
        if path is not None and not Path(path).is_file():
            raise SystemExit(f"quickcode serve: {name} {path}: no such file")
    try:
        parse_entries(settings.auth_tokens, "auth_tokens")
        if settings.auth_tokens_file is not None:
            read_tokens_file(settings.auth_tokens_file)
    except TokensFileError as e:
        raise SystemExit(f"quickcode serve: the API tokens do not load: {e}") from None


def run(settings: Settings, engine=None) -> None:
    """Serve until a signal has drained the server (`engine`: another `quickcode.backend.engine.Engine` than
    vLLM, e.g. the fake one of tests/support/fake_serve.py)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # JSON: vLLM's logger (in this process) goes through the root handler too
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0" if settings.log_format == "json" else "1")
    logs.configure(settings.log_level, settings.log_format)
    from quickcode.backend import first_token
    from quickcode.backend.tenancy import check_bind

    # before anything starts: an open server beyond loopback exits here unless the operator allowed it, or
    # gets its first token (auth_bootstrap_dir: the container images)
    settings = first_token.ensure(settings)
    check_bind(settings.host, bool(settings.auth_tokens_file or settings.auth_tokens), settings.allow_open)
    check_files(settings)
    logging.getLogger("quickcode.serve").info(
        "serving profile %s (%s): %s %s (setting %s), speculation %s", settings.profile_served,
        settings.profile_why, settings.precision, settings.target_path, settings.target_setting,
        settings.spec_method)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # a socket per WebSocket session (max_sessions)
    from quickcode.backend import orphan_guard

    orphan_guard.start()   # before any thread: after a kill -9 of this process, its engine processes die too
    from quickcode.backend.app import create_app

    app = create_app(settings, engine)
    token_watch = app.state.backend.token_watch
    if token_watch is not None:
        signal.signal(signal.SIGHUP, lambda sig, frame: token_watch.ask())
    config = uvicorn_config(app, settings)
    # bound before the engine starts (20 s on this CPU, minutes for a 13B model): a port in use: said at once
    try:
        sock = config.bind_socket()
    except SystemExit:   # uvicorn has logged the OSError
        raise SystemExit(f"quickcode serve: cannot listen on {settings.host}:{settings.port}") from None
    server = DrainingServer(config, app.state.backend)
    server.run(sockets=[sock])
    # Sessions are closed, the engine is shut down, logs are written: skip the interpreter's teardown of torch
    # and vLLM state (seconds on a loaded machine), which only delays the exit the orchestrator waits for.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0 if server.started else 1)
