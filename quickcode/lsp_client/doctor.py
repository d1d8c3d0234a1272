"""`quickcode doctor`: why are completions empty? Checks one backend endpoint step by step, the way the language
server reaches it (reachable → TLS → ready → token → protocol version → model → latency), and prints each
result with the fix. Exit status: 0 when nothing failed, else the number of the first failed check's kind
(`EXIT_CODES`), so a script can tell "no backend" from "wrong token".

Uses only the standard library, `websockets` and `quickcode/protocol/`: it runs from the language server's own
install (the quickcode-lsp package), on the developer's machine, with the developer's endpoint and token.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
import statistics
import sys
import time
from dataclasses import asdict

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from quickcode.protocol import PROTOCOL_VERSION, Complete, Done, Error, Hello, Welcome, decode, encode

from .doctor_checks import (CERT_EXPIRY_WARN_DAYS, CLOSE_UNAUTHORIZED, DEFAULT_ENDPOINT, EXIT_CODES,  # noqa: F401
                            LATENCY_PROMPT, SLOW_FIRST_CHUNK_MS, Check, Target, _days_left, _decode_der,
                            _describe_cert, _http_get, _is_loopback, _netloc, add_arguments, exit_code,
                            format_checks, parse_endpoint, tls_context)


class Doctor:
    def __init__(self, target: Target, token: str = "", ca_file: str | None = None,
                 protocol_version: int = PROTOCOL_VERSION, timeout_s: float = 5.0, samples: int = 3):
        self.t = target
        self.token = token
        self.ca_file = ca_file
        self.protocol_version = protocol_version
        self.timeout_s = timeout_s
        self.samples = samples
        self.checks: list[Check] = []

    def _add(self, name: str, status: str, detail: str, fix: str = "") -> bool:
        self.checks.append(Check(name, status, detail, fix))
        return status != "fail"

    def _skip_rest(self, after: str) -> None:
        names = list(EXIT_CODES)
        for name in names[names.index(after) + 1:]:
            if all(c.name != name for c in self.checks):
                self.checks.append(Check(name, "skip", f"not checked: {after} failed"))

    async def run(self) -> list[Check]:
        for step in (self._reachable, self._tls, self._ready, self._session):
            name = await step()
            if name is not None:        # the step failed: what follows cannot be checked
                self._skip_rest(name)
                break
        return self.checks

    # ── steps: each returns None to go on, or its own name when it failed
    async def _reachable(self) -> str | None:
        t = self.t
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(t.host, t.port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            self._add("reachable", "fail", f"cannot resolve {t.host!r}: {e.strerror}",
                      "check the host name in --endpoint / QUICKCODE_ENDPOINTS / the editor's quickcode.endpoints")
            return "reachable"
        t0 = time.perf_counter()
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(t.host, t.port), self.timeout_s)
        except (ConnectionRefusedError, OSError, asyncio.TimeoutError) as e:
            where = _netloc(t.host, t.port)
            if isinstance(e, asyncio.TimeoutError):
                why = f"no answer from {where} in {self.timeout_s:g} s"
                fix = "a firewall or a wrong host drops the connection: check the address, VPN and proxy"
            else:
                what = "connection refused" if isinstance(e, ConnectionRefusedError) else (e.strerror or repr(e))
                why = f"nothing listens on {where} ({what})"
                fix = ("start the backend (`quickcode serve`, or the container / Kubernetes service), "
                       "or point --endpoint / QUICKCODE_ENDPOINTS at the running one")
            self._add("reachable", "fail", why, fix)
            return "reachable"
        connect_ms = (time.perf_counter() - t0) * 1000
        writer.close()
        addr = infos[0][4][0]
        self._add("reachable", "ok", f"{_netloc(t.host, t.port)} ({addr}) accepts TCP in {connect_ms:.1f} ms")
        return None

    async def _tls(self) -> str | None:
        t = self.t
        if not t.tls:
            if _is_loopback(t.host):
                self._add("tls", "ok", "plain ws:// on loopback (nothing leaves this machine)")
            else:
                self._add("tls", "warn", f"plain ws:// to {t.host}: the token and your code cross the network "
                          "unencrypted", "serve TLS (--set ssl_certfile=… ssl_keyfile=…, or a TLS proxy) and use wss://")
            return None
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(t.host, t.port, ssl=tls_context(self.ca_file), server_hostname=t.host),
                self.timeout_s)
        except ssl.SSLCertVerificationError as e:
            self._add("tls", "fail", f"the server's certificate is not trusted: {e.verify_message}"
                      f"{_describe_cert(await self._peer_cert_unverified())}",
                      "give the CA that signed it: --ca-file CA.pem (and SSL_CERT_FILE=CA.pem in the editor's "
                      "environment, which the language server reads), or install a certificate from a trusted CA")
            return "tls"
        except (ssl.SSLError, OSError, asyncio.TimeoutError) as e:
            self._add("tls", "fail", f"TLS handshake failed: {e!r}",
                      "the port may serve plain HTTP: try ws:// — or the proxy in front does not terminate TLS")
            return "tls"
        sslobj = writer.get_extra_info("ssl_object")
        cert = sslobj.getpeercert() if sslobj else None
        writer.close()
        left_days = _days_left(cert)
        detail = f"{sslobj.version() if sslobj else 'TLS'}, certificate verified{_describe_cert(cert)}"
        if left_days is not None and left_days < CERT_EXPIRY_WARN_DAYS:
            self._add("tls", "warn", f"{detail}; it expires in {left_days:.0f} days", "renew the certificate")
        else:
            self._add("tls", "ok", detail)
        return None

    async def _peer_cert_unverified(self) -> dict | None:
        """The certificate as sent, to say whose it is when it cannot be verified (nothing else is trusted)."""
        ctx = ssl._create_unverified_context()
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(self.t.host, self.t.port, ssl=ctx, server_hostname=self.t.host), self.timeout_s)
        except (OSError, asyncio.TimeoutError):
            return None
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        return _decode_der(der)

    async def _ready(self) -> str | None:
        url = f"{self.t.http_base}/readyz"
        ctx = tls_context(self.ca_file) if self.t.tls else None
        status, body = await asyncio.to_thread(_http_get, url, ctx, self.timeout_s)
        if status == 200 and body.get("ready"):
            profile = (f", profile {body['profile']} ({body.get('profile_why', '')})"
                       if body.get("profile") else "")
            self._add("ready", "ok", f"/readyz: engine serving {body.get('model', '?')!r}{profile} "
                      f"(speculation {body.get('spec_method', '?')}, replica {body.get('replica', '?')})")
            return None
        if status == 503:
            reason = body.get("reason") or "engine not ready"
            if reason == "draining":
                fix = "the replica is shutting down: retry in a few seconds (a load balancer sends you elsewhere)"
            elif "start" in str(reason).lower() or not reason:
                fix = "wait: the engine takes 30–90 s to start (watch /readyz); if it never turns green see the backend's log"
            else:
                fix = "the engine failed: read the backend's log (`kubectl logs`, the container's output) and restart it"
            self._add("ready", "fail", f"/readyz answers 503: {reason}", fix)
            return "ready"
        if status == 404:   # a proxy that routes only /v1/ws: not fatal, the session checks follow
            self._add("ready", "warn", "/readyz is not served at this address (a proxy that routes only /v1/ws?)",
                      "nothing to do if completions work; operators: route /readyz for health checks")
            return None
        self._add("ready", "fail", f"/readyz: {body.get('error') or f'HTTP {status}'}",
                  "is this a quickcode backend? check the endpoint's host, port and path")
        return "ready"

    async def _session(self) -> str | None:
        """Token, protocol version and model from the hello/welcome handshake, then the latency of real requests."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        ctx = tls_context(self.ca_file) if self.t.tls else None
        try:
            async with connect(self.t.ws_url, additional_headers=headers, ssl=ctx, open_timeout=self.timeout_s,
                               close_timeout=1, max_size=1 << 24) as ws:
                await ws.send(encode(Hello(protocol_version=self.protocol_version, client="quickcode-doctor")).decode())
                first = decode(await asyncio.wait_for(ws.recv(), self.timeout_s))
                if isinstance(first, Error):
                    return self._hello_error(first)
                if not isinstance(first, Welcome):
                    self._add("protocol", "fail", f"the server answered hello with {first.kind!r}",
                              "is this a quickcode backend? check the endpoint's path (/v1/ws)")
                    return "protocol"
                self._add("token", "ok", "accepted" if self.token else "none given, and the server asks for none "
                          "(an open server: keep it on loopback)")
                self._add("protocol", "ok", f"version {first.protocol_version} on both sides "
                          f"(session {first.session_id}, replica {first.replica or '?'})")
                self._add("model", "ok", f"{first.model!r}, up to {first.max_tokens} tokens a completion, "
                          f"prompts up to {first.max_prompt_chars} characters")
                return await self._latency(ws)
        except ConnectionClosed as e:
            return self._closed(e)
        except InvalidStatus as e:
            code = e.response.status_code
            if code in (401, 403):
                return self._token_fail(f"the upgrade was refused with HTTP {code}")
            self._add("protocol", "fail", f"the WebSocket upgrade was refused with HTTP {code} at {self.t.ws_url}",
                      "check the path (/v1/ws) and that the proxy forwards WebSocket upgrades")
            return "protocol"
        except (InvalidHandshake, OSError, asyncio.TimeoutError) as e:
            self._add("protocol", "fail", f"no WebSocket session: {e!r}",
                      "check the path (/v1/ws) and that the proxy forwards WebSocket upgrades")
            return "protocol"

    def _closed(self, e: ConnectionClosed) -> str:
        code = e.rcvd.code if e.rcvd else None
        reason = e.rcvd.reason if e.rcvd else ""
        if code == CLOSE_UNAUTHORIZED:
            return self._token_fail(f"the server closed the session ({code}: {reason})")
        self._add("protocol", "fail", f"the server closed the session ({code}: {reason or 'no reason'})",
                  "read the backend's log for this session")
        return "protocol"

    def _token_fail(self, why: str) -> str:
        if self.token:
            self._add("token", "fail", f"the token was rejected: {why}",
                      "ask the operator for a valid token (`quickcode token issue --user NAME --file TOKENS` on the "
                      "backend) and set it in the editor (quickcode.token) or QUICKCODE_TOKEN; check for a stray "
                      "space or an old, revoked token")
        else:
            self._add("token", "fail", f"the backend needs a token and none was given: {why}",
                      "pass --token or set QUICKCODE_TOKEN (the editor: its quickcode.token setting)")
        return "token"

    def _hello_error(self, err: Error) -> str:
        if err.code == "version_mismatch":
            self._add("token", "ok", "accepted" if self.token else "none needed")
            self._add("protocol", "fail", f"incompatible protocol: {err.message}",
                      "upgrade the older side to the same quickcode release: the language server "
                      "(the quickcode-lsp wheel of the same release, or the editor extension) or the backend image")
            return "protocol"
        if err.code == "unauthorized":
            return self._token_fail(err.message)
        self._add("protocol", "fail", f"the server refused hello: {err.code}: {err.message}",
                  "read the backend's log for this session")
        return "protocol"

    async def _latency(self, ws) -> str | None:
        first_ms: list[float] = []
        server_ttft_ms: list[float] = []
        shed = 0
        for i in range(self.samples):
            rid = f"doctor-{i}"
            t0 = time.perf_counter()
            await ws.send(encode(Complete(id=rid, prefix=LATENCY_PROMPT, language="python", max_tokens=8)).decode())
            t_first = None
            while True:
                msg = decode(await asyncio.wait_for(ws.recv(), max(self.timeout_s, 30.0)))
                if getattr(msg, "id", None) != rid:
                    continue
                if t_first is None:
                    t_first = time.perf_counter()
                if isinstance(msg, Error):
                    self._add("latency", "fail", f"a completion request failed: {msg.code}: {msg.message}",
                              "read the backend's log; `quickcode report` shows where time goes")
                    return "latency"
                if isinstance(msg, Done):
                    shed += msg.finish_reason == "shed"
                    server_ttft_ms.append(msg.timing.ttft_ms)
                    break
            first_ms.append((t_first - t0) * 1000)
        p50 = statistics.median(first_ms)
        detail = (f"first answer p50 {p50:.0f} ms over {len(first_ms)} requests (engine time to first token "
                  f"p50 {statistics.median(server_ttft_ms):.0f} ms; the rest is queue and network)")
        if shed:
            self._add("latency", "warn", f"{detail}; {shed} of {len(first_ms)} shed (the backend is overloaded)",
                      "the backend sheds requests it cannot answer within its TTFT budget: add replicas or capacity")
        elif p50 > SLOW_FIRST_CHUNK_MS:
            self._add("latency", "warn", f"{detail}: slow", "a nearer region (several endpoints), a smaller model, "
                      "or a less loaded backend; `quickcode report` breaks the time down")
        else:
            self._add("latency", "ok", detail)
        return None


def diagnose(endpoint: str, token: str = "", **kw) -> list[Check]:
    try:
        target = parse_endpoint(endpoint)
    except ValueError as e:
        return [Check("endpoint", "fail", str(e), "use ws://HOST:PORT/v1/ws or wss://HOST/v1/ws")]
    return asyncio.run(Doctor(target, token, **kw).run())


def run(args: argparse.Namespace) -> int:
    env = os.environ.get("QUICKCODE_ENDPOINTS", "")
    endpoints = args.endpoint or [u.strip() for u in env.split(",") if u.strip()] or [DEFAULT_ENDPOINT]
    token = args.token if args.token is not None else os.environ.get("QUICKCODE_TOKEN", "")
    code = 0
    for endpoint in endpoints:
        checks = diagnose(endpoint, token, ca_file=args.ca_file, timeout_s=args.timeout, samples=max(1, args.samples),
                          protocol_version=args.protocol_version)
        status = exit_code(checks)
        code = code or status
        if args.json:
            print(json.dumps({"endpoint": endpoint, "exit": status, "checks": [asdict(c) for c in checks]}))
        else:
            print(format_checks(endpoint, checks))
    sys.stdout.flush()
    return code
