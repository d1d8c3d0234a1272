"""Post-processing: what the editor shows for a raw model stream, read like the editor (║ = cursor)."""
import pytest

from quickcode.lsp_client import postprocess as pp
from tests.support.cursor import at


def show(fixture: str, raw: str, finished: bool = True) -> tuple[str, bool]:
    _, _, ctx = at(fixture)
    return pp.cut(raw, pp.shape(ctx), finished)


@pytest.mark.parametrize("fixture, raw, expected", [
    # mid-line: one line, and the part the suffix repeats is trimmed
    ("print(║)\n", "x, y)\nfoo()", "x, y"),
    ("x = compute(a, ║)\n", "b, c)\n", "b, c"),
    ("if a ║:\n    pass\n", "and b:\n", "and b"),
    # end of an ordinary line: one line
    ("import ║\n", "os\nimport sys\n", "os"),
    ("total = ║", "sum(values)\nreturn total", "sum(values)"),
    # after a block opener: the body, until the indentation returns
    ("def add(a, b):║\n", "\n    return a + b\n\ndef sub(a, b):\n", "\n    return a + b"),
    ("def add(a, b):\n    ║", "c = a + b\n    return c\n\nprint(add(1, 2))", "c = a + b\n    return c"),
    ("for x in xs:\n    ║\nprint(done)\n", "total += x\n    count += 1\nprint(done)", "total += x\n    count += 1"),
    # a closing bracket the suffix already has is not repeated
    ("foo(bar(║))\n", "1, 2))\n", "1, 2"),
])
def test_shown_text(fixture, raw, expected):
    assert show(fixture, raw)[0] == expected


@pytest.mark.parametrize("raw", ["", "   ", "\n\n", "))))))))))", "self.self.self.self.self.self.", "abab" * 10])
def test_empty_whitespace_and_repetitive_completions_are_dropped(raw):
    assert show("x = ║", raw)[0] == ""


def test_a_looping_tail_is_cut_and_the_sensible_head_kept():
    assert show("def f():\n    ║", "x = 1\n    x = 1\n    x = 1\n    x = 1\n") == ("x = 1", True)
    assert show("def f():\n    ║", "y = g(\n        a,\n        a,\n") == ("y = g(\n        a,", True)
    assert show("x = ║", "compute_total(values, weights) + self.self.self.self.self.\n")[0] == "compute_total(values, weights) +"


def test_indentation_and_alignment_are_not_loops_but_a_phrase_said_three_times_is():
    method = "class A:\n    def f(self):\n        ║"
    block = "if x:\n            y = 1\n        z = 2\n    def g(self):\n"
    assert show(method, block) == ("if x:\n            y = 1\n        z = 2", True)
    assert show("x = ║", "f(a,                 b)\n")[0] == "f(a,                 b)"
    assert show("x = ║", "# the number of the number of the number of", finished=False) == ("", True)
    assert show("def f():\n    ║", "a = g()\n    b = h()\n    a = g()\n    b = h()\n") == ("a = g()\n    b = h()", True)
    assert show("x = ║", "compute_total(values, weights, offsets) + the end the end the end ")[0] == \
        "compute_total(values, weights, offsets) +"


def test_single_line_is_final_once_the_line_ends_so_the_stream_can_stop():
    assert show("x = ║", "foo(", finished=False) == ("foo(", False)
    assert show("x = ║", "foo(1)\nbar", finished=False) == ("foo(1)", True)


def test_block_is_final_when_indentation_returns():
    text, final = show("def f():\n    ║", "a = 1\n    b = 2\nc", finished=False)
    assert (text, final) == ("a = 1\n    b = 2", True)
    text, final = show("def f():\n    ║", "a = 1\n    b = ", finished=False)
    assert (text, final) == ("a = 1", False)


def test_block_stops_where_the_suffix_continues():
    fixture = "def f(x):\n    ║\n    return y\n"
    assert show(fixture, "y = x * 2\n    return y\n")[0] == "y = x * 2"


def test_block_is_capped_at_max_lines():
    _, _, ctx = at("def f():\n    ║")
    sh = pp.shape(ctx, max_lines=2)
    assert pp.cut("a = 1\n    b = 2\n    c = 3\n", sh, False) == ("a = 1\n    b = 2", True)


