"""The cost diagnosis splits a session's decoded tokens and requests without losing any (quickcode/benchmarks/typing_cost)."""
from __future__ import annotations

from quickcode.benchmarks.typing_cost import place_class, requests_by_place, string_spans, tokens_of
from quickcode.lsp_client.debounce import AdaptiveDebounce


def _count(text: str) -> int:          # a token a character: the sums are what is checked
    return len(text)


def test_decoded_tokens_split_into_shown_never_shown_and_beyond_the_shown_text():
    row = {"engine": {"output_tokens": 40}, "wasted_by": {"typed_away": 7, "prefetch": 2, "empty": 0},
           "shows": [{"at": 0, "text": "self.", "id": "r1"}, {"at": 5, "text": "x", "id": "r1+5"},
                     {"at": 9, "text": "ab", "id": "r3"}]}
    t = tokens_of(row, _count)
    assert t == {"decoded": 40, "shown": 8, "never_shown_requests": {"typed_away": 7, "prefetch": 2},
                 "beyond_shown": 23}
    assert t["shown"] + sum(t["never_shown_requests"].values()) + t["beyond_shown"] == t["decoded"]


def test_places_read_string_literals_off_the_file_and_the_rest_off_the_line():
    source = 'x = 1\ny = "ab c"\nz = f(y)\n'
    target = source[6:]                                    # the segment typed: from line 2 on
    spans = string_spans(source, 6)
    assert [place_class(target, at, spans) for at in (0, 6, 8, 11, 15, 16, 17)] == [
        "line start", "in string", "in string", "line start", "after space", "mid-word", "after punctuation"]


def test_an_answered_ask_launched_its_request_and_a_cancelled_one_only_past_the_learnt_wait():
    row = {"target": "ab = cd\n", "asks": [
        {"at": 1, "outcome": "items", "id": "r1", "t_ms": 0, "end_ms": 50},          # launched: mid-word
        {"at": 2, "outcome": "items", "id": "r1+1", "t_ms": 100, "end_ms": 101},     # from the cache
        {"at": 4, "outcome": "cancelled", "t_ms": 200, "end_ms": 260},               # 60 ms < the 100 ms wait
        {"at": 5, "outcome": "cancelled", "t_ms": 300, "end_ms": 500}],              # 200 ms > it: asked
        "accepts": [{"at": 1, "text": "b", "id": "r1"}]}
    c = requests_by_place(row, [], AdaptiveDebounce(base_ms=100, adaptive=False))
    assert c[("mid-word", "asks")] == 2 and c[("mid-word", "requests")] == 1
    assert c[("after space", "requests")] + c[("after punctuation", "requests")] == 1
    assert c[("mid-word", "accepted_chars")] == 1
