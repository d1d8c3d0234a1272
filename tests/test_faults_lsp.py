"""Fault tolerance as the editor sees it: the backend is killed mid-stream and restarted.

A real LSP client drives `quickcode lsp` against a backend of its own (real vLLM). While a completion is
streaming, the backend's whole process group is killed with SIGKILL: the pending editor request must be
answered (empty, not an error) because the connection dropped — the editor's deadline is set far beyond the
test's bounds, so an answer at all proves it did not wait for the deadline; typing goes on without blocking
(an empty answer while nothing listens); when a backend comes back on the same address the language server
reconnects by itself (jittered backoff) and completions resume; nothing is left pending. The times are
printed, not compared with an expected speed.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest
import pytest_lsp
import websockets
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from backend.launch import free_port, start_backend, stop_backend
from tests.conftest import ARTIFACTS
from tests.test_lsp_e2e import quiet_status, CONTEXTS, capabilities, command, end_pos, inline_params, open_doc

pytestmark = [pytest.mark.engine, pytest.mark.slow]
PORT = free_port()
DEADLINE_MS = 3_600_000   # the editor's own deadline: never what answers a request in this test
ANSWER_BOUND_S = 30.0     # a hang detector, 120x below the deadline
URL = f"ws://127.0.0.1:{PORT}/v1/ws"


@pytest.fixture(scope="module")
def own_backend():
    b = start_backend(ARTIFACTS / "logs" / "backend-faults-lsp.log", port=PORT)
    yield b
    stop_backend(b)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient):
    quiet_status(lsp_client)
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp",
        initialization_options={"endpoints": [URL], "predictor": False, "warmup": False, "cache": False,
                                "inflightReuse": False, "maxTokens": 256, "multilineMaxLines": 200,
                                "deadlineMs": DEADLINE_MS, "stateDir": ""}))
    yield
    await lsp_client.shutdown_session()


async def connected(client: LanguageClient, timeout_s: float) -> float | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if (await command(client, "quickcode.status")).get("connected"):
            return time.perf_counter() - t0
        await asyncio.sleep(0.02)
    return None


async def test_backend_killed_mid_stream_then_restarted(client: LanguageClient, own_backend):
    assert await connected(client, 30) is not None
    candidates = ["class Handler:\n    def handle(self, request):\n        ",
                  "def parse(lines):\n    result = []\n    for line in lines:\n        ",
                  "import os\n\n\ndef walk(root):\n    "]
    for version, text in enumerate(candidates, 1):   # a request that is still streaming when the kill comes
        open_doc(client, text, version=version)
        pending = asyncio.create_task(client.text_document_inline_completion_async(inline_params(text)))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if (await command(client, "quickcode.status")).get("pending") or pending.done():
                break
        await asyncio.sleep(0.05)
        if not pending.done():
            break
    assert not pending.done(), "every request finished before the backend could be killed"
    # A raw WebSocket to the same backend sees the connection drop at the same moment as the language
    # server's (the kernel closes a killed process's sockets together, after freeing its memory: that
    # takes from ~10 ms to seconds for a process of this size, so "lost" is timed from the drop, not the kill).
    probe = await websockets.connect(URL, compression=None)
    dropped = asyncio.get_running_loop().create_future()

    async def watch():
        try:
            await probe.recv()
        except websockets.ConnectionClosed:
            dropped.set_result(time.perf_counter())
    watcher = asyncio.create_task(watch())
    t_kill = time.perf_counter()
    os.killpg(own_backend.proc.pid, signal.SIGKILL)   # the whole backend: uvicorn + vLLM engine processes
    result = await asyncio.wait_for(pending, ANSWER_BOUND_S)
    t_answer = time.perf_counter()
    t_drop = await asyncio.wait_for(dropped, 10)
    await watcher
    answered_ms = (t_answer - t_drop) * 1000
    print(f"\nconnection dropped {(t_drop - t_kill) * 1000:.0f} ms after SIGKILL; the pending editor request "
          f"was answered {answered_ms:.1f} ms after the drop")
    assert not result.items, "a request cut off by a lost backend is answered empty"

    # typing goes on without blocking while the backend is down: answers are empty and immediate
    text2 = text + "return "
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri="file:///tmp/quickcode_e2e/demo.py", version=2),
        content_changes=[T.TextDocumentContentChangePartial(range=T.Range(end_pos(text), end_pos(text)), text="return ")]))
    t0 = time.perf_counter()
    down = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(text2)), ANSWER_BOUND_S)
    down_ms = (time.perf_counter() - t0) * 1000
    print(f"completion while the backend is down: empty in {down_ms:.1f} ms")
    assert not down.items

    # a backend comes back on the same address: the language server reconnects by itself
    t_restart = time.perf_counter()
    own_backend.proc = start_backend(ARTIFACTS / "logs" / "backend-faults-lsp-2.log", port=PORT).proc
    ready_s = time.perf_counter() - t_restart
    reconnect_s = await connected(client, 30)
    assert reconnect_s is not None, "the language server did not reconnect"
    print(f"backend ready {ready_s:.1f} s after restart; language server connected {reconnect_s * 1000:.0f} ms later")
    for ctx in CONTEXTS:                              # completions resume
        open_doc(client, ctx, version=10)
        res = await client.text_document_inline_completion_async(inline_params(ctx))
        if res.items:
            break
    else:
        pytest.fail("no completion after the backend came back")
    for _ in range(200):                              # nothing leaks: every request ends
        st = await command(client, "quickcode.status")
        if st["pending"] == 0:
            break
        await asyncio.sleep(0.05)
    assert st["pending"] == 0 and st["connects"] >= 2, st
