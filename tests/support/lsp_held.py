"""Shared by the LSP tests over a held FakeEngine (tests/lsp_client/test_lsp_cancel.py,
tests/lsp_client/test_lsp_more_text.py): start
the language server's session against a backend and wait until it is connected; ask its status until it holds."""
from __future__ import annotations

from lsprotocol import types as T
from pytest_lsp import LanguageClient

from tests.lsp_client.test_lsp_e2e import capabilities, command, quiet_status
from tests.support.waits import until_async

HANG_S = 30.0


async def status_if(client: LanguageClient, pred) -> dict | None:
    st = await command(client, "quickcode.status")
    return st if pred(st) else None


async def connect(client: LanguageClient, ws_url: str, options: dict) -> None:
    quiet_status(client)
    await client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp/quickcode_e2e",
        initialization_options={"endpoints": [ws_url], "predictor": False, "warmup": False, "deadlineMs": 600_000,
                                "stateDir": "", **options}))
    await until_async(lambda: status_if(client, lambda st: st.get("connected")), "the server to connect",
                      hang_s=HANG_S)
