"""A simulated developer in a simulated editor, driving the real `quickcode lsp` over stdio.

It opens a document, types a real source file keystroke by keystroke with human-like timing (bursts within
words, pauses at line ends and punctuation, occasional typos fixed with backspace; Enter indents the new line,
as editors do, so indentation is not typed space by space), sends incremental
didChange notifications, asks for inline completion the way VS Code does (every keystroke, cancelling the
previous request) or the way Neovim does (200 ms after typing stops), and accepts a suggestion (its text
inserted, its command executed) when it matches what the developer was about to type. A developer of kind
"word" (TypingModel.developer; quickcode/benchmarks/accept_rule.py) also takes the right words of a suggestion
that is wrong further on, with accept-next-word as VS Code does: each word inserted, each step reported to the
language server with `textDocument/didPartiallyAcceptCompletion` (the item, the length accepted so far).

The developer's timing, typos and acceptance coin are drawn per position of the typed text (a random stream
seeded by (seed, position)), not from one stream for the whole session: two language servers typing the same
segment with the same seed meet the same pauses at the same places, whatever each one showed or had accepted
before. So a benchmark can compare them position by position (what one accepted and the other did not, and why).
"""
from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from dataclasses import dataclass, field

from lsprotocol import converters
from lsprotocol import types as T
from pygls.lsp.client import LanguageClient

from quickcode.benchmarks.accept_rule import accept_steps, accepted_len


@dataclass
class TypingModel:
    """Inter-key gaps in ms: lognormal bursts, longer after punctuation, pauses at line ends."""
    key_ms: float = 110.0
    pause_line_ms: float = 900.0
    pause_punct_ms: float = 350.0
    typo_rate: float = 0.02
    accept_prob: float = 0.9          # chance to accept a correct suggestion
    react_ms: float = 350.0           # reading the ghost text before pressing Tab
    speed: float = 1.0                # >1 = faster (benchmarks compress time)
    developer: str = "whole"          # takes ghost text only whole, or "word": its right words too

    def gap_ms(self, rng: random.Random, prev: str) -> float:
        if prev == "\n":
            base = rng.lognormvariate(0, 0.5) * self.pause_line_ms
        elif prev in "(:,.=[{":
            base = rng.lognormvariate(0, 0.5) * self.pause_punct_ms
        else:
            base = rng.lognormvariate(0, 0.35) * self.key_ms
        return base / self.speed


@dataclass
class Event:
    t_ms: float
    kind: str            # key | request | shown | accepted | pause
    detail: dict = field(default_factory=dict)


@dataclass
class SessionResult:
    """What a session did: the position-by-position logs (offsets `at` are into the typed segment: what a
    benchmark needs to tell where accepted characters were won or lost) and the counts read off them."""
    asks: list[dict] = field(default_factory=list)       # {at, version, t_ms, end_ms, outcome, text, id}
    shows: list[dict] = field(default_factory=list)      # {at, version, t_ms, text, id, pause}
    # {at, text, id, partial, keys}: partial = word steps; keys = the keys pressed to accept it
    accepts: list[dict] = field(default_factory=list)
    waits: list[dict] = field(default_factory=list)      # {at, gap_ms, ghost_ms}: every gap before a key
    pause_to_ghost_ms: list[float] = field(default_factory=list)   # for pauses where ghost text appeared
    request_latency_ms: list[float] = field(default_factory=list)  # request → non-empty answer
    events: list[Event] = field(default_factory=list)
    keystrokes: int = 0
    typed_chars: int = 0
    pauses: int = 0
    final_text: str = ""
    segment_chars: int = 0

    @property
    def requests(self) -> int:
        return len(self.asks)

    @property
    def shown(self) -> int:
        return len(self.shows)

    @property
    def accepted(self) -> int:
        return len(self.accepts)

    @property
    def accepted_texts(self) -> list[str]:
        return [a["text"] for a in self.accepts]

    @property
    def accepted_chars(self) -> int:
        return sum(len(a["text"]) for a in self.accepts)

    @property
    def keys_saved(self) -> int:
        """Accepted characters less the keys pressed to accept them (Tab, or accept-next-word per step)."""
        return self.accepted_chars - sum(a.get("keys", 1) for a in self.accepts)


