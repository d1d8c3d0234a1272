"""In-flight reuse: which running request a new position can be served from."""
from quickcode.lsp_client.inflight import End, Fit, Flight, Inflight, still_fits


def flight(prefix="x = ", streamed="", finished=False, head="\n"):
    return Flight("r1", "file:///a.py", prefix, head, streamed=streamed, end=End.DONE if finished else None)


def test_typing_what_is_being_generated_reuses_the_request():
    f = flight(streamed="foo(1)")
    assert f.fit("x = fo", "\n") is Fit.REUSABLE
    assert f.fit("x = foo(1)", "\n") is Fit.REUSABLE


def test_typing_ahead_of_the_stream_waits_for_it():
    f = flight(streamed="fo")
    assert f.fit("x = foo(", "\n") is Fit.PENDING
    assert flight(streamed="fo", finished=True).fit("x = foo(", "\n") is Fit.STALE


def test_typing_something_else_or_moving_away_is_stale():
    f = flight(streamed="foo(1)")
    assert f.fit("x = fa", "\n") is Fit.STALE
    assert f.fit("y = ", "\n") is Fit.STALE
    assert f.fit("x = ", ")\n") is Fit.STALE       # the text after the cursor changed
    assert f.fit("x", "\n") is Fit.STALE            # deleted back past where it was asked


def test_same_position_before_any_text_waits():
    assert flight().fit("x = ", "\n") is Fit.PENDING


def test_at_most_n_per_document_the_oldest_give_way():
    inf = Inflight(max_per_doc=2)
    a, b, c = (Flight(r, "u", "p", "") for r in "abc")
    assert inf.add(a) == [] and inf.add(b) == []
    assert inf.add(c) == [a]
    assert [f.rid for f in inf.for_uri("u")] == ["b", "c"]


def test_best_prefers_the_newest_fitting_flight_and_lists_the_stale():
    inf = Inflight(max_per_doc=3)
    old = Flight("old", "u", "x = ", "", streamed="bar")
    new = Flight("new", "u", "x = f", "", streamed="oo")
    inf.add(old)
    inf.add(new)
    chosen, stale = inf.best("u", "x = fo", "")
    assert chosen is new and stale == [old]


# ── still_fits: is a running request still useful after an edit (the cursor is not known at edit time)?


def _flight(prefix: str, head: str, streamed: str, finished: bool = False) -> Flight:
    return Flight("r1", "file:///t.py", prefix, head, streamed=streamed, end=End.DONE if finished else None)


def test_at_the_end_of_the_document_typing_something_else_is_not_a_fit():
    f = _flight("def f(", "", "a, b):")
    assert still_fits(f, "def f(a")                  # typed what was generated
    assert still_fits(f, "def f(a, b):")
    assert not still_fits(f, "def f(x")              # typed something else: cancel now, not at the next request


def test_typing_past_what_arrived_so_far_fits_until_it_contradicts_it():
    f = _flight("x = ", "", "fo")
    assert still_fits(f, "x = foo")                  # more may still arrive
    assert not still_fits(_flight("x = ", "", "fo", finished=True), "x = foo")


def test_the_text_after_the_cursor_must_stay_the_same():
    f = _flight("call(", ")\nnext()", "a, b")
    assert still_fits(f, "call(a)\nnext()")
    assert not still_fits(f, "call(a)\nother()")     # the line after changed
    assert not still_fits(f, "call(a))\nnext()")     # the cursor line's rest changed


def test_a_head_the_window_cut_inside_a_long_line_fits_while_the_text_after_the_cursor_stays():
    line = "".join(f"v{i}={i};" for i in range(1000))
    f = Flight("r1", "file:///t.js", line[:400], line[400:1200], streamed="x", head_cut=True)
    assert still_fits(f, line[:400] + "x" + line[400:])
    assert not still_fits(f, line[:400] + "x" + line[401:])
    assert not still_fits(Flight("r1", "file:///t.js", line[:400], line[400:1200], streamed="x"), line[:400] + line[400:])
