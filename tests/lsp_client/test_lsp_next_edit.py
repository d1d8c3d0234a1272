"""Next-edit suggestions end to end: a real LSP client (pytest-lsp) drives `quickcode lsp` with `nextEdit` on,
over a real WebSocket to a backend on the fake engine (its "model" rewrites the editable region it is shown:
`a + b` → `a * b`) — `textDocument/copilotInlineEdit` answers the edit as a range away from the cursor, an
inline completion with nothing to insert answers it as a ranged item (not to a client that asks the former:
it draws the edit itself), a request for an older version of the
document gets no edit, and with the setting off nothing is asked. Then one request through a real backend
(vLLM on the committed models): the edit's way streams to its end without an error."""
from __future__ import annotations

import asyncio
import sys

import pytest
import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.edit_prompt import CURSOR, REGION_END, REGION_START
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.settings import Settings
from tests.lsp_client.test_lsp_e2e import _plain, capabilities, command, quiet_status

URI = "file:///tmp/quickcode_nes/calc.py"
DOC = "def add(a, b):\n    total = a + b\n    return total\n\n\nprint(add(1, 2))\n"
LSP = ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"])


def rewrite_region(prompt: str) -> list[str]:
    """The fake model: for an edit prompt, its region with `a + b` made `a * b`; for a completion, nothing."""
    if not prompt.endswith(REGION_START + "\n"):
        return []
    region = prompt.split(REGION_START + "\n")[1].split(REGION_END)[0].replace(CURSOR, "")
    return [region.replace("a + b", "a * b"), REGION_END, "\n"]


async def start(client: LanguageClient, ws_url: str, **options) -> None:
    quiet_status(client)
    await client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp/quickcode_nes",
        initialization_options={"endpoints": [ws_url], "predictor": False, "warmup": False, "stateDir": "",
                                "debounceMs": 0, "adaptiveDebounce": False, **options}))
    for _ in range(400):
        if (await command(client, "quickcode.status")).get("connected"):
            break
        await asyncio.sleep(0.02)
    client.text_document_did_open(T.DidOpenTextDocumentParams(
        text_document=T.TextDocumentItem(uri=URI, language_id="python", version=1, text=DOC)))


async def inline_edit(client: LanguageClient, line: int, character: int, version: int) -> dict:
    result = await client.protocol.send_request_async("textDocument/copilotInlineEdit", {
        "textDocument": {"uri": URI, "version": version}, "position": {"line": line, "character": character}})
    return _plain(result) if not isinstance(result, dict) else result


@pytest_lsp.fixture(config=LSP)
async def client(lsp_client: LanguageClient, fake_backend):
    lsp_client.engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite_region)
    lsp_client.fake = fake_backend(lsp_client.engine)
    yield
    await lsp_client.shutdown_session()


def edit_prompts(engine: FakeEngine) -> int:
    return sum(1 for r in engine.requests.values()
               if engine.tokenizer.decode(r.prompt_ids).endswith(REGION_START + "\n"))


async def test_copilot_inline_edit_answers_the_edit_as_a_range_away_from_the_cursor(client: LanguageClient):
    await start(client, client.fake.ws_url, nextEdit=True, nextEditLines=1, deadlineMs=5000)
    res = await inline_edit(client, 2, 16, 1)                  # the cursor at the end of `return total`
    (edit,) = res["edits"]
    assert edit["range"] == {"start": {"line": 1, "character": 14}, "end": {"line": 1, "character": 15}}
    assert edit["text"] == "*" and edit["textDocument"] == {"uri": URI, "version": 1}
    assert edit["command"]["command"] == "quickcode.accept"
    assert (await command(client, "quickcode.stats"))["next_edits"]["answered"] == 1


async def test_an_inline_completion_with_nothing_to_insert_answers_the_edit_on_its_line(client: LanguageClient):
    await start(client, client.fake.ws_url, nextEdit=True, nextEditLines=0, deadlineMs=5000)
    res = await client.text_document_inline_completion_async(T.InlineCompletionParams(
        text_document=T.TextDocumentIdentifier(uri=URI), position=T.Position(line=1, character=17),
        context=T.InlineCompletionContext(trigger_kind=T.InlineCompletionTriggerKind.Automatic)))
    (item,) = res.items
    assert item.insert_text == "*" and item.range == T.Range(T.Position(line=1, character=14),
                                                             T.Position(line=1, character=15))


async def test_a_client_that_asks_for_next_edits_gets_no_second_copy_as_ghost_text(client: LanguageClient):
    """VS Code's extension and the Neovim plugin draw the edit of `copilotInlineEdit` themselves: the same
    edit as a ranged inline completion would be drawn twice on the cursor's line."""
    await start(client, client.fake.ws_url, nextEdit=True, nextEditLines=0, deadlineMs=5000)
    assert len((await inline_edit(client, 1, 17, 1))["edits"]) == 1
    res = await client.text_document_inline_completion_async(T.InlineCompletionParams(
        text_document=T.TextDocumentIdentifier(uri=URI), position=T.Position(line=1, character=17),
        context=T.InlineCompletionContext(trigger_kind=T.InlineCompletionTriggerKind.Automatic)))
    assert res is None or not res.items


async def test_an_edit_asked_for_an_older_version_is_never_answered(client: LanguageClient):
    await start(client, client.fake.ws_url, nextEdit=True, nextEditLines=1, deadlineMs=5000)
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=URI, version=2),
        content_changes=[T.TextDocumentContentChangePartial(
            range=T.Range(T.Position(line=5, character=0), T.Position(line=5, character=0)), text="#")]))
    assert (await inline_edit(client, 2, 16, 1))["edits"] == []
    assert len((await inline_edit(client, 2, 16, 2))["edits"]) == 1     # the version it is at: answered


async def test_off_by_default_no_edit_is_asked(client: LanguageClient):
    await start(client, client.fake.ws_url, deadlineMs=5000)
    assert (await inline_edit(client, 2, 16, 1))["edits"] == []
    assert edit_prompts(client.engine) == 0


@pytest_lsp.fixture(config=LSP)
async def real(lsp_client: LanguageClient, backend):
    await start(lsp_client, backend.ws_url, nextEdit=True, nextEditLines=1, nextEditMaxTokens=48,
                deadlineMs=60_000)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.engine
async def test_a_real_edit_request_streams_to_its_end_through_a_real_backend(real: LanguageClient):
    """The model was not tuned for edits: no edit is the expected answer; the way must end cleanly."""
    res = await inline_edit(real, 2, 16, 1)
    assert isinstance(res["edits"], list)
    counts = (await command(real, "quickcode.stats"))["next_edits"]
    assert counts["asked"] == 1 and counts["answered"] + counts["none"] == 1, counts
    assert counts["late"] == counts["failed"] == counts["stale"] == 0, counts
