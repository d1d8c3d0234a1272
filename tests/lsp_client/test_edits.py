"""The edit history (quickcode/lsp_client/edits.py): whole-line hunks, keystrokes on the same lines coalesced
into one edit, and — fuzzed over random edit sequences and bounds — never past its bounds, with the kept edits
replaying the older text into the newer."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from quickcode.lsp_client.edits import EditEvent, EditHistory, line_diff

DOC = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"


def typed(history: EditHistory, uri: str, text: str, pos: int, word: str) -> str:
    """Type `word` at `pos` one letter at a time, as an editor sends it; the text after."""
    for ch in word:
        text, old = text[:pos] + ch + text[pos:], text
        history.record(uri, old, text)
        pos += 1
    return text


def test_letters_typed_on_one_line_are_one_edit_of_that_line():
    h = EditHistory()
    text = typed(h, "u", DOC, DOC.index("a, b"), "x")
    text = typed(h, "u", text, text.index("a, b"), "y")
    (e,) = h.events("u")
    assert e == EditEvent(0, "def add(a, b):\n", "def add(xya, b):\n")
    assert e.hunk() == "@@ -1,1 +1,1 @@\n-def add(a, b):\n+def add(xya, b):\n"


def test_an_edit_on_other_lines_is_a_new_edit_and_typing_back_leaves_none():
    h = EditHistory()
    text = typed(h, "u", DOC, DOC.index("a + b"), "z")
    text2 = typed(h, "u", text, text.index("(1, 2)"), "q")
    assert [e.start_line for e in h.events("u")] == [1, 3]
    h.record("u", text2, text)                           # the q taken back: the last edit is gone
    assert [e.start_line for e in h.events("u")] == [1]


def test_a_line_break_and_a_deletion_are_whole_line_hunks():
    assert line_diff("ab\ncd\n", "a\nb\ncd\n") == EditEvent(0, "ab\n", "a\nb\n")
    assert line_diff("ab\ncd\nef\n", "ab\nef\n") == EditEvent(1, "cd\n", "")
    assert line_diff("a\nb\n", "a\nxb\n") == EditEvent(1, "b\n", "xb\n")
    assert line_diff("x", "x") is None


def test_documents_are_bounded_the_least_recently_edited_forgotten_and_cursors_too():
    h = EditHistory(max_docs=2, max_cursors=3)
    for uri in ("a", "b", "c"):
        h.record(uri, "x\n", "y\n")
    assert h.events("a") == [] and len(h.events("b")) == len(h.events("c")) == 1
    for place in [(0, 1), (0, 1), (0, 2), (1, 0), (2, 0)]:
        h.cursor("c", *place)
    assert h.cursors("c") == [(0, 2), (1, 0), (2, 0)]
    h.forget("c")
    assert h.events("c") == [] and h.cursors("c") == []


def replays_to(events: list[EditEvent], older: list[str], now: str) -> bool:
    """Some text the document had, with `events` made on it oldest first, is the text now."""
    for base in reversed(older):
        text = base
        try:
            for e in events:
                text = e.apply(text)
        except ValueError:
            continue
        if text == now:
            return True
    return False


edit = st.tuples(st.floats(0, 1), st.integers(0, 6), st.text("ab \n", max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.text("ab \n", max_size=40), st.lists(st.tuples(st.sampled_from("uv"), edit), max_size=40),
       st.integers(1, 6), st.integers(1, 60), st.integers(1, 2))
def test_random_edits_stay_in_the_bounds_and_replay_the_older_text_into_the_newer(start, steps, max_events,
                                                                                   max_chars, max_docs):
    h = EditHistory(max_events=max_events, max_chars=max_chars, max_docs=max_docs)
    texts = {"u": [start], "v": [start]}
    for uri, (where, cut, insert) in steps:
        old = texts[uri][-1]
        pos = int(where * len(old))
        new = old[:pos] + insert + old[pos + cut:]
        h.record(uri, old, new)
        texts[uri].append(new)
        events = h.events(uri)
        assert len(events) <= max_events and sum(e.chars for e in events) <= max_chars
        assert len(h.docs) <= max_docs
        assert not events or replays_to(events, texts[uri], new)


@given(st.text("ab", max_size=9000), st.text("ab", max_size=40), st.text("ab", max_size=40), st.integers(0, 9000))
@settings(max_examples=200, deadline=None)
def test_the_common_head_and_tail_are_found_across_blocks(text, cut, insert, at):
    """Texts longer than a comparison block: the hunk of one edit anywhere is exactly its lines."""
    from quickcode.lsp_client.edits import common_head, common_tail
    at = min(at, len(text))
    new = text[:at] + insert + text[at + len(cut):]
    head = common_head(text, new)
    tail = common_tail(text, new, min(len(text), len(new)) - head)
    assert text[:head] == new[:head] and (head == min(len(text), len(new)) or text[head] != new[head])
    assert text[len(text) - tail:] == new[len(new) - tail:] and head + tail <= min(len(text), len(new))
    limit = min(len(text), len(new)) - head
    assert tail == limit or text[len(text) - tail - 1] != new[len(new) - tail - 1]
