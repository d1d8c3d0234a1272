"""The LSP handlers of next-edit suggestions (registered by server.py `build_server`): the de facto next-edit
request, `textDocument/copilotInlineEdit` (params: textDocument {uri, version}, position; result
`{edits: [{range, text, textDocument, command}]}`), and an inline completion with a range where the plain
one has nothing, for clients that never ask the former (one that does draws the edit itself: a ranged item
would show it twice). Both answer nothing unless the client setting `next_edit` is on; never an error."""
from __future__ import annotations

import asyncio
import logging

from lsprotocol import types as T

from quickcode.lsp_client import answer
from quickcode.lsp_client.edit_region import NextEdit

log = logging.getLogger("quickcode.lsp")

INLINE_EDIT = "textDocument/copilotInlineEdit"


async def next_edit(ls, uri: str, position: T.Position) -> NextEdit | None:
    """The session's never-stale next edit at `position` (next_edit.py). None: nothing."""
    if ls.session is None or uri not in ls.session.docs or not ls.session.cfg.next_edit:
        return None
    try:
        at = ls.arrival(uri, position)
        return await ls.session.next_edits.suggest(uri, at.text, at.offset, ls.caught_up)
    except asyncio.CancelledError:
        raise  # $/cancelRequest: pygls answers RequestCancelled
    except Exception:
        log.exception("next edit failed at %s:%s; answering none", uri, position)
        return None


async def copilot_inline_edit(ls, params) -> dict:
    """`textDocument/copilotInlineEdit`: the next edit, if the document is still at the version asked."""
    if ls.session is not None:
        ls.session.next_edits.client_draws = True
    doc_id, pos = _field(params, "textDocument", "text_document"), _field(params, "position")
    uri, version = _field(doc_id, "uri"), _field(doc_id, "version")
    line, character = _field(pos, "line"), _field(pos, "character")
    if not isinstance(uri, str) or not all(isinstance(v, int) and v >= 0 for v in (line, character)):
        return {"edits": []}
    e = await next_edit(ls, uri, T.Position(line=line, character=character))
    doc = ls.workspace.text_documents.get(uri) if e is not None else None
    if doc is None or (isinstance(version, int) and doc.version is not None and doc.version != version):
        return {"edits": []}                        # edited since it was asked: the edit would be stale
    start, end = ls.position_at(uri, e.start), ls.position_at(uri, e.end)
    return {"edits": [answer.inline_edit(e, start, end, uri, doc.version)]}


def register(server, inline_completion) -> None:
    """Serve inline completion by `inline_completion`, with the next edit where it has nothing, and
    `textDocument/copilotInlineEdit`."""
    options = T.InlineCompletionOptions()
    server.feature(T.TEXT_DOCUMENT_INLINE_COMPLETION, options)(with_next_edit(inline_completion))
    server.feature(INLINE_EDIT)(copilot_inline_edit)


def with_next_edit(handler):
    """`handler` (inline completion); where it has nothing and next edits are on, the next edit as an item
    with a range, when that range starts on the cursor's line (where ghost text is drawn) and the client does
    not draw next edits itself."""
    async def inline_completion(ls, params: T.InlineCompletionParams):
        result = await handler(ls, params)
        if (result.items or ls.session is None or not ls.session.cfg.next_edit
                or ls.session.next_edits.client_draws):
            return result
        uri = params.text_document.uri
        e = await next_edit(ls, uri, params.position)
        if e is None:
            return result
        start, end = ls.position_at(uri, e.start), ls.position_at(uri, e.end)
        if start.line != params.position.line:
            return result
        return answer.inline_edit_list(e, start, end)
    return inline_completion


def _field(obj, *names):
    """A field of a request's params, as pygls gives them (an object, or a dict for a custom method)."""
    for name in names:
        value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        if value is not None:
            return value
    return None
