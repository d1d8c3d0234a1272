"""A suggestion → what the editor receives: an inline completion item (always with a range: VS Code hides items
without one, Emacs lsp-mode errors), or for clients without inline completion one completion-menu item; and a
next edit as a `textDocument/copilotInlineEdit` edit or an inline completion with a range."""
from __future__ import annotations

import re

from lsprotocol import types as T

ACCEPT_COMMAND = "quickcode.accept"
_WORD_BEFORE = re.compile(r"[A-Za-z0-9_]*$")


def accept_command(s) -> T.Command:
    return T.Command(title="quickcode: completion accepted", command=ACCEPT_COMMAND,
                     arguments=[{"id": s.id, "chars": len(s.text)}])


def inline_list(s, position: T.Position | None) -> T.InlineCompletionList:
    """`s` (a session.Suggestion, or None: nothing to show) inserted at `position` (where `s.offset` is now)."""
    if s is None:
        return T.InlineCompletionList(items=[])
    return T.InlineCompletionList(items=[T.InlineCompletionItem(
        insert_text=s.text, range=T.Range(position, position), command=accept_command(s))])


def completion_list(s, position: T.Position, line_before: str, snippets: bool) -> T.CompletionList:
    """The same suggestion as one menu item. Its edit starts at the word before the cursor (`line_before` is
    the cursor line up to the cursor) and its text (and filter text) begin with that word, so clients that
    filter the menu by the word typed so far keep the item; clients with snippet support get it as an
    escaped snippet (some insert only the first word of a plain-text item)."""
    if s is None:
        return T.CompletionList(is_incomplete=True, items=[])
    word = _WORD_BEFORE.search(line_before).group(0)      # ASCII: the same length in every position encoding
    if len(word) > position.character:   # a line that is not the client's (it asked past its end): no word
        word = ""
    start = T.Position(line=position.line, character=position.character - len(word))
    new_text = word + s.text
    first = new_text.split("\n", 1)[0]
    label = (first.strip() or new_text.strip().split("\n", 1)[0])
    return T.CompletionList(is_incomplete=True, items=[T.CompletionItem(
        label=label[:80] + ("…" if len(label) > 80 or "\n" in new_text.strip() else ""),
        kind=T.CompletionItemKind.Snippet, detail="quickcode", sort_text="0", filter_text=new_text,
        insert_text_format=T.InsertTextFormat.Snippet if snippets else T.InsertTextFormat.PlainText,
        text_edit=T.TextEdit(range=T.Range(start, position), new_text=escape_snippet(new_text) if snippets else new_text),
        documentation=T.MarkupContent(kind=T.MarkupKind.Markdown, value=f"```\n{s.text}\n```"),
        command=accept_command(s))])


def escape_snippet(text: str) -> str:
    """Plain text as an LSP snippet that expands to exactly that text; with no tab stop the cursor ends after it
    (a trailing `$0` would show in clients that use the snippet text as the menu word, e.g. Neovim)."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def inline_edit(e, start: T.Position, end: T.Position, uri: str, version: int | None) -> dict:
    """A next edit (edit_region.NextEdit, from `start` to `end` in the editor's positions) as one of the
    `edits` of a `textDocument/copilotInlineEdit` result."""
    return {"range": {"start": {"line": start.line, "character": start.character},
                      "end": {"line": end.line, "character": end.character}},
            "text": e.text, "textDocument": {"uri": uri, "version": version},
            "command": {"title": "quickcode: next edit accepted", "command": ACCEPT_COMMAND,
                        "arguments": [{"id": e.id, "chars": len(e.text)}]}}


def inline_edit_list(e, start: T.Position, end: T.Position) -> T.InlineCompletionList:
    """A next edit as an inline completion whose range replaces the text from `start` to `end`."""
    return T.InlineCompletionList(items=[T.InlineCompletionItem(
        insert_text=e.text, range=T.Range(start, end), command=accept_command(e))])
