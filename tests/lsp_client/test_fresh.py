"""Never stale (fresh.py): an answer computed for the document as it was asked is given for the document as it
is when sent — the rest of it at the cursor the user typed on to, or nothing."""
from hypothesis import given, strategies as st

from quickcode.lsp_client.documents import Suggestion
from quickcode.lsp_client.fresh import moved_cursor, rebase, settled

DOC = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
AT = DOC.index("return ") + len("return ")


def typed(text: str, cursor: int, s: str) -> str:
    return text[:cursor] + s + text[cursor:]


def test_unchanged_the_answer_stands():
    assert rebase(DOC, AT, "a + b", DOC) == ("a + b", AT)


def test_typed_into_it_its_rest_goes_at_the_new_cursor():
    assert rebase(DOC, AT, "a + b", typed(DOC, AT, "a +")) == (" b", AT + 3)


def test_typed_something_else_or_to_its_end_nothing():
    assert rebase(DOC, AT, "a + b", typed(DOC, AT, "b")) is None
    assert rebase(DOC, AT, "a + b", typed(DOC, AT, "a + b")) is None


def test_deleted_or_edited_elsewhere_nothing():
    assert rebase(DOC, AT, "a + b", DOC[:AT - 1] + DOC[AT:]) is None               # backspace
    assert rebase(DOC, AT, "a + b", DOC.replace("add(1, 2)", "add(1, 3)")) is None  # same length elsewhere
    assert rebase(DOC, AT, "a + b", "# x\n" + DOC) is None                          # inserted before the cursor
    assert moved_cursor(DOC, AT, DOC + "more") is None                             # typed after it, elsewhere


@given(st.text(max_size=40), st.integers(0, 40), st.text(min_size=1, max_size=10), st.text(max_size=10))
def test_whatever_is_answered_applies_at_the_cursor(before, cut, suggestion, inserted):
    cursor = min(cut, len(before))
    now = typed(before, cursor, inserted)
    got = rebase(before, cursor, suggestion, now)
    if got is not None:
        rest, at = got
        assert now[:at] == before[:cursor] + inserted and now[at:] == before[cursor:]    # the cursor after the typing
        assert inserted + rest == suggestion and rest                                    # its rest, nothing else
    else:
        assert not suggestion.startswith(inserted) or inserted == suggestion or (
            moved_cursor(before, cursor, now) not in (cursor + len(inserted),))


def test_a_suggestion_is_settled_onto_the_document_as_it_is_sent():
    s = Suggestion("a + b", "r1", "network", 1.0, AT, DOC)
    assert settled(s, DOC) is s                                                    # the same text: itself
    now = typed(DOC, AT, "a +")
    assert settled(s, now) == Suggestion(" b", "r1", "network", 1.0, AT + 3, now)  # its rest, further on
    assert settled(s, typed(DOC, AT, "b")) is None                                 # typed away from it
