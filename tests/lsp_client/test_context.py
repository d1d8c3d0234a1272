"""Prompt windows: cut at line boundaries, stable from keystroke to keystroke."""
from quickcode.lsp_client.context import build

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


# ── bounded on any line length (issue 15 item 4)
from quickcode.lsp_client.context import LONG_LINE_STEP  # noqa: E402
from quickcode.protocol.budget import within_budget  # noqa: E402
from quickcode.protocol import Snippet  # noqa: E402

MINIFIED = "var a=1;" * 25_000          # one 200 KB line


def test_a_200_kb_line_gives_windows_within_their_sizes_in_the_middle():
    cursor = len(MINIFIED) // 2
    c = ctx_at(MINIFIED, cursor, prefix_max_chars=3000, suffix_max_chars=800)
    assert 3000 - LONG_LINE_STEP <= len(c.prefix) <= 3000 and len(c.suffix) == 800
    assert MINIFIED[c.prefix_start:cursor] == c.prefix and c.line_prefix == c.prefix and c.line_suffix == c.suffix
    assert len(c.suffix_head) <= 800


def test_inside_a_long_line_the_prefix_start_moves_in_steps_while_typing():
    cursor, text, starts = len(MINIFIED) // 2, MINIFIED, set()
    for i in range(600):
        text = text[:cursor] + "x" + text[cursor:]
        cursor += 1
        starts.add(ctx_at(text, cursor, prefix_max_chars=3000).prefix_start)
    assert len(starts) <= 600 // LONG_LINE_STEP + 2      # a move every LONG_LINE_STEP typed characters


def test_the_prompt_is_cut_to_the_backends_budget_snippets_first():
    snippets = [Snippet(path="b.py", text="s" * 500), Snippet(path="c.py", text="t" * 500)]
    assert within_budget("p" * 100, "s" * 100, snippets, 0) == ("p" * 100, "s" * 100, snippets)
    p, s, sn = within_budget("p" * 1000, "q" * 300, snippets, 1900)
    assert (p, s, [x.path for x in sn]) == ("p" * 1000, "q" * 300, ["b.py"])
    p, s, sn = within_budget("p" * 3000, "q" * 800, snippets, 1000)
    assert sn == [] and len(p) + len(s) == 1000 and s == "q" * 250 and p == "p" * 750
    _, _, sn = within_budget("p" * 1000, "q" * 300, snippets, 1900, drop_from_front=True)   # llama.vim's ring
    assert [x.path for x in sn] == ["c.py"]


def _cut_one_at_a_time(prefix, suffix, snippets, max_chars, drop_from_front):
    """The rule as first written: drop a snippet while the whole is over (quadratic; the reference)."""
    snippets = list(snippets)
    while snippets and len(prefix) + len(suffix) + sum(len(s.text) + len(s.path) for s in snippets) > max_chars:
        snippets.pop(0 if drop_from_front else -1)
    return snippets


from hypothesis import given, strategies as st  # noqa: E402


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 8)), max_size=30), st.integers(0, 400),
       st.integers(1, 600), st.booleans())
def test_within_budget_keeps_the_snippets_the_one_at_a_time_rule_keeps(sizes, prefix_len, max_chars, front):
    snippets = [Snippet(path="p" * b, text="t" * a) for a, b in sizes]
    prefix, suffix = "x" * prefix_len, "y" * (prefix_len // 3)
    p, s, kept = within_budget(prefix, suffix, snippets, max_chars, drop_from_front=front)
    assert kept == _cut_one_at_a_time(prefix, suffix, snippets, max_chars, front)
    assert len(p) + len(s) + sum(len(x.text) + len(x.path) for x in kept) <= max_chars
    assert prefix.endswith(p) and suffix.startswith(s)
