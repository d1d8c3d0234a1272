"""bench invoke's pure parts: where it asks, and what an answer is worth."""
from quickcode.benchmarks.invoke import intervals, places, score, summarize

TEXT = "".join(f"# header {k}\n" for k in range(30)) + (
    "def f(a, b):\n"
    "    total = a + b\n"
    "\n"
    "    # a comment line\n"
    "    return total.real\n"
    "x\n"
)


def test_places_are_line_starts_or_after_an_opener_with_the_line_still_to_come():
    got = places(TEXT, 10, seed=0)
    assert got == sorted(set(got))
    line_starts = {TEXT.index("def f"), TEXT.index("total ="), TEXT.index("return total")}
    after_opener = {TEXT.index("a, b):"), TEXT.index("a + b"), TEXT.index("real\n")}
    assert set(got) <= line_starts | after_opener
    assert set(got) & line_starts and set(got) & after_opener
    assert TEXT.index("x\n") not in got                           # too little of the line left
    assert all(o >= TEXT.index("def f") for o in got)              # not in the first 30 lines


def test_places_is_deterministic_and_bounded():
    assert places(TEXT, 2, seed=3) == places(TEXT, 2, seed=3)
    assert len(places(TEXT, 2, seed=3)) == 2
    assert places("", 5, seed=0) == []


def test_score_exact_line_and_characters_taken():
    rest = "return total.real\nx\n"
    assert score("return total.real", rest) == {"shown": True, "exact": True, "whole_chars": 17,
                                                "word_chars": 17, "wrong": False}
    s = score("return total.imag", rest)
    assert not s["exact"] and s["whole_chars"] == 0 and s["word_chars"] == len("return total.") and not s["wrong"]
    assert score("return", rest)["exact"] is False and score("return", rest)["whole_chars"] == 6
    assert score("", rest) == {"shown": False, "exact": False, "whole_chars": 0, "word_chars": 0, "wrong": False}
    assert score("yield x", rest)["wrong"]


def test_intervals_pair_places_across_arms():
    good = {"score": score("ab", "ab\n"), "ms": 10.0}
    bad = {"score": score("zz", "ab\n"), "ms": 30.0}
    rows = {"a": [good] * 10, "b": [bad] * 10}
    ci = intervals(rows, draws=50)
    assert ci["a.exact_share"] == [1.0, 1.0] and ci["b.exact_share"] == [0.0, 0.0]
    assert ci["a/b.p50_ms"] == [-20.0, -20.0]
    assert summarize([good["score"], bad["score"]], [10.0, 30.0])["exact"] == 1


def test_no_place_inside_a_string_literal():
    text = TEXT + 'def g():\n    """Doc line one.\n    f(x, y) inside the docstring\n    """\n    return g(1, 2)\n'
    got = places(text, 40, seed=1)
    doc = text.index('"""Doc'), text.index('    """\n') + 7
    assert got and not any(doc[0] < o < doc[1] for o in got)
    assert text.index("return g") in got
