"""Never stale (issue 15 item 3): driven the way Neovim 0.12 drives it — a request at the cursor, typing on
without cancelling it — with the event loop stalled between each suggestion and its answer, the language server
answers only what applies at the cursor the editor has when the answer arrives: the rest of a suggestion the
user typed into (its range at the new cursor), or nothing.

A real LSP client (pytest-lsp) drives `quickcode lsp` (with the injected stall, tests/support/lsp_stall_server.py)
against a real backend on the fake engine (quickcode/backend/fake_engine.py), whose "model" continues a known
file."""
from __future__ import annotations

import asyncio
import random
import sys

import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.settings import Settings
from tests.lsp_client.test_lsp_e2e import capabilities, command, quiet_status

URI = "file:///tmp/quickcode_stale/mod.py"
TARGET = ("import os\n\n\ndef total(values, weights):\n    result = 0\n    for value, weight in zip(values, weights):\n"
          "        result += value * weight\n    return result\n\n\ndef mean(values):\n    return total(values, "
          "[1] * len(values)) / len(values)\n\n\nclass Account:\n    def __init__(self, owner, balance=0):\n"
          "        self.owner = owner\n        self.balance = balance\n\n    def deposit(self, amount):\n"
          "        self.balance += amount\n        return self.balance\n")


def continue_target(prompt: str) -> list[str]:
    """The fake model: the rest of TARGET's line (and the next) after the prompt's prefix, in 2-character tokens."""
    prefix = prompt.split("<fim_suffix>")[0].split("<fim_prefix>")[-1]
    for tail in (prefix[-40:], prefix[-12:], prefix[-4:]):
        at = TARGET.find(tail) if tail else -1
        if at >= 0:
            rest = TARGET[at + len(tail):]
            end = rest.find("\n", rest.find("\n") + 1)
            text = rest[: end + 1 if end >= 0 else len(rest)]
            return [text[i:i + 2] for i in range(0, len(text), 2)]
    return ["x"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "tests.support.lsp_stall_server"]))
async def client(lsp_client: LanguageClient, fake_backend):
    engine = FakeEngine(Settings(spec_method="off", heal_token=False), script=continue_target, ttft_s=0.03, per_token_s=0.005)
    b = fake_backend(engine)
    quiet_status(lsp_client)
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=capabilities(), root_uri="file:///tmp/quickcode_stale",
        initialization_options={"endpoints": [b.ws_url], "predictor": False, "warmup": False, "stateDir": "",
                                "debounceMs": 0, "adaptiveDebounce": False, "deadlineMs": 3000}))
    for _ in range(200):
        if (await command(lsp_client, "quickcode.status")).get("connected"):
            break
        await asyncio.sleep(0.02)
    yield
    await lsp_client.shutdown_session()


class Editor:
    """The client's own copy of the document and its cursor (ASCII text: columns are the same in UTF-16)."""

    def __init__(self, client: LanguageClient, text: str):
        self.client, self.text, self.cursor, self.version = client, text, len(text), 1
        client.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(
            uri=URI, language_id="python", version=1, text=text)))

    def position(self, offset: int | None = None) -> T.Position:
        offset = self.cursor if offset is None else offset
        line = self.text.count("\n", 0, offset)
        return T.Position(line=line, character=offset - (self.text.rfind("\n", 0, offset) + 1))

    def type(self, s: str) -> None:
        pos = self.position()
        self.version += 1
        self.text, self.cursor = self.text[:self.cursor] + s + self.text[self.cursor:], self.cursor + len(s)
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=URI, version=self.version),
            content_changes=[T.TextDocumentContentChangePartial(range=T.Range(pos, pos), text=s)]))


def applies_inline(ed: Editor, item: T.InlineCompletionItem) -> bool:
    """An insertion at the cursor, and (the document being the file so far) what the model wrote there."""
    return item.range == T.Range(ed.position(), ed.position()) and bool(item.insert_text) \
        and TARGET.startswith(ed.text[:ed.cursor] + item.insert_text)


def applies_menu(ed: Editor, item: T.CompletionItem) -> bool:
    """An edit from the word before the cursor to the cursor that starts with that word, and what the model wrote."""
    line_start = ed.text.rfind("\n", 0, ed.cursor) + 1
    word = ed.text[line_start:ed.cursor]
    word = word[len(word.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")):]
    start = ed.position(ed.cursor - len(word))
    return item.text_edit.range == T.Range(start, ed.position()) and item.text_edit.new_text.startswith(word) \
        and TARGET.startswith(ed.text[:ed.cursor - len(word)] + item.text_edit.new_text)


async def test_answers_apply_at_the_cursor_the_editor_has_when_they_arrive(client: LanguageClient):
    rng = random.Random(15)
    cut = TARGET.index("def total(")
    ed = Editor(client, TARGET[:cut])
    wrong, answered, rounds = [], 0, 0
    while ed.cursor < len(TARGET) - 4 and rounds < 40:
        rounds += 1
        ed.type(TARGET[ed.cursor: ed.cursor + rng.randint(1, 6)])       # the user types the file on ...
        menu = rng.random() < 0.3
        if menu:
            req = client.text_document_completion_async(T.CompletionParams(
                text_document=T.TextDocumentIdentifier(uri=URI), position=ed.position()))
        else:
            req = client.text_document_inline_completion_async(T.InlineCompletionParams(
                text_document=T.TextDocumentIdentifier(uri=URI), position=ed.position(),
                context=T.InlineCompletionContext(trigger_kind=T.InlineCompletionTriggerKind.Automatic)))
        task = asyncio.ensure_future(req)
        await asyncio.sleep(rng.uniform(0.0, 0.25))                     # ... asks, and types on: no cancel
        if rng.random() < 0.7:
            ed.type(TARGET[ed.cursor: ed.cursor + rng.randint(1, 3)])   # what the model writes: typed into it
        else:
            ed.type(rng.choice(["zz", "#", " q"]))                       # something else: the file diverges
        result = await asyncio.wait_for(task, 10)
        for item in result.items:
            answered += 1
            if not (applies_menu(ed, item) if menu else applies_inline(ed, item)):
                wrong.append((ed.text[-40:], item))
        if not TARGET.startswith(ed.text[:ed.cursor]):                  # undo what diverged: back on the file
            good = 0
            while TARGET.startswith(ed.text[:good + 1]) and good < ed.cursor:
                good += 1
            ed.client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri=URI)))
            ed = Editor(client, TARGET[:good])
    stats = await command(client, "quickcode.stats")
    print(f"\n{rounds} requests, {answered} items, {stats['rebased']} rebased onto the cursor typed on to, "
          f"{stats['stale_dropped']} dropped as stale")
    assert wrong == [], wrong[:3]
    assert answered > 0 and stats["rebased"] > 0      # typed into while stalled: its rest, further on