def test_brackets_inside_strings_do_not_count():
    assert show("x = f(║)\n", "')', 2)\n")[0] == "')', 2"


def early(fixture: str, raw: str) -> str:
    _, _, ctx = at(fixture)
    return pp.early(raw, pp.shape(ctx))


@pytest.mark.parametrize("fixture, raw, expected", [
    ("x = ║", "compute_total(val", "compute_total("),      # the word still being written waits
    ("x = ║", "compute", ""),                               # nothing settled yet
    ("x = ║", "self.items[0] + off", "self.items[0] +"),
    ("print(║)\n", "a, b", "a,"),                           # mid-line: the suffix rules still apply
    ("def f():\n    ║", "total = sum(va", "total = sum("),  # a block's first line, before it is complete
    ("def f():\n    ║", "a = 1\n    b = g(", "a = 1\n    b = g("),   # complete lines and the settled words
    ("if x:\n    pass\nelse:║", "\n    return self.ma", "\n    return self."),   # a body that starts below
    ("def f():\n    ║", "a = 1\nprint(a", "a = 1"),          # the line being written already ends the block
    ("x = ║", "foo(1)\nbar", "foo(1)"),                     # final: the same as cut
    ("x = ║", "ab ab ab ab ab ab ", ""),                    # a loop is not shown early either
])
def test_early_shows_only_the_settled_part_of_a_stream_still_being_written(fixture, raw, expected):
    assert early(fixture, raw) == expected


@pytest.mark.parametrize("fixture, raw", [
    ("x = ║", "compute_total(values, weights) + offset\n"),
    ("def f(values):\n    ║", "total = sum(values)\n    if total > 10:\n        total -= 1\n    return total\n\nx"),
])
def test_early_text_only_grows_as_the_stream_goes_on(fixture, raw):
    shown = [early(fixture, raw[:n]) for n in range(len(raw) + 1)]
    for a, b in zip(shown, shown[1:]):
        assert b.startswith(a), (a, b)


def showable(fixture: str, raw: str, unit: str) -> tuple[str, bool]:
    _, _, ctx = at(fixture)
    return pp.showable(raw, pp.shape(ctx), True, True, unit)


@pytest.mark.parametrize("unit", ["block", "word"])
def test_text_that_makes_the_line_a_copy_of_its_neighbour_is_not_shown(unit):
    # the next line written again, the line above written again (HumanEval: 2 and 11 of 200 first lines)
    assert showable("a = 1\nb = ║\nb = 2\n", "2\n", unit) == ("", True)
    assert showable("b = 1\nb = ║\nc = 2\n", "1\n", unit) == ("", True)
    # what differs from both is shown
    assert showable("a = 1\nb = ║\nb = 2\n", "3\n", unit) == ("3", True)
    # indentation counts: closers stacked at different depths are not copies
    assert showable("x = {\n    'a': {\n        1: 2,\n    }\n║", "}\n", unit) == ("}", True)
    # a line with no letter or digit repeats for good reason (a comment block's bare `#`)
    assert showable("# Usage:\n#\n║", "#\n", unit) == ("#", True)


def test_a_whole_line_copied_is_not_shown_but_a_word_of_it_is():
    # by the line: the next line or the one above written again
    assert showable("def f(a):\n    x = a\n    ║\n    return x\n", "return x\n", "block") == ("", True)
    assert showable("    self.a = a\n    ║", "self.a = a\n", "block") == ("", True)
    assert showable("def f(a):\n    x = a\n    ║\n    return x\n", "y = x\n", "block") == ("y = x", True)
    # by the word the model's line is a copy, but the word shown does not make one: it may be right
    # (consecutive `self.a = a`, `self.b = b`)
    assert showable("    self.a = a\n    ║", "self.a = a\n", "word")[0] == "self."
    assert showable("def f(a):\n    x = a\n    ║\n    return x\n", "return x\n", "word")[0] == "return"


def test_the_neighbours_are_looked_for_within_a_bound_on_any_line_length():
    _, _, ctx = at("x = 1\n" + "y" * 100_000 + "\n\n" + "║\n" + "z" * 100_000 + "\n")
    sh = pp.shape(ctx)
    assert len(sh.line_above) <= pp._NEIGHBOUR_CHARS and len(sh.line_below) <= pp._NEIGHBOUR_CHARS
