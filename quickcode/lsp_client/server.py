"""LSP handlers only (pygls 2.x on stdio): document sync, inline completion (LSP 3.18) with `completion` as
the fallback, configuration, telemetry notifications and commands. The thinking lives in session.py.

The editor never sees an error from completion: any failure is logged and answered with an empty result.
stdout is the protocol; logs go to stderr (or QUICKCODE_LSP_LOG).
"""
from __future__ import annotations

import asyncio
import logging

from lsprotocol import types as T
from lru import LRU
from pygls.lsp.server import LanguageServer
from pygls.workspace.text_document import ServerTextPosition

from quickcode.lsp_client import answer, edit_handlers
from quickcode.lsp_client.channel import Channel
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.report import latency_report
from quickcode.lsp_client.session import Session
from quickcode.lsp_client.stdio import Arrival, ArrivalNoting, PipeReader, caught_up
from quickcode.protocol import __version__
from quickcode.protocol.stats import percentile

log = logging.getLogger("quickcode.lsp")

ACCEPT_COMMAND = answer.ACCEPT_COMMAND
STATUS_NOTIFICATION = "$/quickcode/status"
MORE_NOTIFICATION = "$/quickcode/moreText"   # text shown early at {textDocument, position} is complete: ask again


class QuickcodeServer(LanguageServer):
    def __init__(self, cfg: ClientConfig):
        super().__init__("quickcode", __version__, protocol_cls=ArrivalNoting)
        self.cfg = cfg
        self.channel: Channel | None = None
        self.session: Session | None = None
        self.client_name = "unknown"
        self.input: PipeReader | None = None     # stdio.serve's reader (None: not known what is pending)
        self.arrivals: LRU = LRU(256)           # request id → Arrival
        self.more_at: tuple[str, int, int] | None = None   # (uri, line, character) of the last moreText sent

    def report_server_error(self, error: Exception, source) -> None:
        """A failure outside a completion answer (a change to a document that is not open, a message pygls could
        not handle): logged, never shown to the user as an error — completions go on."""
        log.warning("%s: %s", getattr(source, "__name__", source), error)

    def note_arrival(self, msg_id, params) -> None:
        try:
            uri = params.text_document.uri
            if uri in self.workspace.text_documents:
                doc = self.workspace.get_text_document(uri)
                self.arrivals[msg_id] = Arrival(doc.source, doc.offset_at_position(params.position))
        except Exception:  # a malformed request: its handler answers it
            log.debug("request %s: no arrival noted", msg_id, exc_info=True)

    def arrival(self, uri: str, position: T.Position) -> Arrival:
        """The document and the handled request's offset in it as the request was read (not noted: now)."""
        at = self.arrivals.pop(self.protocol.msg_id, None)
        if at is None:
            doc = self.workspace.get_text_document(uri)
            at = Arrival(doc.source, doc.offset_at_position(position))
        return at

    def position_at(self, uri: str, offset: int) -> T.Position:
        """The editor's position (in its position encoding) of `offset` in the document now."""
        doc = self.workspace.get_text_document(uri)
        text = doc.source        # (pygls' client_position_at_offset is one line off at the end of a file)
        line = text.count("\n", 0, offset)
        pos = doc.position_to_client_units(ServerTextPosition(line, offset - (text.rfind("\n", 0, offset) + 1)))
        return T.Position(line=pos.line, character=pos.character)

    async def caught_up(self) -> None:
        """Let the edits the editor already sent be read before an answer goes out (stdio.caught_up)."""
        await caught_up(self.input)

    def start_backend(self) -> None:
        if self.channel is not None:
            return
        self.channel = Channel(self.cfg, f"quickcode-lsp/{__version__} ({self.client_name})", on_state=self.push_status,
                               on_problem=self.show_problem)
        self.session = Session(self.cfg, self.channel, on_more=self.push_more)
        self.channel.start()

    def push_status(self, status: dict | None = None) -> None:
        try:
            self.protocol.notify(STATUS_NOTIFICATION, self.status())
        except Exception:  # no client attached (tests) or the stream is closing
            log.debug("status notification not sent", exc_info=True)

    def show_problem(self, message: str) -> None:
        """A refusal retrying will not fix (wrong token, incompatible server): an editor message, once."""
        try:
            self.window_show_message(T.ShowMessageParams(type=T.MessageType.Error, message=message))
        except Exception:  # no client attached or the stream is closing: the log has it
            log.debug("problem message not sent", exc_info=True)
        self.push_status()

    def push_more(self, uri: str, offset: int) -> None:
        """The suggestion shown at `offset` was its settled part; the rest is in now: the editor re-asks
        there (our VS Code and Neovim integrations do; other editors ask again on the next keystroke)."""
        try:
            pos = self.position_at(uri, offset)
            self.more_at = (uri, pos.line, pos.character)
            self.protocol.notify(MORE_NOTIFICATION, {"textDocument": {"uri": uri},
                                                     "position": {"line": pos.line, "character": pos.character}})
        except Exception:  # the document closed meanwhile, or no client attached
            log.debug("moreText notification not sent", exc_info=True)

    def status(self) -> dict:
        st = self.channel.status() if self.channel else {"connected": False}
        if self.session is not None:
            rows = [r for r in self.session.stats.waterfalls if r.get("client_first_chunk_ms")]
            if rows:
                st["recent_first_chunk_ms_p50"] = percentile([r["client_first_chunk_ms"] for r in rows[-50:]], 50)
            st["acceptance_rate"] = round(self.session.outcomes.acceptance_rate, 3)
        st["enabled"] = self.cfg.enabled
        return st


