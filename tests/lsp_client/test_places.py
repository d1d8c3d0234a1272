"""The one classifier of the place before the cursor, and the groupings its three users read from it."""
from quickcode.lsp_client.places import CHAR_CLASSES, Place, place_of

CASES = {   # line prefix → (debounce kind, pause point, predictor class)
    "": ("line", True, "none"), "    ": ("line", True, "none"),
    "foo(": ("open", True, "open"), "xs[": ("open", True, "open"), "d = {": ("open", True, "open"),
    "f(x)": ("close", False, "close"), "self.": ("dot", True, "dot"), "if x:": ("sep", True, "colon"),
    "a,": ("sep", True, "comma"), "x =": ("sep", True, "operator"), "x :=": ("sep", True, "operator"),
    "def f() ->": ("other", True, "operator"), "x =>": ("other", True, "operator"),
    "return ": ("space", True, "space"), "x = ": ("space", False, "space"), "a, ": ("space", False, "space"),
    "name": ("word", False, "alpha"), "_": ("word", False, "alpha"), "x1": ("word", False, "digit"),
    "a +": ("other", False, "operator"), "s = '": ("other", False, "quote"), "é": ("word", False, "alpha"),
}


def test_every_place_and_what_each_user_reads_from_it():
    got = {lp: (place_of(lp).kind, place_of(lp).pause, place_of(lp).char_class) for lp in CASES}
    assert got == CASES


def test_the_groupings_are_closed_sets():
    assert {p.char_class for p in Place} <= set(CHAR_CLASSES)
    assert {p.kind for p in Place} == {"line", "open", "close", "dot", "sep", "space", "word", "other"}
