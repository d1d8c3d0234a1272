"""Next-edit training examples from real edit sequences (quickcode/draft_model/edit_pairs.py), in the very
prompt the backend builds for the language server's request (quickcode/backend/edit_prompt.py).

Each state of a sequence after its k-th edit (k ≥ 1) is asked as the language server asks it: the cursor where
that edit's typing ended, the editable region and the text around it shaped by the client's defaults
(quickcode/protocol/edit_window.py), the edits so far as hunks (oldest first, bounded as the client bounds its
history). The answer the model is to write is the region as the next edit of the sequence leaves it, then the
region's end marker; when the next edit lies outside the region the answer is the region unchanged (there is
nothing to suggest there, and the server then answers no edit).
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer

from quickcode.backend.edit_prompt import REGION_END, edit_prompt, replacement
from quickcode.draft_model.edit_pairs import after_edits
from quickcode.protocol import ProtocolError
from quickcode.protocol.edit_window import edit_request, hunk_text, region_around


@dataclass(frozen=True)
class Shape:
    """How the language server shapes a request (its defaults, quickcode/lsp_client/config.py) and the
    backend's prompt budget."""
    lines: int = 3
    region_chars: int = 2000
    context_chars: int = 1500
    history_edits: int = 16
    history_chars: int = 4000
    max_tokens: int = 256
    budget_tokens: int = 1536


@dataclass(frozen=True)
class Example:
    prompt: list[int]
    answer: list[int]
    changes: bool          # the answer changes the region (False: the next edit is elsewhere)
    record_id: str
    step: int              # edits made before the question


def examples_of(record: dict, tok: Tokenizer, bos_id: int | None, shape: Shape = Shape()) -> list[Example]:
    """Every question of `record` (after its 1st, 2nd, … edit, the last one excepted) and its answer."""
    docs = [after_edits(record, k) for k in range(len(record["edits"]) + 1)]
    out = []
    for k in range(1, len(docs) - 1):
        typed = replacement(docs[k - 1], docs[k])
        if typed is None:
            continue
        cursor = typed[0] + len(typed[2])
        text = docs[k]
        region = region_around(text, cursor, shape.lines, shape.region_chars)
        if region is None:
            continue
        events = history(record["edits"][:k], shape)
        msg = edit_request(f"{record['id']}@{k}", text, region, events, "python", record["path"],
                           shape.context_chars, shape.max_tokens)
        try:
            prompt = edit_prompt(msg, tok, bos_id, shape.budget_tokens)
        except ProtocolError:            # the region alone does not fit the budget
            continue
        old = text[region.start:region.end]
        new = next_region(text, docs[k + 1], region.start, region.end)
        body = new if new.endswith("\n") else new + "\n"
        answer = tok.encode(body + REGION_END, add_special_tokens=False).ids
        if len(answer) > shape.max_tokens:
            continue
        out.append(Example(prompt, answer, new != old, record["id"], k))
    return out


def next_region(text: str, after: str, start: int, end: int) -> str:
    """`text[start:end]` as the change `text` → `after` leaves it when the change lies inside it; else as it is."""
    change = replacement(text, after)
    if change is None or change[0] < start or change[1] > end:
        return text[start:end]
    s, e, new = change
    return text[start:s] + new + text[e:end]


def history(edits: list[dict], shape: Shape) -> list[str]:
    """The edits as the client keeps them: hunks, newest kept, at most `history_edits` and `history_chars`
    (each edit's old and new text counted) in all."""
    kept: list[str] = []
    chars = 0
    for e in reversed(edits):
        chars += len(e["old"]) + len(e["new"])
        if len(kept) == shape.history_edits or chars > shape.history_chars:
            break
        kept.append(hunk_text(e["start_line"], e["old"], e["new"]))
    return kept[::-1]
