"""Next-edit training examples: the prompt is the one the backend builds from the request the language server
sends for the same document, cursor and typed edits (so the model trains on what it is served), the answer is
the region as the next edit leaves it (unchanged when that edit is elsewhere), the history is bounded as the
client bounds it; and the trainer's batches put the loss on the answer only."""
from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer

from quickcode.backend.edit_prompt import REGION_END, REGION_START, edit_prompt, replacement
from quickcode.draft_model import edit_examples as ee
from quickcode.draft_model.edit_adapt import batches, tensors
from quickcode.draft_model.edit_pairs import after_edits
from quickcode.lsp_client.edits import EditHistory
from quickcode.protocol.edit_window import edit_request, region_around

REPO = Path(__file__).resolve().parents[2]
TOK = Tokenizer.from_file(str(REPO / "models" / "target" / "tokenizer.json"))

TEXT = ("def area(width, height):\n    total = width * height\n    return total\n\n\n"
        + "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(6)))
# a rename, its use two lines below, then an edit 24 lines further down (outside a ±3-line region)
RECORD = {"id": "pkg@1..2:m.py#0", "path": "m.py", "text": TEXT, "edits": [
    {"start_line": 1, "old": "    total = width * height\n", "new": "    product = width * height\n"},
    {"start_line": 2, "old": "    return total\n", "new": "    return product\n"},
    {"start_line": 26, "old": "    return x + 5\n", "new": "    return x + 50\n"},
]}


def client_prompt(record: dict, k: int, shape: ee.Shape) -> list[int]:
    """The backend's prompt for the request the language server sends after the developer typed the first `k`
    edits of `record` (each: its old text deleted, the new text typed key by key)."""
    hist = EditHistory(shape.history_edits, shape.history_chars)
    text = record["text"]
    for j in range(k):
        after = after_edits(record, j + 1)
        s, e, new = replacement(text, after)
        cur = text[:s] + text[e:]
        hist.record("u", text, cur)
        for ch in new:
            nxt = cur[:s] + ch + cur[s:]
            hist.record("u", cur, nxt)
            cur, s = nxt, s + 1
        assert cur == after
        text = cur
    region = region_around(text, s, shape.lines, shape.region_chars)
    msg = edit_request("r", text, region, [ev.hunk() for ev in hist.events("u")], "python", record["path"],
                       shape.context_chars, shape.max_tokens)
    return edit_prompt(msg, TOK, None, shape.budget_tokens)


def test_the_prompt_is_the_one_the_language_server_gets_built():
    shape = ee.Shape()
    got = ee.examples_of(RECORD, TOK, None, shape)
    assert [x.step for x in got] == [1, 2]
    for x in got:
        assert x.prompt == client_prompt(RECORD, x.step, shape)
        assert TOK.decode(x.prompt).endswith(REGION_START + "\n")


def test_the_answer_is_the_region_after_the_next_edit_or_unchanged_when_it_is_elsewhere():
    first, second = ee.examples_of(RECORD, TOK, None)
    answer = TOK.decode(first.answer)
    assert answer.endswith(REGION_END) and "    return product\n" in answer and "return total" not in answer
    assert first.changes
    # after the second edit the next one is 24 lines down, outside the region: the region comes back as it is
    assert not second.changes
    assert "return product" in TOK.decode(second.answer) and "x + 50" not in TOK.decode(second.answer)


def test_the_history_keeps_the_newest_edits_within_the_client_bounds():
    edits = [{"start_line": i, "old": f"a{i}\n", "new": f"b{i}\n"} for i in range(10)]
    assert len(ee.history(edits, ee.Shape(history_edits=4))) == 4
    assert ee.history(edits, ee.Shape(history_edits=4))[-1].endswith("+b9\n")
    kept = ee.history(edits, ee.Shape(history_chars=12))     # 6 characters an edit
    assert len(kept) == 2 and kept[0].endswith("+b8\n")


def test_batches_fit_their_token_budget_and_the_loss_is_on_the_answer_only():
    exs = [ee.Example(list(range(1, 1 + n)), [7, 8, 9], True, "r", 1) for n in (5, 9, 30, 31, 60)]
    bs = batches(exs, 70, random.Random(0))
    assert sorted(len(e.prompt) for b in bs for e in b) == [5, 9, 30, 31, 60]
    for b in bs:
        ids, mask, targets = tensors(b)
        assert ids.shape[0] * ids.shape[1] <= 70 or len(b) == 1
        for i, e in enumerate(b):
            n = len(e.prompt)
            assert targets[i].tolist()[n - 1:n + 2] == [7, 8, 9]
            assert set(targets[i].tolist()[:n - 1] + targets[i].tolist()[n + 2:]) <= {-100}
            assert mask[i].sum() == n + 3
