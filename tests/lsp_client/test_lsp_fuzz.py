"""Any input survived (issue 15 item 4): hypothesis drives `quickcode lsp` through a real LSP client (pytest-lsp's)
against a real backend on the fake engine, in the UTF-16 and the UTF-8 position encodings, with what an editor
(or a broken one) may send: positions and lines out of range, positions inside surrogate pairs and multi-byte
characters, huge didChanges (a 1 MB insert, a 200 KB one-line file), changes to unknown or closed documents,
requests after didClose, settings of the wrong types and out of range, accept commands with odd arguments,
concurrent requests and cancels, next-edit requests (`textDocument/copilotInlineEdit`, next edits on) with any
params. ≥ 2,000 cases: the server never exits, never answers a request with an error
(a cancelled request's -32800 aside: editors expect it), never shows the user an error message, and still
completes afterwards — a 200 KB one-line file in the middle, with a prompt within the welcome's
`max_prompt_chars`."""
from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from lsprotocol import types as T
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig

from quickcode.backend.edit_prompt import REGION_END, REGION_START
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.settings import Settings
from tests.lsp_client.test_lsp_e2e import capabilities, command

pytestmark = pytest.mark.slow                       # ~90 s for the 2,000 cases
CASES = int(os.environ.get("QC_FUZZ_CASES", "2000"))
MAX_PROMPT_CHARS = 12_000
URIS = ["file:///w/a.py", "file:///w/b.py", "file:///w/%C3%A9t%C3%A9.py", "untitled:Untitled-1", "file:///w/never.py"]
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from("😀𝔘é\n\r\t({:. "),
               max_size=60)
BIG = 2**31 - 1
POS = st.builds(T.Position, line=st.integers(0, 5) | st.integers(0, BIG), character=st.integers(0, 12) | st.integers(0, BIG))
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=8),
                    lambda xs: st.lists(xs, max_size=3) | st.dictionaries(st.text(max_size=8), xs, max_size=3), max_leaves=5)
SETTINGS = st.dictionaries(st.sampled_from(["maxTokens", "deadlineMs", "prefixMaxChars", "suffixMaxChars",
                                            "windowQuantumLines", "debounceMs", "languages", "endpoints", "cache",
                                            "multilineMaxLines", "linePatienceMs", "snippetLines", "cacheMaxKeys",
                                            "token", "enabled", "nonsense", "nextEdit", "nextEditLines",
                                            "nextEditHistoryChars"]), JSON, max_size=3)
SAFE = {"deadlineMs": 1000, "debounceMs": 0, "adaptiveDebounce": False, "predictor": False, "stateDir": "",
        "warmup": False, "maxTokens": 64, "prefixMaxChars": 3000, "suffixMaxChars": 800, "windowQuantumLines": 16,
        "languages": {}, "cache": True, "multilineMaxLines": 8, "linePatienceMs": 150, "snippetLines": 16,
        "token": "", "enabled": True, "nextEdit": True, "nextEditLines": 2, "nextEditHistoryChars": 4000}
# (+ the endpoint) what every case starts from


def huge_text(kind: int) -> str:
    return ("var a=1;" * 25_000) if kind == 0 else ("x = 1  # 😀\n" * 80_000)     # 200 KB one line / ~1 MB


OP = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(URIS), TEXT),
    st.tuples(st.just("change"), st.sampled_from(URIS), st.tuples(POS, POS, TEXT)),
    st.tuples(st.just("replace"), st.sampled_from(URIS), TEXT),
    st.tuples(st.just("huge"), st.sampled_from(URIS[:2]), st.integers(0, 1)),
    st.tuples(st.just("close"), st.sampled_from(URIS), st.none()),
    st.tuples(st.just("inline"), st.sampled_from(URIS), POS),
    st.tuples(st.just("completion"), st.sampled_from(URIS), POS),
    st.tuples(st.just("concurrent"), st.sampled_from(URIS), st.lists(POS, min_size=2, max_size=5)),
    st.tuples(st.just("cancel"), st.sampled_from(URIS), POS),
    st.tuples(st.just("settings"), st.none(), SETTINGS),
    st.tuples(st.just("accept"), st.none(), JSON),
    st.tuples(st.just("edit"), st.sampled_from(URIS), st.tuples(POS, st.integers(-1, 9), JSON | st.none())),
)


