"""What the simulated developer takes of a ghost text: whole, or its right words the way VS Code's
accept-next-word (Ctrl+Right) steps through it (quickcode/benchmarks/accept_rule.py)."""
import pytest

from quickcode.benchmarks.accept_rule import accept_steps, accepted_len, next_word_len, word_stops


def pieces(text: str) -> list[str]:
    stops = word_stops(text)
    return [text[a:b] for a, b in zip([0, *stops], stops)]


def test_a_word_step_takes_an_identifier_then_each_separator_as_vs_code_does():
    assert pieces("foo.bar(x)") == ["foo", ".", "bar", "(", "x", ")"]
    assert pieces("self.width + 1\n") == ["self", ".", "width", " ", "+ ", "1", "\n"]
    assert pieces("):\n") == ["):\n"]                 # no word in it: all of it is one step


def test_leading_whitespace_is_a_step_of_its_own_and_a_new_lines_indentation_comes_with_its_newline():
    assert pieces("  return x") == ["  ", "return", " ", "x"]
    assert pieces("\n    return") == ["\n    ", "return"]
    assert next_word_len(" x") == 1 and next_word_len("") == 0


def test_unicode_identifiers_and_numbers_are_one_word():
    assert pieces("naïve_ß = 1") == ["naïve_ß", " ", "= ", "1"]
    assert pieces("x = -1.5e3)") == ["x", " ", "= ", "-1.5e3", ")"]


def test_the_word_developer_takes_the_longest_right_run_of_word_steps():
    rest = "return self.width\n    x = 1\n"
    assert accepted_len("return self.height\n", rest, "word") == len("return self.")
    assert accepted_len("return self.x + 1", rest, "word") == len("return self.")
    # a step is where VS Code stops in the suggestion: a shorter word that is still right is taken too
    assert accepted_len("return self.w + 1", rest, "word") == len("return self.w")
    assert accepted_len("return None", rest, "word") == len("return ")


def test_a_wrong_first_word_takes_nothing_not_even_the_right_whitespace_before_it():
    rest = "return self.width\n"
    assert accepted_len("retort self.width\n", rest, "word") == 0
    assert accepted_len("  return", rest, "word") == 0
    assert accepted_len(" x", " y = 1", "word") == 0
    assert accepted_len(" y = 2", " y = 1", "word") == len(" y = ")
    assert accepted_len("\n    pass", "\n    return", "word") == 0
    assert accepted_len("\n    return None", "\n    return x", "word") == len("\n    return ")
    assert accepted_len("return", "ret", "word") == 0         # the segment ends inside the word


def test_a_right_suggestion_is_taken_whole_by_both_kinds_and_the_whole_developer_takes_no_part():
    rest = "return self.width\n    x = 1\n"
    for dev in ("whole", "word"):
        assert accepted_len("return self.width\n    x", rest, dev) == len("return self.width\n    x")
    assert accepted_len("return self.height\n", rest, "whole") == 0
    with pytest.raises(ValueError):
        accepted_len("x", "x", "line")


def test_a_partial_accept_is_one_press_per_word_each_reporting_the_length_accepted_so_far():
    assert accept_steps("return self.height\n", 12) == [("return", 6), (" ", 7), ("self", 11), (".", 12)]
    assert accept_steps("x", 0) == []