# ── handlers (registered by build_server below)
def initialize(ls: QuickcodeServer, params: T.InitializeParams):
    if params.client_info:
        ls.client_name = f"{params.client_info.name} {params.client_info.version or ''}".strip()
    ls.cfg.update(params.initialization_options)


def initialized(ls: QuickcodeServer, params: T.InitializedParams):
    ls.start_backend()


async def shutdown(ls: QuickcodeServer, params):
    if ls.session is not None:
        ls.session.save_state()
    if ls.channel is not None:
        await ls.channel.close()


def did_change_configuration(ls: QuickcodeServer, params: T.DidChangeConfigurationParams):
    settings = params.settings
    if isinstance(settings, dict) and settings:
        ls.cfg.update(settings)
        if ls.session is not None:
            ls.session.apply_config(ls.cfg)
            ls.channel.reconfigure(ls.cfg)
        ls.push_status()


def did_open(ls: QuickcodeServer, params: T.DidOpenTextDocumentParams):
    ls.start_backend()
    td = params.text_document
    ls.session.on_open(td.uri, _path(td.uri), td.language_id or "", td.text)


def did_change(ls: QuickcodeServer, params: T.DidChangeTextDocumentParams):
    if ls.session is None or params.text_document.uri not in ls.session.docs:
        return                                # not open (never, or closed): pygls ignored it too
    doc = ls.workspace.get_text_document(params.text_document.uri)
    offset = None
    last = params.content_changes[-1] if params.content_changes else None
    if isinstance(last, T.TextDocumentContentChangePartial):
        start = doc.offset_at_position(last.range.start)
        offset = start + len(last.text)       # where the cursor usually is after the edit
    ls.session.on_change(doc.uri, doc.source, offset)


def did_close(ls: QuickcodeServer, params: T.DidCloseTextDocumentParams):
    if ls.session is not None:
        ls.session.on_close(params.text_document.uri)


async def suggest(ls: QuickcodeServer, uri: str, position: T.Position, explicit: bool, best_of: int = 0):
    """The session's never-stale suggestion (Session.suggest) for the request as it was read. None: nothing."""
    if ls.session is None or uri not in ls.session.docs:
        return None
    try:
        at = ls.arrival(uri, position)
        return await ls.session.suggest(uri, at.text, at.offset, ls.caught_up, explicit=explicit, best_of=best_of)
    except asyncio.CancelledError:
        raise  # $/cancelRequest: pygls answers -32800 (RequestCancelled), which editors expect
    except Exception:
        log.exception("completion failed at %s:%s; answering empty", uri, position)
        return None