def fake_model(prompt: str) -> list[str]:
    if prompt.endswith(REGION_START + "\n"):        # a next edit: the region written again as one line
        return ["value = 1", "\n", REGION_END]
    return [" value", " +", " 1", "\n"]


class Driver:
    """The LSP client on an event loop of its own thread (hypothesis calls from the test's thread)."""

    def __init__(self, url: str, encoding: T.PositionEncodingKind):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.url, self.encoding = url, encoding
        self.safe = {**SAFE, "endpoints": [url]}
        self.client = self.run(self._start())
        self.ids = 0
        self.versions: dict[str, int] = {}
        self.errors: list[str] = []
        self.cases = 0

    def run(self, coro, timeout_s: float = 60.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    async def _start(self):
        client = await ClientServerConfig(server_command=[sys.executable, "-m", "quickcode", "lsp"]).start()
        client.feature("$/quickcode/status")(lambda params: None)
        client.feature("$/quickcode/moreText")(lambda params: None)
        caps = capabilities()
        caps.general = T.GeneralClientCapabilities(position_encodings=[self.encoding])
        result = await client.initialize_session(T.InitializeParams(
            capabilities=caps, root_uri="file:///w", initialization_options=self.safe))
        assert result.capabilities.position_encoding == self.encoding
        return client

    def stop(self) -> None:
        try:
            self.run(self.client.shutdown_session(), 30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    def ask(self, method: str, uri: str, pos: T.Position, msg_id: str | None = None):
        doc = T.TextDocumentIdentifier(uri=uri)
        if method == "inline":
            return self.client.protocol.send_request_async(T.TEXT_DOCUMENT_INLINE_COMPLETION, T.InlineCompletionParams(
                text_document=doc, position=pos,
                context=T.InlineCompletionContext(trigger_kind=T.InlineCompletionTriggerKind.Invoked)), msg_id=msg_id)
        return self.client.protocol.send_request_async(T.TEXT_DOCUMENT_COMPLETION, T.CompletionParams(
            text_document=doc, position=pos), msg_id=msg_id)

    async def checked(self, method: str, uri: str, pos: T.Position, msg_id: str | None = None):
        try:
            return await asyncio.wait_for(self.ask(method, uri, pos, msg_id), 20)
        except JsonRpcRequestCancelled:
            if msg_id is None:
                self.errors.append(f"{method} {uri} {pos}: cancelled without a cancel")
        except JsonRpcException as e:
            self.errors.append(f"{method} {uri} {pos}: error response {e!r}")

    async def edit(self, uri: str, pos: T.Position, version: int, junk) -> None:
        """A next-edit request: well-formed (at `version`, -1: none), or `junk` as its params."""
        params = junk if junk is not None else {
            "textDocument": {"uri": uri, **({"version": version} if version >= 0 else {})},
            "position": {"line": pos.line, "character": pos.character}}
        try:
            res = await asyncio.wait_for(self.client.protocol.send_request_async(
                "textDocument/copilotInlineEdit", params), 20)
            edits = res["edits"] if isinstance(res, dict) else res.edits
            assert len(edits) <= 1, res
        except JsonRpcException as e:
            self.errors.append(f"copilotInlineEdit {params!r}: error response {e!r}")

    def change(self, uri: str, changes: list) -> None:
        self.versions[uri] = self.versions.get(uri, 1) + 1
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=changes))

    async def play(self, ops: list) -> None:
        c = self.client
        for kind, uri, arg in ops:
            if kind == "open":
                self.versions[uri] = 1
                c.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=arg)))
            elif kind == "change":
                start, end, text = arg
                start, end = (start, end) if (start.line, start.character) <= (end.line, end.character) else (end, start)
                self.change(uri, [T.TextDocumentContentChangePartial(range=T.Range(start, end), text=text)])
            elif kind == "replace":
                self.change(uri, [T.TextDocumentContentChangeWholeDocument(text=arg)])
            elif kind == "huge":
                self.change(uri, [T.TextDocumentContentChangeWholeDocument(text=huge_text(arg))])
            elif kind == "close":
                c.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri=uri)))
            elif kind in ("inline", "completion"):
                await self.checked(kind, uri, arg)
            elif kind == "concurrent":
                await asyncio.gather(*(self.checked("inline" if i % 2 else "completion", uri, p)
                                       for i, p in enumerate(arg)))
            elif kind == "cancel":
                self.ids += 1
                task = asyncio.ensure_future(self.checked("inline", uri, arg, msg_id=f"fuzz-{self.ids}"))
                await asyncio.sleep(0)
                c.cancel_request(T.CancelParams(id=f"fuzz-{self.ids}"))
                await task
            elif kind == "settings":
                c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"quickcode": arg}))
                c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"quickcode": self.safe}))
            elif kind == "edit":
                pos, version, junk = arg
                await self.edit(uri, pos, version, junk)
            elif kind == "accept":
                try:
                    await command(c, "quickcode.accept", arg)
                except JsonRpcException as e:
                    self.errors.append(f"accept {arg!r}: error response {e!r}")
        st_ = await command(c, "quickcode.status")          # a round trip: every notification above was handled
        assert st_["enabled"] is True
        self.cases += 1

    def shown_errors(self) -> list:
        return [m.message for m in self.client.messages if m.type in (T.MessageType.Error, T.MessageType.Warning)]

    def alive(self) -> bool:
        server = self.client._server
        return server is not None and server.returncode is None


