"""Say why (issue 17 item 5): a wrong API token or an incompatible server is shown once as an editor message
(`window/showMessage`), not a silent retry loop; new settings are tried at once and then work.

A real LSP client (pytest-lsp) drives `quickcode lsp` against a real backend on the fake engine with tokens on,
and against a WebSocket server that answers `hello` as a quickcode server of another protocol version would."""
from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient
from websockets.sync.server import serve

from quickcode.backend.auth import hash_token
from tests.lsp_client.test_lsp_e2e import capabilities, command, quiet_status

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"])
OPTIONS = {"predictor": False, "warmup": False, "stateDir": ""}


async def status_until(client: LanguageClient, pred, timeout_s: float = 10.0) -> dict:
    end = time.monotonic() + timeout_s
    while True:
        st = await command(client, "quickcode.status")
        if pred(st) or time.monotonic() > end:
            return st
        await asyncio.sleep(0.05)


def errors(client: LanguageClient) -> list[str]:
    return [m.message for m in client.messages if m.type == T.MessageType.Error]


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    quiet_status(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_a_wrong_token_is_shown_once_and_a_right_one_connects(client: LanguageClient, fake_backend, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice:{hash_token('right-token')}\n")
    b = fake_backend(auth_tokens_file=tokens)
    await client.initialize_session(T.InitializeParams(capabilities=capabilities(), root_uri="file:///tmp",
                                                       initialization_options={**OPTIONS, "endpoints": [b.ws_url],
                                                                               "token": "wrong-token"}))
    st = await status_until(client, lambda s: s.get("refused"))
    assert st["refused"] == "token" and not st["connected"]
    await asyncio.sleep(3.0)                               # (the old client retried every ≤ 2 s, silently)
    (message,) = errors(client)
    assert "refused the API token" in message and "quickcode.token" in message
    st = await command(client, "quickcode.status")
    assert st["connects"] == 0 and not st["connected"]
    client.workspace_did_change_configuration(T.DidChangeConfigurationParams(
        settings={"quickcode": {"token": "right-token"}}))
    st = await status_until(client, lambda s: s.get("connected"), 5.0)
    assert st["connected"] and st["refused"] == "" and len(errors(client)) == 1


def _other_version_server(port_box: list, stop: threading.Event) -> None:
    def handler(ws):
        json.loads(ws.recv())
        ws.send(json.dumps({"kind": "welcome", "protocol_version": 99, "session_id": "s1"}))
        ws.recv()                                          # holds the connection until the client goes
    with serve(handler, "127.0.0.1", 0) as server:
        port_box.append(server.socket.getsockname()[1])
        threading.Thread(target=lambda: (stop.wait(), server.shutdown()), daemon=True).start()
        server.serve_forever()


async def test_an_incompatible_server_is_shown_once(client: LanguageClient):
    port, stop = [], threading.Event()
    threading.Thread(target=_other_version_server, args=(port, stop), daemon=True).start()
    while not port:
        await asyncio.sleep(0.01)
    try:
        await client.initialize_session(T.InitializeParams(capabilities=capabilities(), root_uri="file:///tmp",
                                                           initialization_options={**OPTIONS, "endpoints": [
                                                               f"ws://127.0.0.1:{port[0]}/v1/ws"]}))
        st = await status_until(client, lambda s: s.get("refused"))
        assert st["refused"] == "incompatible"
        await asyncio.sleep(3.0)
        (message,) = errors(client)
        assert "not a compatible quickcode backend" in message and "protocol 99" in message
    finally:
        stop.set()