# How the simulated editor asks: "vscode" on every change, cancelling the previous request; "vscode-1.100" as
# VS Code 1.100 does it: 50 ms after the last key (its InlineCompletionsDebounce; `quickcode bench vscode`
# measured the real one), cancelling the previous request and keeping an item typed into on screen; "neovim"
# (the plugin of editors/neovim, its default ask = 'keystroke') on every change, cancelling nothing;
# "neovim-pause" (Neovim 0.12 by itself, the plugin's ask = 'pause') 200 ms after the last key, cancelling
# nothing. Neovim keeps an item typed into on screen too.
ASK_AFTER_MS = {"vscode": 0.0, "vscode-1.100": 50.0, "neovim": 0.0, "neovim-pause": 200.0}
STYLES = tuple(ASK_AFTER_MS)
EVERY_CHANGE = tuple(s for s, ms in ASK_AFTER_MS.items() if ms == 0)
CANCELS = ("vscode", "vscode-1.100")


class SimEditor:
    def __init__(self, server_cmd: list[str], *, env: dict | None = None, style: str = "vscode",
                 init_options: dict | None = None, seed: int = 0):
        self.server_cmd = server_cmd
        self.env = env
        if style not in STYLES:
            raise ValueError(f"style: one of {STYLES} (got {style!r})")
        self.style = style
        self.init_options = init_options or {}
        self.client = LanguageClient("quickcode-sim", "1.0")
        self.seed = seed
        self.rng = random.Random(seed)
        self.uri = ""
        self.text = ""
        self.version = 0
        self.t0 = time.perf_counter()
        self._msg_id = 10_000
        self.status: dict = {}
        self._on_more = None      # set while a session types: ask again

        @self.client.feature("$/quickcode/status")
        def _status(params):
            self.status = params

        @self.client.feature("$/quickcode/moreText")
        def _more(params):
            # our VS Code extension and Neovim plugin ask again when the cursor is where the text was shown
            pos = _field(params, "position")
            if self._on_more is not None and (_field(pos, "line"), _field(pos, "character")) == self._cursor():
                self._on_more()

    def now_ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000

    async def start(self) -> None:
        env = {**os.environ, **(self.env or {})}
        await self.client.start_io(*self.server_cmd, env=env)
        caps = T.ClientCapabilities(
            text_document=T.TextDocumentClientCapabilities(
                synchronization=T.TextDocumentSyncClientCapabilities(),
                inline_completion=T.InlineCompletionClientCapabilities(),
                completion=T.CompletionClientCapabilities()),
            workspace=T.WorkspaceClientCapabilities(configuration=True),
            general=T.GeneralClientCapabilities(position_encodings=[T.PositionEncodingKind.Utf16]))
        await self.client.initialize_async(T.InitializeParams(
            capabilities=caps, process_id=os.getpid(), client_info=T.ClientInfo(name=f"sim-{self.style}", version="1"),
            initialization_options=self.init_options))
        self.client.initialized(T.InitializedParams())

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 5)
            self.client.exit(None)
        except Exception:  # the server may already be gone (fault tests); stopping must not fail the caller
            pass
        await self.client.stop()

    def open(self, uri: str, text: str, language: str = "python") -> None:
        self.uri, self.text, self.version = uri, text, 1
        self.client.text_document_did_open(T.DidOpenTextDocumentParams(
            T.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))

    # ── editing (cursor is always at the end of `self.text` in these sessions)
    def _pos(self, offset: int) -> T.Position:
        before = self.text[:offset]
        line = before.count("\n")
        col = len(before) - (before.rfind("\n") + 1)
        col16 = len(before[len(before) - col:].encode("utf-16-le")) // 2
        return T.Position(line=line, character=col16)

    def _cursor(self) -> tuple[int, int]:
        p = self._pos(len(self.text))
        return p.line, p.character

    def insert(self, s: str) -> None:
        pos = self._pos(len(self.text))
        self.text += s
        self.version += 1
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[T.TextDocumentContentChangePartial(range=T.Range(pos, pos), text=s)]))

    def replace(self, start: int, end: int, s: str) -> None:
        """`text[start:end]` becomes `s` (offsets anywhere in the document: an edit away from its end)."""
        rng = T.Range(self._pos(start), self._pos(end))
        self.text = self.text[:start] + s + self.text[end:]
        self.version += 1
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[T.TextDocumentContentChangePartial(range=rng, text=s)]))

    def offset(self, line: int, character_utf16: int) -> int:
        """The offset of an LSP position (UTF-16 columns) in the document; a column past its line is its end."""
        start = 0
        for _ in range(line):
            nl = self.text.find("\n", start)
            if nl < 0:
                return len(self.text)
            start = nl + 1
        end = self.text.find("\n", start)
        row = self.text[start:len(self.text) if end < 0 else end]
        units = 0
        for k, ch in enumerate(row):
            if units >= character_utf16:
                return start + k
            units += 2 if ord(ch) > 0xFFFF else 1
        return start + len(row)

    def close(self) -> None:
        self.client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri=self.uri)))

    def backspace(self) -> None:
        end = self._pos(len(self.text))
        start = self._pos(len(self.text) - 1)
        self.text = self.text[:-1]
        self.version += 1
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[T.TextDocumentContentChangePartial(range=T.Range(start, end), text="")]))

    def ask(self, invoked: bool = False, at: int | None = None) -> tuple[int, asyncio.Future]:
        """Send textDocument/inlineCompletion with a known id (so that it can be cancelled like an editor does),
        at offset `at` (default: the end of the document)."""
        params = T.InlineCompletionParams(
            text_document=T.TextDocumentIdentifier(uri=self.uri),
            position=self._pos(len(self.text) if at is None else at),
            context=T.InlineCompletionContext(trigger_kind=T.InlineCompletionTriggerKind.Invoked if invoked
                                              else T.InlineCompletionTriggerKind.Automatic))
        self._msg_id += 1
        fut = self.client.protocol.send_request_async(T.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=self._msg_id)
        return self._msg_id, asyncio.ensure_future(fut)

    async def inline_edit(self, at: int) -> dict:
        """`textDocument/copilotInlineEdit` with the cursor at offset `at` of the document as it is now:
        `{edits: [{range, text, ...}]}` (the request the next-edit clients send)."""
        pos = self._pos(at)
        result = await self.client.protocol.send_request_async("textDocument/copilotInlineEdit", {
            "textDocument": {"uri": self.uri, "version": self.version},
            "position": {"line": pos.line, "character": pos.character}})
        return _plain(result)

    def cancel(self, msg_id: int) -> None:
        self.client.cancel_request(T.CancelParams(id=msg_id))   # $/cancelRequest; the server answers -32800

    def partially_accepted(self, item: T.InlineCompletionItem, accepted_chars: int) -> None:
        """What VS Code (our extension, with the proposed API) and our Neovim plugin send on a partial accept:
        the item as the server sent it and the length of its text accepted so far."""
        lsp_item = converters.get_converter().unstructure(item, T.InlineCompletionItem)
        self.client.protocol.notify("textDocument/didPartiallyAcceptCompletion",
                                    {"item": lsp_item, "acceptedLength": accepted_chars})

    async def command(self, name: str, *args):
        return await self.client.workspace_execute_command_async(T.ExecuteCommandParams(command=name, arguments=list(args)))

    # ── a typing session
    def rng_at(self, at: int) -> random.Random:
        """The developer's random stream at position `at` of the typed segment (same seed, same position:
        same gap, typo and acceptance coin, whatever happened before)."""
        return random.Random(f"{self.seed}:{at}")

    async def type_text(self, target: str, model: TypingModel, *, progress=None,
                        res: SessionResult | None = None) -> SessionResult:
        """Type `target` at the end of the document; accept suggestions that match what comes next. `res`: the
        record to fill (a caller that may cancel the typing keeps what it had logged)."""
        res = res if res is not None else SessionResult()
        res.segment_chars = len(target)
        pending: tuple[int, asyncio.Future] | None = None
        shown: dict | None = None                 # {"text", "item", "version", "t_ms"}
        appeared = asyncio.Event()
        at = 0                                    # position in `target` the cursor is at

        def on_answer(task: asyncio.Task, version: int, ask: dict) -> None:
            nonlocal shown
            ask["end_ms"] = round(self.now_ms(), 1)
            if task.cancelled():
                ask["outcome"] = "cancelled"
                return
            if task.exception() is not None:
                ask["outcome"] = "cancelled" if "cancel" in repr(task.exception()).lower() else "error"
                return
            result = task.result()
            items = result.items if isinstance(result, T.InlineCompletionList) else (result or [])
            if not (items and items[0].insert_text):
                ask["outcome"] = "empty"
                if version == self.version:
                    shown = None                  # nothing here: what was shown goes (Neovim's re-shown item)
                return
            item = items[0]
            text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
            ask.update(outcome="items", text=text, id=_item_id(item))
            if version != self.version:
                ask["outcome"] = "late"           # the document moved on: an editor drops it
                return
            t = self.now_ms()
            shown = {"text": text, "item": item, "version": version, "t_ms": t}
            res.request_latency_ms.append(t - ask["t_ms"])
            res.events.append(Event(t, "shown", {"text": text[:80]}))
            res.shows.append({"at": ask["at"], "version": version, "t_ms": round(t, 1), "text": text,
                              "id": _item_id(item)})
            appeared.set()

        def request() -> None:
            nonlocal pending
            if self.style in CANCELS and pending is not None and not pending[1].done():
                self.cancel(pending[0])           # VS Code cancels the previous request ($/cancelRequest)
            ask = {"at": at, "version": self.version, "t_ms": round(self.now_ms(), 1), "outcome": None}
            res.asks.append(ask)
            pending = self.ask()
            pending[1].add_done_callback(lambda t, v=self.version, a=ask: on_answer(t, v, a))

        async def accept(chars: int) -> str:
            """Tab (all of the ghost text: its command runs), or `chars` of it by accept-next-word pressed
            once per word step (each step inserts its word and is reported; the item stays, no command)."""
            nonlocal shown
            text, item = shown["text"][:chars], shown["item"]
            partial = chars < len(shown["text"])
            if partial:
                for piece, so_far in accept_steps(shown["text"], chars):
                    self.insert(piece)
                    self.partially_accepted(item, so_far)
            else:
                self.insert(text)
                if item.command is not None:
                    await self.command(item.command.command, *(item.command.arguments or []))
            keys = len(accept_steps(shown["text"], chars)) if partial else 1   # Tab, or one press a word step
            res.accepts.append({"at": at, "text": text, "id": _item_id(item), "partial": partial, "keys": keys})
            res.events.append(Event(self.now_ms(), "accepted", {"text": text[:80]}))
            shown = None
            return text

        def type_key(ch: str) -> None:
            nonlocal shown
            self.insert(ch)                       # one key: a character, or Enter with the editor's auto-indent
            res.keystrokes += 1
            if self.style != "vscode" and shown is not None and len(shown["text"]) > len(ch) \
                    and shown["text"].startswith(ch):
                # the editor keeps showing the item the key typed into, its rest, until its next request's answer
                shown = {**shown, "text": shown["text"][len(ch):], "version": self.version, "t_ms": self.now_ms()}
                res.shows.append({"at": at, "version": self.version, "t_ms": round(shown["t_ms"], 1),
                                  "text": shown["text"], "id": _item_id(shown["item"])})
            else:
                shown = None
            if self.style in EVERY_CHANGE:
                request()

        self._on_more = request                   # `$/quickcode/moreText`: the integrations ask again
        last_key_ms = self.now_ms()
        while at < len(target):
            rng = self.rng_at(at)
            line_start = at == 0 or target[:at].rstrip(" \t").endswith("\n")
            gap_ms = model.gap_ms(rng, "\n" if line_start else target[at - 1])
            is_pause = gap_ms > 300
            res.pauses += is_pause
            wait = {"at": at, "gap_ms": round(gap_ms, 1), "ghost_ms": None}
            res.waits.append(wait)
            asked = self.style in EVERY_CHANGE
            accepted_text, seen = None, None
            # the developer pauses for gap_ms; a suggestion may appear meanwhile (and grow, when the rest of a
            # line shown early comes in), and is taken if right
            while (left_ms := last_key_ms + gap_ms - self.now_ms()) > 0:
                ask_after_ms = ASK_AFTER_MS[self.style]
                if not asked and self.now_ms() - last_key_ms >= ask_after_ms:
                    request()                     # the editor's own timer after typing stops
                    asked = True
                wait_ms = left_ms if asked else min(left_ms, last_key_ms + ask_after_ms - self.now_ms())
                appeared.clear()
                if shown is None or shown is seen:
                    try:
                        await asyncio.wait_for(appeared.wait(), max(0.001, wait_ms / 1000))
                    except asyncio.TimeoutError:
                        continue
                if shown is not None and shown is not seen and shown["version"] == self.version:
                    if seen is None:
                        wait["ghost_ms"] = round(shown["t_ms"] - last_key_ms, 1)
                        if is_pause:
                            res.pause_to_ghost_ms.append(shown["t_ms"] - last_key_ms)
                    res.shows[-1]["pause"] = is_pause
                    seen = shown
                    if (accepted_len(shown["text"], target[at:], model.developer)
                            and rng.random() < model.accept_prob):
                        await asyncio.sleep(model.react_ms / model.speed / 1000)
                        # Tab takes the ghost text shown now: it may have grown or changed while being read
                        take = 0 if shown is None or shown["version"] != self.version else \
                            accepted_len(shown["text"], target[at:], model.developer)
                        if take:
                            accepted_text = await accept(take)
                            break
            if accepted_text is not None:
                at += len(accepted_text)
                last_key_ms = self.now_ms()
                if self.style in EVERY_CHANGE:
                    request()                     # VS Code (and the Neovim plugin) ask again right after an accept
                continue
            ch = target[at]
            if rng.random() < model.typo_rate and ch.isalpha():
                type_key(chr(ord("a") + rng.randrange(26)))
                await asyncio.sleep(model.gap_ms(rng, "x") / 1000)
                self.backspace()
                res.keystrokes += 1
                if self.style in EVERY_CHANGE:
                    request()
                await asyncio.sleep(model.gap_ms(rng, "x") / 1000)
            if ch == "\n":                         # Enter: the editor indents the new line as the next one is
                ch += _indent_at(target, at + 1)    # (VS Code, Neovim and JetBrains keep or add the indentation)
            elif at == 0 and _indent_at(target, 0):  # starting on an empty line: one Tab indents it, as
                ch = _indent_at(target, 0)           # developers do (not the spaces one by one)
            at += len(ch)                            # (before the key: its request is asked at the new place)
            type_key(ch)
            res.typed_chars += len(ch)
            last_key_ms = self.now_ms()
            if progress:
                progress(at, len(target))
        if pending is not None and not pending[1].done():
            await asyncio.wait([pending[1]], timeout=3)
        self._on_more = None
        res.final_text = self.text
        return res


