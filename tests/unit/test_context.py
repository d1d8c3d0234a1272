"""Prompt windows: cut at line boundaries, stable from keystroke to keystroke."""
from lsp_client.context import build

DOC = "".join(f"line_{i} = {i} * 2\n" for i in range(400))


def ctx_at(text, cursor, **kw):
    args = dict(prefix_max_chars=600, suffix_max_chars=200, quantum=16) | kw
    return build(text, cursor, "python", "a.py", **args)


def test_windows_start_and_end_at_line_boundaries():
    c = ctx_at(DOC, DOC.index("line_200"))
    assert c.prefix.startswith("line_") and c.prefix_start > 0 and DOC[c.prefix_start - 1] == "\n"
    assert c.suffix.endswith(" * 2") and len(c.suffix) <= 200 and len(c.prefix) <= 600


def test_prefix_window_start_is_stable_while_typing():
    cursor = DOC.index("line_200") + 3
    starts = set()
    text = DOC
    for ch in "abcdefghijklmnopqrstuvwxyz":
        text = text[:cursor] + ch + text[cursor:]
        cursor += 1
        starts.add(ctx_at(text, cursor).prefix_start)
    assert len(starts) == 1


def test_window_moves_in_steps_of_the_quantum():
    starts = {ctx_at(DOC, DOC.index(f"line_{i} ")).prefix_start for i in range(100, 140)}
    lines = sorted(DOC.count("\n", 0, s) for s in starts)
    assert all(n % 16 == 0 for n in lines) and len(lines) <= 4


def test_suffix_window_is_stable_while_typing_within_a_line():
    cursor = DOC.index("line_200")
    a = ctx_at(DOC, cursor).suffix
    text = DOC[:cursor] + "xyz" + DOC[cursor:]
    b = ctx_at(text, cursor + 3).suffix
    assert a == b


def test_line_parts_and_suffix_head():
    c = ctx_at("def f(a, b):\n    return a\n# end\n", len("def f(a, b):\n    ret"))
    assert c.line_prefix == "    ret" and c.line_suffix == "urn a"
    assert c.suffix_head == "urn a\n# end"


def test_small_documents_are_whole():
    c = ctx_at("x = 1\ny = ", 10)
    assert c.prefix == "x = 1\ny = " and c.suffix == "" and c.prefix_start == 0
