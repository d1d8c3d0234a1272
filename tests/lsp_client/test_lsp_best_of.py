"""`explicitBestOf` through a real LSP client (pytest-lsp) → `quickcode lsp` → WebSocket → the backend (real
uvicorn, the `FakeEngine`): an inline completion the user invoked asks for the best of several lines and shows
the one the scorer picks; an automatic one asks as always (streamed greedy). What the backend does with
best_of: tests/backend/test_best_of.py (fake) and tests/backend/test_backend_engine.py (vLLM)."""
from __future__ import annotations

import sys

import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.fake_engine import FakeEngine, sample_marker
from tests.conftest import fake_settings
from tests.support.lsp_held import connect
from tests.lsp_client.test_lsp_e2e import inline_params, open_doc

TEXT = "def area(w, h):\n"
LINES = {sample_marker(i): [f"    return w * h{i}", "\n"] for i in range(8)}


def script(prompt: str):
    return next((toks for m, toks in LINES.items() if prompt.endswith(m)), ["    return w", " + h", "\n"])


def scorer(ids, first) -> float:       # the code around it likes sample 2's line (the model's say, in a test)
    return 0.0 if ENGINE[0].tokenizer.decode(ids).count("h2\n") else -5.0


ENGINE: list[FakeEngine] = []


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def client(lsp_client: LanguageClient, fake_backend):
    engine = FakeEngine(fake_settings(), script=script, scorer=scorer)
    ENGINE[:] = [engine]
    b = fake_backend(engine)
    await connect(lsp_client, b.ws_url, {"cache": False, "inflightReuse": False, "explicitBestOf": 5,
                                        "suggestionUnit": "block", "linePatienceMs": 0, "blockPatienceMs": 0})
    yield
    await lsp_client.shutdown_session()


async def test_an_invoked_completion_shows_the_best_line_and_an_automatic_one_streams_greedy(client: LanguageClient):
    engine = ENGINE[0]
    open_doc(client, TEXT)
    res = await client.text_document_inline_completion_async(inline_params(TEXT, invoked=True))
    assert [i.insert_text for i in res.items] == ["    return w * h2"], res
    # one request of the language server: the greedy line, 4 samples, a score for each of the 5 distinct lines
    asked = sorted(k.rsplit(":", 1)[1].split("-", 1)[1] for k in engine.requests)
    assert asked == ["g-0", *(f"n-{i}" for i in range(4)), *(f"s-s{i}" for i in range(5))], asked
    before = set(engine.requests)
    res = await client.text_document_inline_completion_async(inline_params(TEXT, invoked=False))
    assert [i.insert_text for i in res.items] == ["    return w + h"], res
    new = set(engine.requests) - before
    assert len(new) == 1 and not any(k.endswith(("-g-0", "-n-0")) for k in new), new


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]))
async def word_client(lsp_client: LanguageClient, fake_backend):
    engine = FakeEngine(fake_settings(), script=script, scorer=scorer)
    ENGINE[:] = [engine]
    b = fake_backend(engine)
    await connect(lsp_client, b.ws_url, {"explicitBestOf": 5})        # the client's defaults: the word unit, cache on
    yield
    await lsp_client.shutdown_session()


async def test_by_the_word_unit_an_invoked_best_line_is_shown_whole_not_the_cached_word(word_client: LanguageClient):
    open_doc(word_client, TEXT)
    auto = await word_client.text_document_inline_completion_async(inline_params(TEXT, invoked=False))
    assert [i.insert_text for i in auto.items] == ["    return"], auto       # typing: the next word (and cached)
    res = await word_client.text_document_inline_completion_async(inline_params(TEXT, invoked=True))
    assert [i.insert_text for i in res.items] == ["    return w * h2"], res  # asked for: the best line, whole
