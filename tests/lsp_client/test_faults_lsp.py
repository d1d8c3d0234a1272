"""Fault tolerance as the editor sees it: the backend is killed mid-stream and restarted.

A real LSP client drives `quickcode lsp` against a backend process of its own: the real server (uvicorn, real
WebSockets) over the `FakeEngine` (tests/support/fake_serve.py), whose stream holds after its first token — so the
request is streaming when the kill comes, on any machine (what happens to vLLM's processes on a kill is
tests/backend/test_faults_backend.py's). The test waits for that state (the language server has the request pending,
the backend has sent its first chunk and still runs it), then kills the backend's whole process group with
SIGKILL: the pending editor request must be answered (empty, not an error) because the connection dropped —
the editor's deadline (10 min) is far beyond the hang bound, so an answer at all proves it did not wait for
it; typing goes on without blocking (an empty answer while nothing listens); when a backend comes back on the
same address the language server reconnects by itself (jittered backoff) and completions resume; nothing is
left pending. A second test freezes the backend (SIGSTOP) instead: the connection stays open and nothing answers,
not even a WebSocket ping — a dead network as the client sees it; the language server's watchdog must notice
it by itself and answer the pending request empty, and reconnect once the backend runs again (SIGCONT). The
times are printed, not compared with an expected speed.

Here with quickcode/lsp_client/: what the language server does when the backend dies.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
import websockets
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.launch import RunningBackend, free_port, stop_backend
from tests.support import fake_serve
from tests.conftest import ARTIFACTS
from tests.lsp_client.test_lsp_e2e import capabilities, command, end_pos, inline_params, metric, open_doc, quiet_status
from tests.support.waits import until, until_async

PORT = free_port()
DEADLINE_MS = 600_000     # the editor's own deadline (the largest the client takes): never what answers here
HANG_S = 30.0             # a hang detector, 20x below the deadline
URL = f"ws://127.0.0.1:{PORT}/v1/ws"
TEXT = "class Handler:\n    def handle(self, request):\n        "


def start_fake_backend(log_path: Path, *args: str) -> RunningBackend:
    """tests/support/fake_serve.py on PORT, once /readyz says so."""
    return fake_serve.start(log_path, PORT, *args)


@pytest.fixture
def own_backend():
    b = start_fake_backend(ARTIFACTS / "logs" / "backend-faults-lsp.log", "--hold")
    yield b
    stop_backend(b)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient):
    quiet_status(lsp_client)
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp",
        initialization_options={"endpoints": [URL], "predictor": False, "warmup": False, "cache": False,
                                "inflightReuse": False, "maxTokens": 256, "multilineMaxLines": 200,
                                "deadlineMs": DEADLINE_MS, "linePatienceMs": 0, "blockPatienceMs": 0,
                                "suggestionUnit": "block", "stateDir": ""}))
    yield
    await lsp_client.shutdown_session()


async def status(client: LanguageClient) -> dict:
    return await command(client, "quickcode.status")


async def test_backend_killed_mid_stream_then_restarted(client: LanguageClient, own_backend):
    pending = await _streaming(client, own_backend)
    assert metric(own_backend, "quickcode_engine_running") == 1 and not pending.done()
    # a raw WebSocket to the same backend sees the connection drop at the same moment as the language server's
    probe = await websockets.connect(URL, compression=None)
    dropped = asyncio.get_running_loop().create_future()

    async def watch():
        try:
            await probe.recv()
        except websockets.ConnectionClosed:
            dropped.set_result(time.perf_counter())
    watcher = asyncio.create_task(watch())
    t_kill = time.perf_counter()
    os.killpg(own_backend.proc.pid, signal.SIGKILL)   # the whole backend process group
    own_backend.proc.wait(HANG_S)
    result = await asyncio.wait_for(pending, HANG_S)
    t_answer = time.perf_counter()
    t_drop = await asyncio.wait_for(dropped, HANG_S)
    await watcher
    print(f"\nconnection dropped {(t_drop - t_kill) * 1000:.0f} ms after SIGKILL; the pending editor request "
          f"was answered {(t_answer - t_drop) * 1000:.1f} ms after the drop")
    assert not result.items, "a request cut off by a lost backend is answered empty"

    # typing goes on without blocking while the backend is down: answers are empty and immediate
    text2 = TEXT + "return "
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri="file:///tmp/quickcode_e2e/demo.py", version=2),
        content_changes=[T.TextDocumentContentChangePartial(range=T.Range(end_pos(TEXT), end_pos(TEXT)),
                                                            text="return ")]))
    t0 = time.perf_counter()
    down = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(text2)), HANG_S)
    print(f"completion while the backend is down: empty in {(time.perf_counter() - t0) * 1000:.1f} ms")
    assert not down.items

    # a backend comes back on the same address: the language server reconnects by itself
    t_restart = time.perf_counter()
    own_backend.proc = start_fake_backend(ARTIFACTS / "logs" / "backend-faults-lsp-2.log").proc
    t_ready = time.perf_counter()
    await until_async(lambda: _connected(client), "the language server to reconnect", hang_s=HANG_S)
    print(f"backend ready {t_ready - t_restart:.1f} s after restart; language server connected "
          f"{(time.perf_counter() - t_ready) * 1000:.0f} ms later")
    text3 = "def main():\n    "
    open_doc(client, text3, version=10)
    res = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(text3)), HANG_S)
    shown = [item.insert_text for item in res.items]             # completions resume (a word of it, or all)
    assert len(shown) == 1 and shown[0] and "result = compute()".startswith(shown[0]), res
    st = await until_async(lambda: _pending(client, 0), "every request to end", hang_s=HANG_S)
    assert st["connects"] >= 2, st


async def test_frozen_backend_is_noticed_by_the_watchdog(client: LanguageClient, own_backend):
    pending = await _streaming(client, own_backend)
    assert not pending.done() and (await status(client))["watchdog_drops"] == 0
    t_freeze = time.perf_counter()
    os.killpg(own_backend.proc.pid, signal.SIGSTOP)   # the socket stays open; no frame, no pong comes back
    try:
        result = await asyncio.wait_for(pending, HANG_S)
        print(f"\nthe pending editor request was answered {(time.perf_counter() - t_freeze) * 1000:.0f} ms "
              f"after the backend froze")
        assert not result.items, "a request cut off by a dead connection is answered empty"
        st = await until_async(lambda: _pending(client, 0), "nothing left pending", hang_s=HANG_S)
        # the watchdog's ping found it (websockets' own keepalive would take 20 s or more)
        assert st["watchdog_drops"] == 1, st
    finally:
        os.killpg(own_backend.proc.pid, signal.SIGCONT)
    # the backend runs again: the language server reconnects by itself and new requests reach it
    await until_async(lambda: _connected(client), "the language server to reconnect", hang_s=HANG_S)
    assert (await status(client))["connects"] >= 2
    text2 = "def main():\n    "
    open_doc(client, text2, version=10)
    again = asyncio.create_task(client.text_document_inline_completion_async(inline_params(text2)))
    await asyncio.to_thread(until, lambda: metric(own_backend, "quickcode_ttft_seconds_count") >= 2,
                            "the new request's first chunk to be sent", hang_s=HANG_S)
    os.killpg(own_backend.proc.pid, signal.SIGKILL)   # it holds the stream after its first token: end it here
    assert not (await asyncio.wait_for(again, HANG_S)).items


async def _streaming(client: LanguageClient, backend: RunningBackend) -> asyncio.Task:
    """Connected, TEXT opened and its completion asked: streaming now, and held there by the backend — pending in
    the language server, its first chunk sent, still running in the engine. Returns the editor's request."""
    await until_async(lambda: _connected(client), "the language server to connect", hang_s=HANG_S)
    open_doc(client, TEXT)
    pending = asyncio.create_task(client.text_document_inline_completion_async(inline_params(TEXT)))
    await until_async(lambda: _pending(client, 1), "the request to be pending in the language server",
                      hang_s=HANG_S)
    await asyncio.to_thread(until, lambda: metric(backend, "quickcode_ttft_seconds_count") >= 1,
                            "the first chunk to be sent", hang_s=HANG_S)
    return pending


async def _connected(client: LanguageClient) -> dict | None:
    st = await status(client)
    return st if st.get("connected") else None


async def _pending(client: LanguageClient, n: int) -> dict | None:
    st = await status(client)
    return st if st["pending"] == n else None
