"""LSP handlers only (pygls 2.x on stdio): document sync, inline completion (LSP 3.18) with `completion` as
the fallback, configuration, telemetry notifications and commands. The thinking lives in completer.py.

The editor never sees an error from completion: any failure is logged and answered with an empty result.
stdout is the protocol; logs go to stderr (or QUICKCODE_LSP_LOG).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.workspace.text_document import ServerTextPosition

from lsp_client.channel import Channel
from lsp_client.completer import Completer
from lsp_client.config import ClientConfig
from lsp_client.report import latency_report
from protocol import __version__

log = logging.getLogger("quickcode.lsp")

ACCEPT_COMMAND = "quickcode.accept"
STATUS_NOTIFICATION = "$/quickcode/status"
MORE_NOTIFICATION = "$/quickcode/moreText"   # text shown early at {textDocument, position} is complete: ask again


class QuickcodeServer(LanguageServer):
    def __init__(self, cfg: ClientConfig):
        super().__init__("quickcode", __version__)
        self.cfg = cfg
        self.channel: Channel | None = None
        self.completer: Completer | None = None
        self.client_name = "unknown"

    def start_backend(self) -> None:
        if self.channel is not None:
            return
        self.channel = Channel(self.cfg, f"quickcode-lsp/{__version__} ({self.client_name})", on_state=self.push_status)
        self.completer = Completer(self.cfg, self.channel, on_more=self.push_more)
        self.channel.start()

    def push_status(self, status: dict | None = None) -> None:
        try:
            self.protocol.notify(STATUS_NOTIFICATION, self.status())
        except Exception:  # no client attached (tests) or the stream is closing
            log.debug("status notification not sent", exc_info=True)

    def push_more(self, uri: str, offset: int) -> None:
        """The suggestion shown at `offset` was its settled part; the rest is in now: the editor re-asks
        there (our VS Code and Neovim integrations do; other editors ask again on the next keystroke)."""
        try:
            doc = self.workspace.get_text_document(uri)
            text = doc.source        # (pygls' client_position_at_offset is one line off at the end of a file)
            line = text.count("\n", 0, offset)
            pos = doc.position_to_client_units(ServerTextPosition(line, offset - (text.rfind("\n", 0, offset) + 1)))
            self.protocol.notify(MORE_NOTIFICATION, {"textDocument": {"uri": uri},
                                                     "position": {"line": pos.line, "character": pos.character}})
        except Exception:  # the document closed meanwhile, or no client attached
            log.debug("moreText notification not sent", exc_info=True)

    def status(self) -> dict:
        st = self.channel.status() if self.channel else {"connected": False}
        if self.completer is not None:
            rows = [r for r in self.completer.stats.waterfalls if r.get("client_first_chunk_ms")]
            if rows:
                xs = sorted(r["client_first_chunk_ms"] for r in rows[-50:])
                st["recent_first_chunk_ms_p50"] = xs[len(xs) // 2]
            st["acceptance_rate"] = round(self.completer.outcomes.acceptance_rate, 3)
        st["enabled"] = self.cfg.enabled
        return st


def build_server(cfg: ClientConfig | None = None) -> QuickcodeServer:
    server = QuickcodeServer(cfg or ClientConfig())

    @server.feature(T.INITIALIZE)
    def initialize(ls: QuickcodeServer, params: T.InitializeParams):
        if params.client_info:
            ls.client_name = f"{params.client_info.name} {params.client_info.version or ''}".strip()
        ls.cfg.update(params.initialization_options)

    @server.feature(T.INITIALIZED)
    def initialized(ls: QuickcodeServer, params: T.InitializedParams):
        ls.start_backend()

    @server.feature(T.SHUTDOWN)
    async def shutdown(ls: QuickcodeServer, params):
        if ls.completer is not None:
            ls.completer.save_state()
        if ls.channel is not None:
            await ls.channel.close()

    @server.feature(T.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: QuickcodeServer, params: T.DidChangeConfigurationParams):
        settings = params.settings
        if isinstance(settings, dict) and settings:
            ls.cfg.update(settings)
            if ls.completer is not None:
                ls.completer.apply_config(ls.cfg)
                ls.channel.reconfigure(ls.cfg)
            ls.push_status()

    @server.feature(T.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: QuickcodeServer, params: T.DidOpenTextDocumentParams):
        ls.start_backend()
        td = params.text_document
        ls.completer.on_open(td.uri, _path(td.uri), td.language_id or "", td.text)

    @server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: QuickcodeServer, params: T.DidChangeTextDocumentParams):
        if ls.completer is None:
            return
        doc = ls.workspace.get_text_document(params.text_document.uri)
        offset = None
        last = params.content_changes[-1] if params.content_changes else None
        if isinstance(last, T.TextDocumentContentChangePartial):
            start = doc.offset_at_position(last.range.start)
            offset = start + len(last.text)       # where the cursor usually is after the edit
        ls.completer.on_change(doc.uri, doc.source, offset)

    @server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: QuickcodeServer, params: T.DidCloseTextDocumentParams):
        if ls.completer is not None:
            ls.completer.on_close(params.text_document.uri)

    async def suggest(ls: QuickcodeServer, uri: str, position: T.Position, explicit: bool):
        if ls.completer is None or uri not in ls.completer.docs:
            return None
        doc = ls.workspace.get_text_document(uri)
        try:
            return await ls.completer.complete(uri, doc.offset_at_position(position), explicit=explicit)
        except asyncio.CancelledError:
            raise  # $/cancelRequest: pygls answers -32800 (RequestCancelled), which editors expect
        except Exception:
            log.exception("completion failed at %s:%s; answering empty", uri, position)
            return None

    def accept_command(s) -> T.Command:
        return T.Command(title="quickcode: completion accepted", command=ACCEPT_COMMAND,
                         arguments=[{"id": s.id, "chars": len(s.text)}])

    @server.feature(T.TEXT_DOCUMENT_INLINE_COMPLETION, T.InlineCompletionOptions())
    async def inline_completion(ls: QuickcodeServer, params: T.InlineCompletionParams):
        explicit = params.context is not None and params.context.trigger_kind == T.InlineCompletionTriggerKind.Invoked
        s = await suggest(ls, params.text_document.uri, params.position, explicit)
        if s is None:
            return T.InlineCompletionList(items=[])
        # Always a range: VS Code hides items without one, Emacs lsp-mode errors.
        return T.InlineCompletionList(items=[T.InlineCompletionItem(
            insert_text=s.text, range=T.Range(params.position, params.position), command=accept_command(s))])

    @server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=[".", "(", ",", "=", ":"]))
    async def completion(ls: QuickcodeServer, params: T.CompletionParams):
        """For clients without inline completion (Helix, eglot): the same suggestion as one menu item.

        Its edit starts at the word before the cursor and its text (and filter text) begin with that word,
        so clients that filter the menu by the word typed so far keep the item; clients with snippet support
        get it as an escaped snippet (some insert only the first word of a plain-text item)."""
        s = await suggest(ls, params.text_document.uri, params.position, explicit=True)
        if s is None:
            return T.CompletionList(is_incomplete=True, items=[])
        doc = ls.workspace.get_text_document(params.text_document.uri)
        line = doc.lines[params.position.line] if params.position.line < len(doc.lines) else ""
        before = line[: doc.offset_at_position(params.position) - doc.offset_at_position(
            T.Position(line=params.position.line, character=0))]
        word = _WORD_BEFORE.search(before).group(0)           # ASCII: the same length in every position encoding
        start = T.Position(line=params.position.line, character=params.position.character - len(word))
        new_text = word + s.text
        first = new_text.split("\n", 1)[0]
        label = (first.strip() or new_text.strip().split("\n", 1)[0])
        snippets = _snippet_support(ls)
        return T.CompletionList(is_incomplete=True, items=[T.CompletionItem(
            label=label[:80] + ("…" if len(label) > 80 or "\n" in new_text.strip() else ""),
            kind=T.CompletionItemKind.Snippet, detail="quickcode", sort_text="0", filter_text=new_text,
            insert_text_format=T.InsertTextFormat.Snippet if snippets else T.InsertTextFormat.PlainText,
            text_edit=T.TextEdit(range=T.Range(start, params.position),
                                 new_text=_escape_snippet(new_text) if snippets else new_text),
            documentation=T.MarkupContent(kind=T.MarkupKind.Markdown, value=f"```\n{s.text}\n```"),
            command=accept_command(s))])

    @server.command(ACCEPT_COMMAND)
    def accepted(ls: QuickcodeServer, *args):
        info = _arg(args)
        if ls.completer is not None and info.get("id"):
            ls.completer.on_accepted(str(info["id"]), _int(info.get("chars")))

    @server.command("quickcode.status")
    def status_command(ls: QuickcodeServer, *args):
        return ls.status()

    @server.command("quickcode.stats")
    def stats_command(ls: QuickcodeServer, *args):
        if ls.completer is None:
            return {}
        c = ls.completer
        return {**c.stats.as_dict(), "cache_hits": c.cache.hits, "cache_misses": c.cache.misses,
                "outcomes": dict(c.outcomes.counts), "accepted_chars": c.outcomes.accepted_chars,
                "shown_chars": c.outcomes.shown_chars, "predictor_updates": c.predictor.updates,
                "debounce_ms": round(c.debounce.delay_ms(), 1), "waterfalls": list(c.stats.waterfalls)[-50:]}

    @server.command("quickcode.latencyReport")
    def report_command(ls: QuickcodeServer, *args):
        return latency_report(ls.completer) if ls.completer else "not started"

    @server.command("quickcode.enable")
    def enable_command(ls: QuickcodeServer, *args):
        ls.cfg.enabled = True
        ls.push_status()
        return True

    @server.command("quickcode.disable")
    def disable_command(ls: QuickcodeServer, *args):
        ls.cfg.enabled = False
        ls.push_status()
        return False

    @server.feature("textDocument/didShowCompletion")
    def did_show(ls: QuickcodeServer, params):
        pass  # shown is counted when a suggestion is returned; accepted on the command, dismissed by inference

    @server.feature("textDocument/didPartiallyAcceptCompletion")
    def did_partially_accept(ls: QuickcodeServer, params):
        item = getattr(params, "item", None)
        cmd = getattr(item, "command", None)
        info = _arg(getattr(cmd, "arguments", None))
        length = _int(getattr(params, "accepted_length", None) or getattr(params, "acceptedLength", None))
        if ls.completer is not None and info.get("id") and length:
            ls.completer.on_partial(str(info["id"]), length)

    return server


_WORD_BEFORE = re.compile(r"[A-Za-z0-9_]*$")


def _snippet_support(ls: QuickcodeServer) -> bool:
    try:
        return bool(ls.client_capabilities.text_document.completion.completion_item.snippet_support)
    except AttributeError:
        return False


def _escape_snippet(text: str) -> str:
    """Plain text as an LSP snippet that expands to exactly that text; with no tab stop the cursor ends after it
    (a trailing `$0` would show in clients that use the snippet text as the menu word, e.g. Neovim)."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def _path(uri: str) -> str:
    return uri[7:] if uri.startswith("file://") else uri


