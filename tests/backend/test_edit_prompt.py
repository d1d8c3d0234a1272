"""The next-edit prompt (quickcode/backend/edit_prompt.py) on the committed target's tokenizer: Zeta's layout
(edits, then the excerpt with its region and cursor marked), a head that stays the same while the user types,
the budget kept; and the rewritten region → the smallest replacement."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from tokenizers import Tokenizer

from quickcode.backend.edit_prompt import (CURSOR, REGION_END, REGION_START, RegionAnswer, edit_prompt,
                                           event_text, replacement)
from quickcode.protocol import Edit, ProtocolError

REPO = Path(__file__).resolve().parents[2]
HUNK = "@@ -1,1 +1,1 @@\n-def add(a, b):\n+def add(x, b):\n"


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(str(REPO / "models" / "target" / "tokenizer.json"))


def edit(**fields) -> Edit:
    base = {"id": "e", "region": "def add(x, b):\n    return a + b\n", "cursor_chars": 9,
            "before": "import os\n\n", "after": "\n\nprint(add(1, 2))\n", "events": [HUNK], "path": "m.py"}
    return Edit(**{**base, **fields})


def test_the_prompt_shows_the_edits_then_the_excerpt_with_region_and_cursor_marked(tok):
    text = tok.decode(edit_prompt(edit(), tok, None, 4000))
    edits, excerpt = text.index("User edited \"m.py\""), text.index("import os")
    assert edits < excerpt < text.index(REGION_START) < text.index("def add(x" + CURSOR[:2])
    assert text.index(CURSOR) < text.index(REGION_END) < text.index("print(add(1, 2))")
    assert text.endswith(REGION_START + "\n") and "-def add(a, b):" in text


def test_the_head_of_the_prompt_stays_the_same_while_the_user_types(tok):
    """Typing changes the region (and the newest edit): the instruction and the older edits keep their ids."""
    older = "@@ -5,1 +5,1 @@\n-x = 1\n+x = 2\n"
    a = edit_prompt(edit(events=[older, HUNK]), tok, None, 4000)
    b = edit_prompt(edit(events=[older, HUNK.replace("x, b", "xy, b")], region="def add(xy, b):\n",
                         cursor_chars=10), tok, None, 4000)
    head = len(tok.encode(event_text("m.py", older), add_special_tokens=False).ids)
    shared = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    assert shared > head and tok.decode(a[:shared]).count("User edited") == 2


def test_over_the_budget_the_oldest_edits_and_the_far_text_go_first_and_the_region_never(tok):
    events = [f"@@ -{i},1 +{i},1 @@\n-v{i} = 0\n+v{i} = 1\n" for i in range(1, 40)]
    ids = edit_prompt(edit(events=events, before="a = 1\n" * 300, after="b = 2\n" * 300), tok, None, 300)
    text = tok.decode(ids)
    assert len(ids) <= 300 and "def add(x" in text and REGION_END in text
    assert "v39 = 1" in text and "v1 = 1" not in text
    with pytest.raises(ProtocolError) as e:
        edit_prompt(edit(region="x = 1\n" * 200, cursor_chars=0), tok, None, 100)
    assert e.value.code == "prompt_too_long"


def test_the_answer_is_read_to_its_end_marker_without_the_cursor_marker():
    a = RegionAnswer()
    assert not a.feed("def add(x, b):\n    return x")
    assert a.region("old") is None                         # not closed: no answer
    assert a.feed(CURSOR + " + b\n" + REGION_END[:5]) is False
    assert a.feed(REGION_END[5:] + "\ntrailing") is True
    assert a.region("def add(x, b):\n    return a + b\n") == "def add(x, b):\n    return x + b\n"


def test_a_region_without_a_final_newline_and_a_crlf_region_keep_their_line_ends():
    a = RegionAnswer()
    a.feed("x = 2\n" + REGION_END)
    assert a.region("x = 1") == "x = 2"
    b = RegionAnswer()
    b.feed("x = 2\ny = 3\n" + REGION_END)
    assert b.region("x = 1\r\ny = 3\r\n") == "x = 2\r\ny = 3\r\n"


def test_the_replacement_is_the_changed_middle_only():
    assert replacement("    return a + b\n", "    return a * b\n") == (13, 14, "*")
    assert replacement("abc", "abc") is None
    assert replacement("aaa", "aaaa") == (3, 3, "a")       # the head is taken first, then the tail of the rest
    assert replacement("f(a, b)", "f(a)") == (3, 6, "")


@given(st.text("ab\n", max_size=30), st.text("ab\n", max_size=30))
def test_applying_the_replacement_gives_the_new_region(old, new):
    r = replacement(old, new)
    if r is None:
        assert old == new
    else:
        start, end, text = r
        assert old[:start] + text + old[end:] == new and 0 <= start <= end <= len(old)


OLD_REGION = ("def area(width, height):\n    total = width * height\n    print('computing the area')\n"
              "    return total\n")


def test_the_answer_settles_once_it_copies_a_whole_old_line_after_its_change():
    a = RegionAnswer(OLD_REGION)
    assert not a.feed("def area(width, height):\n")            # copying: nothing changed yet
    assert not a.feed("    product = width * height\n")        # the changed line itself
    assert a.feed("    print('computing the area')\n")         # a whole old line again, once in what follows
    assert a.region(OLD_REGION) == OLD_REGION.replace("total = width", "product = width")
    assert replacement(OLD_REGION, a.region(OLD_REGION)) == (29, 34, "product")


def test_a_short_or_repeated_line_does_not_settle_the_answer():
    old = "x = f(a)\n\n    pass\n\n    pass\ny = 1\n"
    a = RegionAnswer(old)
    a.feed("x = f(a, b)\n")
    assert not a.feed("\n")                                    # blank: no proof
    assert not a.feed("    pass\n")                            # twice in the old region: which one?
    assert not a.feed("\n    pass\n")
    assert a.feed("y = 1\n" + REGION_END)                      # the end marker still ends it
    assert a.region(old) == "x = f(a, b)\n\n    pass\n\n    pass\ny = 1\n"
    b = RegionAnswer()                                          # no old region given: never settles
    b.feed(OLD_REGION.replace("total = width", "product = width"))
    assert not b.closed