def test_any_input_is_survived_and_completion_goes_on(fake_backend):
    engine = FakeEngine(Settings(spec_method="off", heal_token=False, max_prompt_chars=MAX_PROMPT_CHARS), script=fake_model)
    b = fake_backend(engine, max_prompt_chars=MAX_PROMPT_CHARS)
    total = 0
    for encoding in (T.PositionEncodingKind.Utf16, T.PositionEncodingKind.Utf8):
        d = Driver(b.ws_url, encoding)
        try:
            @settings(max_examples=CASES // 2, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(ops=st.lists(OP, min_size=1, max_size=6))
            def case(ops):
                d.run(d.play(ops))
                assert d.alive(), "the language server exited"
                assert d.errors == [], d.errors[:3]
                assert d.shown_errors() == [], d.shown_errors()[:3]
            case()
            d.run(still_completing(d, engine))
            total += d.cases
        finally:
            d.stop()
    assert total >= CASES, total
    edits = [r for r in engine.requests.values() if engine.tokenizer.decode(r.prompt_ids).endswith(REGION_START + "\n")]
    assert edits and any(r.text.endswith(REGION_END) for r in edits)      # next edits were asked and answered


async def still_completing(d: Driver, engine: FakeEngine) -> None:
    """After the fuzz: a 200 KB one-line file completes in the middle, its prompt within the backend's budget."""
    c, uri = d.client, "file:///w/minified.js"
    for _ in range(300):                                   # the last case may have moved it to another endpoint
        if (await command(c, "quickcode.status")).get("connected"):
            break
        await asyncio.sleep(0.02)
    text = huge_text(0)
    c.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(uri=uri, language_id="javascript",
                                                                              version=1, text=text)))
    # windows larger than the backend takes; no client cache: a fuzz case that asked on the same repeated text
    # ("huge") may have cached this very context, and this check is about the prompt the backend gets
    c.workspace_did_change_configuration(T.DidChangeConfigurationParams(settings={"quickcode": {
        "prefixMaxChars": 50_000, "suffixMaxChars": 20_000, "cache": False,
        "suggestionUnit": "block",                                # (the whole line, not its first word)
        # the whole line however long it takes: this is about the prompt, not speed (on a loaded machine the
        # default patience showed " value +" early)
        "linePatienceMs": 0, "deadlineMs": 30_000}}))
    mid = len(text) // 2                                   # ASCII: the same column in every encoding
    before = list(engine.requests.values())                # (a finished id may be reused: compare the objects)
    seen = {id(r) for r in before}
    res = await d.ask("inline", uri, T.Position(line=0, character=mid))
    assert res.items and res.items[0].insert_text == " value + 1"    # (a prompt over the budget: refused, empty)
    assert res.items[0].range.start == T.Position(line=0, character=mid)
    prompts = [engine.tokenizer.decode(r.prompt_ids) for r in engine.requests.values() if id(r) not in seen]
    assert prompts and all(len(p) <= MAX_PROMPT_CHARS for p in prompts), [len(p) for p in prompts]
