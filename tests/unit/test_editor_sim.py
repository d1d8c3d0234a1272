"""The simulated developer's Enter: the editor indents the new line (what VS Code, Neovim and JetBrains do)."""
from benchmarks.editor_sim import _indent_at


def test_enter_brings_the_next_lines_indentation_and_nothing_on_a_blank_line():
    text = "def f(x):\n    if x:\n\t\treturn 1\n\n   \nend"
    after_each_newline = [_indent_at(text, i + 1) for i, ch in enumerate(text) if ch == "\n"]
    assert after_each_newline == ["    ", "\t\t", "", "", ""]


def test_a_segment_cut_off_in_the_indentation_is_indented_by_enter_not_typed_space_by_space():
    """The typed segment ends after a newline and some of the next line's indentation: Enter brings it (typing it
    key by key would teach the client that people type fast at line starts)."""
    assert _indent_at("        else:\n          ", len("        else:\n")) == "          "
    assert _indent_at("x\n", 2) == ""


def test_the_developers_pauses_and_coins_depend_only_on_the_seed_and_the_place():
    """Two language servers typing the same segment meet the same pauses at the same places (whatever each
    showed or had accepted before): the typing benchmark compares them place by place."""
    from benchmarks.editor_sim import SimEditor, TypingModel

    a, b = SimEditor(["true"], seed=7), SimEditor(["true"], seed=7)
    b.rng_at(3).random()                                   # history does not move the stream of a place
    m = TypingModel()
    assert [m.gap_ms(a.rng_at(i), "x") for i in range(5)] == [m.gap_ms(b.rng_at(i), "x") for i in range(5)]
    assert m.gap_ms(SimEditor(["true"], seed=8).rng_at(0), "x") != m.gap_ms(a.rng_at(0), "x")


def test_a_sessions_counts_are_read_off_its_position_logs():
    """Requests, shows and acceptances are counted from the logs the benchmark attributes by place: the two
    can never disagree."""
    from benchmarks.editor_sim import SessionResult

    res = SessionResult(asks=[{"at": 0}, {"at": 1}, {"at": 1}], shows=[{"at": 1, "text": "ab"}],
                        accepts=[{"at": 1, "text": "ab"}, {"at": 5, "text": "c\n"}])
    assert (res.requests, res.shown, res.accepted, res.accepted_chars) == (3, 1, 2, 4)
    assert res.accepted_texts == ["ab", "c\n"]