def _item_id(item) -> str:
    """The suggestion id the language server put in the item's accept command (its backend request id, and
    `+N` when served N characters into that request's text), or ''."""
    cmd = getattr(item, "command", None)
    args = (getattr(cmd, "arguments", None) or [None]) if cmd is not None else [None]
    return str(_field(args[0], "id") or "") if args[0] is not None else ""


def _plain(o):
    """A custom request's result as pygls hands it over (named tuples for objects) → dicts and lists."""
    if hasattr(o, "_asdict"):
        return {k: _plain(v) for k, v in o._asdict().items()}
    if isinstance(o, (list, tuple)):
        return [_plain(x) for x in o]
    return o


def _field(o, name: str):
    """A field of a custom notification's params (pygls hands them over as an object, or a dict)."""
    return o.get(name) if isinstance(o, dict) else getattr(o, name, None)


def _indent_at(text: str, i: int) -> str:
    """The spaces and tabs that start `text`'s line at offset `i` (none if the line is blank; all of them if the
    text ends inside them: a typed segment cut off in the indentation — the editor indents that line too)."""
    j = i
    while j < len(text) and text[j] in " \t":
        j += 1
    return text[i:j] if j == len(text) or text[j] != "\n" else ""


def lsp_command() -> list[str]:
    return [sys.executable, "-m", "quickcode", "lsp"]
