"""`$/cancelRequest` through a real LSP client (pytest-lsp) → `quickcode lsp` → a `cancel` frame → the backend
aborts the engine request.

The backend is the real server (uvicorn, WebSockets) in this process over the `FakeEngine` on a `ManualClock`:
the request is held streaming — its first token written, the next never due — for as long as the test needs, so
the cancel always finds it running, on any machine. That a cancel frame aborts vLLM's own request is
tests/backend/test_backend_engine.py's.
"""
from __future__ import annotations

import asyncio
import itertools
import sys

import pytest
import pytest_lsp
from lsprotocol import types as T
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.fake_engine import FakeEngine, ManualClock
from tests.conftest import fake_settings
from tests.lsp_client.test_lsp_e2e import command, inline_params, open_doc
from tests.support.lsp_held import HANG_S, connect, status_if
from tests.support.waits import until_async

TEXT = "import os\n"


@pytest.fixture
def held(fake_backend):
    """(backend, engine, clock): every request writes " x" tokens, each only when the test moves the clock."""
    clock = ManualClock()
    engine = FakeEngine(fake_settings(), script=lambda prompt: itertools.repeat(" x"), clock=clock)
    return fake_backend(engine), engine, clock


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient, held):
    b, _, _ = held
    await connect(lsp_client, b.ws_url, {"cache": False, "inflightReuse": False, "maxTokens": 256, "multilineMaxLines": 200,
                                        "linePatienceMs": 0, "blockPatienceMs": 0})
    yield
    await lsp_client.shutdown_session()


async def test_cancel_request_aborts_the_engine_request(client: LanguageClient, held):
    _, engine, clock = held
    open_doc(client, TEXT)
    task = asyncio.create_task(client.protocol.send_request_async(
        T.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(TEXT), msg_id=4242))
    # streaming: running in the engine, its first token written, and that chunk with the language server
    await until_async(lambda: _async(engine.live and engine.live[0].state == "running"),
                      "the request to run in the engine", hang_s=HANG_S)
    (req,) = engine.live
    await asyncio.to_thread(clock.step, engine.ttft_s)
    st = await until_async(lambda: status_if(client, lambda st: st["streaming_ids"]), "the first chunk to arrive",
                           hang_s=HANG_S)
    rid = st["streaming_ids"][-1]
    assert not task.done() and req.state == "running" and len(req.tokens) == 1
    client.cancel_request(T.CancelParams(id=4242))           # → $/cancelRequest
    with pytest.raises(JsonRpcRequestCancelled):             # pygls answers -32800
        await asyncio.wait_for(task, HANG_S)
    # the cancel frame reached the backend, which aborted the engine request
    await until_async(lambda: _async(req.state == "finished"), "the engine request to end", hang_s=HANG_S)
    assert req.finish_reason == "abort" and len(req.tokens) == 1, (req.finish_reason, req.ended_by, req.tokens)
    assert engine.stats.num_running == engine.stats.num_waiting == 0 and not engine.stats.finished
    stats = await until_async(lambda: _status_if_stats(client, rid), "the cancelled request's waterfall",
                              hang_s=HANG_S)
    fall = [w for w in stats["waterfalls"] if w["id"] == rid]
    assert fall[-1]["finish"] == "cancelled" and fall[-1]["output_tokens"] >= 1, fall


async def _status_if_stats(client: LanguageClient, rid: str) -> dict | None:
    stats = await command(client, "quickcode.stats")
    return stats if any(w["id"] == rid and w.get("finish") == "cancelled" for w in stats["waterfalls"]) else None


async def _async(value):
    return value
