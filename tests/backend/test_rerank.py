"""Best of several lines (quickcode/backend/rerank.py): which line a completion is, the window it is scored in, the pick."""
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from quickcode.backend import rerank

TOK = Tokenizer.from_file(str(Path(__file__).resolve().parents[2] / "models" / "target" / "tokenizer.json"))


@pytest.mark.parametrize("text, line", [
    ("    return x\n    y = 2\n", "    return x\n"),     # the cursor at a line start: the line and its end
    ("x + 1)", "x + 1)"),                               # the model closed the gap: no line end
    ("\n    return x\nfoo", "\n    return x\n"),         # a completion that opens a new line keeps it
    ("\n\n    a = 1\n", "\n\n    a = 1\n"),
    ("", ""),
])
def test_a_completions_line(text, line):
    assert rerank.line_of(text) == line


def test_distinct_lines_keep_the_first_of_each_and_drop_blank_ones():
    texts = ["    return x\nmore", "    return y\n", "    return x\nother", "\n\n", "   "]
    assert rerank.distinct_lines(texts) == ["    return x\n", "    return y\n"]


def test_the_window_scores_the_line_and_the_suffix_not_the_prefix():
    prefix = "def f(a):\n    depth = 0\n" * 3 + "    for c in a:\n"
    w = rerank.window(TOK, prefix, "        depth += 1\n", "    return depth\n")
    text = TOK.decode(w.ids)
    assert text.endswith("return depth\n")
    scored = TOK.decode(w.ids[w.first_scored:])
    assert "depth += 1" in scored and "for c in a" not in scored
    # every candidate of a request has the same unscored head: the scores compare the same thing
    w2 = rerank.window(TOK, prefix, "        pass\n", "    return depth\n")
    assert w2.ids[:w2.first_scored] == w.ids[:w.first_scored]


def test_a_long_prefix_is_cut_at_a_line_start_and_the_suffix_to_its_budget():
    prefix = "".join(f"line_{i} = {i}\n" for i in range(500))
    w = rerank.window(TOK, prefix, "x = 1\n", "y = 2\n" * 500, prefix_chars=100, suffix_chars=30)
    text = TOK.decode(w.ids)
    assert text.startswith("line_") and len(text) <= 100 + len("x = 1\n") + 30
    assert text.count("y = 2") == 5


def test_the_best_line_wins_and_a_tie_goes_to_the_earlier_greedy_one():
    assert rerank.best(["a\n", "b\n", "c\n"], [-3.0, -1.0, -2.0]) == "b\n"
    assert rerank.best(["a\n", "b\n"], [-1.0, -1.0]) == "a\n"
    assert rerank.best([], []) == ""


def test_a_best_of_request_costs_the_scheduler_a_window_and_a_line_per_candidate():
    from quickcode.backend import best_of
    from quickcode.protocol import Complete

    plain = Complete(id="a", prefix="x", max_tokens=32)
    five = Complete(id="b", prefix="x", max_tokens=32, best_of=5)
    job = best_of.job(("s", "b"), "u", five, 400)
    assert job.prompt_tokens == 400 + 5 * rerank.WINDOW_TOKENS and job.max_tokens == 5 * plain.max_tokens


@pytest.mark.parametrize("text, stop, cut", [
    ("    return a\n", [], "    return a\n"),
    ("    return a  # b\n", ["  #"], "    return a"),
    ("x = f(a)\n", ["\n"], "x = f(a)"),
    ("x = f(a)\n", ["(", ")"], "x = f"),
])
def test_the_clients_stop_strings_cut_a_candidate_before_the_first_of_them(text, stop, cut):
    from quickcode.backend.best_of import cut_at

    assert cut_at(text, stop) == cut
