"""A line shown early is completed when the editor asks again — through a real LSP client (pytest-lsp) →
`quickcode lsp` → WebSocket → the real server over the `FakeEngine` on a `ManualClock`.

The engine writes one token each time the test moves the clock, so the line is still being written when the
answer is sent, on any machine: the answer is the settled words; once the line ends the server sends
`$/quickcode/moreText` for that place (what our VS Code and Neovim integrations re-ask on), and asking again
there gives the whole line from the same generation, with no new backend request.
"""
from __future__ import annotations

import asyncio
import sys

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.fake_engine import FakeEngine, ManualClock
from tests.conftest import fake_settings
from tests.lsp_client.test_lsp_e2e import URI, _plain, command, end_pos, inline_params, open_doc, type_text
from tests.support.lsp_held import HANG_S, connect, status_if
from tests.support.waits import until_async

TEXT = "def add(a, b, c):\n    return"
LINE = [" a", " +", " b", " +", " c", "\n"]


@pytest.fixture
def held(fake_backend):
    """(backend, engine, clock): every request writes LINE, a token each time the test moves the clock."""
    clock = ManualClock()
    engine = FakeEngine(fake_settings(), script=lambda prompt: iter(LINE), clock=clock)
    return fake_backend(engine), engine, clock


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient, held):
    b, _, _ = held
    await connect(lsp_client, b.ws_url, {"suggestionUnit": "block", "linePatienceMs": 1, "blockPatienceMs": 1})
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def best_of_client(lsp_client: LanguageClient, held):
    b, _, _ = held
    await connect(lsp_client, b.ws_url, {"suggestionUnit": "block", "linePatienceMs": 1, "blockPatienceMs": 1,
                                        "explicitBestOf": 5})
    yield
    await lsp_client.shutdown_session()


async def _written(clock: ManualClock, engine: FakeEngine, req, done) -> bool:
    """Move the clock a token's time on unless `done()` (a token is due only to a sleeper already waiting:
    at most one token per move), then say whether it is done."""
    if done():
        return True
    clock.advance(engine.per_token_s)
    await asyncio.sleep(0.05)                           # (the client's 1 ms patience, the answer on its way)
    return done()


async def _async(value):
    return value


async def test_a_line_shown_early_is_completed_when_the_editor_asks_again(client: LanguageClient, held):
    await _shown_early_then_completed(client, held, invoked=False)


async def test_the_vs_code_re_ask_is_served_from_the_same_generation_with_explicit_best_of(
        best_of_client: LanguageClient, held):
    """Our VS Code extension re-asks with `editor.action.inlineSuggest.trigger`, an Invoked request: at the place
    the notice named it is the rest of the line, not a new best-of request."""
    await _shown_early_then_completed(best_of_client, held, invoked=True)


async def _shown_early_then_completed(client: LanguageClient, held, invoked: bool) -> None:
    _, engine, clock = held
    notices: list = []
    client.feature("$/quickcode/moreText")(lambda params: notices.append(_plain(params)))
    open_doc(client, TEXT)
    task = asyncio.create_task(client.text_document_inline_completion_async(inline_params(TEXT, invoked=False)))
    await until_async(lambda: _async(engine.live and engine.live[0].state == "running"),
                      "the request to run in the engine", hang_s=HANG_S)
    (req,) = engine.live
    # a token at a time, never the line's end: the answer must come while the line is still being written
    await until_async(lambda: _written(clock, engine, req, lambda: task.done() or len(req.tokens) >= len(LINE) - 1),
                      "the answer or the line's last token", hang_s=HANG_S)
    result = await asyncio.wait_for(task, HANG_S)
    assert req.state == "running" and len(req.tokens) < len(LINE), "answered before the line was written"
    assert result.items and result.items[0].insert_text.strip(), result
    first = result.items[0].insert_text
    assert "".join(LINE).startswith(first) and len(first) < len("".join(LINE).rstrip("\n")), first
    await until_async(lambda: _written(clock, engine, req, lambda: req.state != "running"), "the rest of the line to be written", hang_s=HANG_S)
    await until_async(lambda: _async(notices), "the $/quickcode/moreText notice", hang_s=HANG_S)
    pos = end_pos(TEXT)
    assert notices == [{"textDocument": {"uri": URI}, "position": {"line": pos.line, "character": pos.character}}]
    before = (await command(client, "quickcode.stats"))["backend_requests"]
    again = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(TEXT, invoked=invoked)),
                                   HANG_S)
    assert again.items, "asked again where the notice said, the whole line is there"
    assert again.items[0].insert_text == "".join(LINE).rstrip("\n"), (first, again.items[0].insert_text)
    assert (await command(client, "quickcode.stats"))["backend_requests"] == before


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def late_client(lsp_client: LanguageClient, held):
    b, _, _ = held
    await connect(lsp_client, b.ws_url, {"suggestionUnit": "line", "deadlineMs": 200})
    yield
    await lsp_client.shutdown_session()


async def test_a_suggestion_past_the_deadline_is_announced_and_served_when_asked_again(
        late_client: LanguageClient, held):
    """The engine writes nothing until the clock moves: the editor's request is answered empty at the deadline
    (it must never wait longer), the generation goes on, and once its line is in the editor is told to ask
    again there, and gets it from that generation."""
    client, (_, engine, clock) = late_client, held
    notices: list = []
    client.feature("$/quickcode/moreText")(lambda params: notices.append(_plain(params)))
    open_doc(client, TEXT)
    result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(TEXT)), HANG_S)
    assert not (result and result.items), "answered empty at the deadline"
    (req,) = engine.live
    assert req.state == "running" and not req.tokens and not notices
    await until_async(lambda: _written(clock, engine, req, lambda: req.state != "running"), "the line to be written",
                      hang_s=HANG_S)
    await until_async(lambda: _async(notices), "the $/quickcode/moreText notice", hang_s=HANG_S)
    pos = end_pos(TEXT)
    assert notices == [{"textDocument": {"uri": URI}, "position": {"line": pos.line, "character": pos.character}}]
    stats = await command(client, "quickcode.stats")
    again = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(TEXT)), HANG_S)
    assert again.items and again.items[0].insert_text == "".join(LINE).rstrip("\n"), again
    after = await command(client, "quickcode.stats")
    assert (stats["late"], after["backend_requests"]) == (1, stats["backend_requests"])


async def test_a_late_suggestion_is_not_announced_once_the_user_typed_on(late_client: LanguageClient, held):
    client, (_, engine, clock) = late_client, held
    notices: list = []
    client.feature("$/quickcode/moreText")(lambda params: notices.append(_plain(params)))
    open_doc(client, TEXT)
    result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(TEXT)), HANG_S)
    assert not (result and result.items)
    (req,) = engine.live
    type_text(client, TEXT, " a", 2)
    await until_async(lambda: _written(clock, engine, req, lambda: req.state != "running"), "the request to end",
                      hang_s=HANG_S)
    await asyncio.sleep(0.2)
    assert notices == [], "the editor asks by itself after a keystroke"