async def inline_completion(ls: QuickcodeServer, params: T.InlineCompletionParams):
    explicit = params.context is not None and params.context.trigger_kind == T.InlineCompletionTriggerKind.Invoked
    # our VS Code extension re-asks where moreText said with the trigger command (Invoked): the rest, not a best-of
    where = (params.text_document.uri, params.position.line, params.position.character)
    re_ask, ls.more_at = where == ls.more_at, None
    best_of = ls.session.cfg.explicit_best_of if explicit and not re_ask and ls.session is not None else 0
    s = await suggest(ls, params.text_document.uri, params.position, explicit, best_of)
    return answer.inline_list(s, None if s is None else ls.position_at(params.text_document.uri, s.offset))


async def completion(ls: QuickcodeServer, params: T.CompletionParams):
    """For clients without inline completion (Helix, eglot): the same suggestion as one menu item."""
    s = await suggest(ls, params.text_document.uri, params.position, explicit=True)
    if s is None:
        return answer.completion_list(None, params.position, "", False)
    before = s.on_text[s.on_text.rfind("\n", 0, s.offset) + 1:s.offset]
    return answer.completion_list(s, ls.position_at(params.text_document.uri, s.offset), before, _snippet_support(ls))


def accepted(ls: QuickcodeServer, *args):
    info = _arg(args)
    if ls.session is not None and info.get("id"):
        ls.session.on_accepted(str(info["id"]), _int(info.get("chars")))


def status_command(ls: QuickcodeServer, *args):
    return ls.status()


def stats_command(ls: QuickcodeServer, *args):
    if ls.session is None:
        return {}
    c = ls.session
    return {**c.stats.as_dict(), "cache_hits": c.cache.hits, "cache_misses": c.cache.misses,
            "outcomes": dict(c.outcomes.counts), "accepted_chars": c.outcomes.accepted_chars,
            "shown_chars": c.outcomes.shown_chars, "predictor_updates": c.predictor.updates,
            "debounce_ms": round(c.debounce.delay_ms(), 1), "waterfalls": list(c.stats.waterfalls)[-50:],
            "next_edits": dict(c.next_edits.counts)}


def report_command(ls: QuickcodeServer, *args):
    return latency_report(ls.session) if ls.session else "not started"


def enable_command(ls: QuickcodeServer, *args):
    ls.cfg.enabled = True
    ls.push_status()
    return True


def disable_command(ls: QuickcodeServer, *args):
    ls.cfg.enabled = False
    ls.push_status()
    return False


def did_show(ls: QuickcodeServer, params):
    pass  # shown is counted when a suggestion is returned; accepted on the command, dismissed by inference


def did_partially_accept(ls: QuickcodeServer, params):
    item = getattr(params, "item", None)
    cmd = getattr(item, "command", None)
    info = _arg(getattr(cmd, "arguments", None))
    length = _int(getattr(params, "accepted_length", None) or getattr(params, "acceptedLength", None))
    if ls.session is not None and info.get("id") and length:
        ls.session.on_partial(str(info["id"]), length)


def build_server(cfg: ClientConfig | None = None) -> QuickcodeServer:
    server = QuickcodeServer(cfg or ClientConfig())
    server.feature(T.INITIALIZE)(initialize)
    server.feature(T.INITIALIZED)(initialized)
    server.feature(T.SHUTDOWN)(shutdown)
    server.feature(T.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(T.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(T.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(T.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    edit_handlers.register(server, inline_completion)     # + next edits: copilotInlineEdit, ranged items
    server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=[".", "(", ",", "=", ":"]))(completion)
    server.command(ACCEPT_COMMAND)(accepted)
    server.command("quickcode.status")(status_command)
    server.command("quickcode.stats")(stats_command)
    server.command("quickcode.latencyReport")(report_command)
    server.command("quickcode.enable")(enable_command)
    server.command("quickcode.disable")(disable_command)
    server.feature("textDocument/didShowCompletion")(did_show)
    server.feature("textDocument/didPartiallyAcceptCompletion")(did_partially_accept)
    return server


def _snippet_support(ls: QuickcodeServer) -> bool:
    try:
        return bool(ls.client_capabilities.text_document.completion.completion_item.snippet_support)
    except AttributeError:
        return False


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
