"""The language server without a backend: editors get an empty answer at once, never an error or a hang."""
from __future__ import annotations

import asyncio
import sys

import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp_client.test_lsp_e2e import quiet_status, capabilities, command, inline_params, open_doc


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp",
                                                              "--endpoint", "ws://127.0.0.1:9/v1/ws"]))
async def offline_client(lsp_client: LanguageClient):
    quiet_status(lsp_client)
    await lsp_client.initialize_session(T.InitializeParams(capabilities=capabilities(), root_uri="file:///tmp",
                                                           initialization_options={"deadlineMs": 3_600_000}))
    yield
    await lsp_client.shutdown_session()


async def test_unreachable_backend_gives_an_empty_answer_at_once(offline_client: LanguageClient):
    open_doc(offline_client, "import ")
    # the editor's deadline is an hour: an answer within the hang detector's 30 s did not wait for it (nor for
    # a backend) — no speed expectation
    result = await asyncio.wait_for(offline_client.text_document_inline_completion_async(inline_params("import ")), 30)
    assert not result.items
    st = await command(offline_client, "quickcode.status")
    assert st["connected"] is False and st["last_error"]