def _arg(args) -> dict:
    if isinstance(args, (list, tuple)) and args:
        args = args[0]
    if isinstance(args, dict):
        return args
    if args is not None and hasattr(args, "_asdict"):
        return args._asdict()
    return {k: getattr(args, k) for k in ("id", "chars") if hasattr(args, k)} if args is not None else {}


def _int(v) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="quickcode lsp", description="the quickcode language server (stdio)")
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", action="append", default=None,
                   help="backend WebSocket URL (repeat for several regions); default $QUICKCODE_ENDPOINTS or local")
    p.add_argument("--token", default=None, help="API token (default $QUICKCODE_TOKEN)")
    p.add_argument("--log-file", default=os.environ.get("QUICKCODE_LSP_LOG"))
    p.add_argument("--log-level", default=os.environ.get("QUICKCODE_LSP_LOG_LEVEL"),
                   help="default INFO with a log file (one waterfall line per request), WARNING on stderr")
    p.add_argument("--stdio", action="store_true", help="accepted for editors that pass it; stdio is the only transport")


def run(args: argparse.Namespace) -> int:
    handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    level = args.log_level or ("INFO" if args.log_file else "WARNING")
    logging.basicConfig(level=level.upper(), handlers=[handler],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level.upper() != "DEBUG":
        logging.getLogger("pygls").setLevel(logging.WARNING)   # it logs every message body at INFO
    cfg = ClientConfig()
    env_endpoints = os.environ.get("QUICKCODE_ENDPOINTS")
    if args.endpoint:
        cfg.endpoints = args.endpoint
    elif env_endpoints:
        cfg.endpoints = [e.strip() for e in env_endpoints.split(",") if e.strip()]
    cfg.token = args.token or os.environ.get("QUICKCODE_TOKEN", "")
    build_server(cfg).start_io()
    return 0


if __name__ == "__main__":
    sys.exit(main())
