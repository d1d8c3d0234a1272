"""Accepted by the edit itself: clients that run no item command (eglot's completion-at-point) still count.

An editor inserts `def add(a, b):\n║` + the shown `    return a + b` in one edit: accepted, once, with its
whole length, even when the client also runs `quickcode.accept` afterwards (VS Code, Neovim); a keystroke is
no accept.
"""
from __future__ import annotations

from quickcode.lsp_client.telemetry import Outcomes, Shown
from quickcode.protocol import TelemetryEvent

BEFORE = "def add(a, b):\n"
TEXT = "    return a + b"


def outcomes() -> tuple[Outcomes, list]:
    sent: list = []
    return Outcomes(send=sent.append, learn=lambda *a: None), sent


def show(o: Outcomes, text: str = TEXT, sid: str = "r1") -> None:
    o.on_shown(Shown(sid, "file:///add.py", BEFORE, text, "python", [], shown_s=0.0))


def test_an_edit_that_inserts_the_whole_suggestion_accepts_it_once():
    o, sent = outcomes()
    show(o)
    after = BEFORE + TEXT
    s = o.on_edit("file:///add.py", after, len(after), len(TEXT), now_s=1.0)
    assert s is not None and s.id == "r1"
    assert o.counts["accepted"] == 1 and o.accepted_chars == len(TEXT)
    assert sent[-1].event is TelemetryEvent.ACCEPTED and sent[-1].accepted_chars == len(TEXT)
    assert o.on_accepted("r1", 1.1, len(TEXT)) is None           # the command that follows: counted already
    assert o.counts["accepted"] == 1 and o.accepted_chars == len(TEXT)


def test_a_keystroke_or_another_edit_is_no_accept():
    o, _ = outcomes()
    show(o, text="x")
    assert o.on_edit("file:///add.py", BEFORE + "x", len(BEFORE) + 1, 1, now_s=1.0) is None   # typed by hand
    show(o, sid="r2")
    other = BEFORE + "    pass\n" + TEXT[:-1]
    assert o.on_edit("file:///add.py", other, len(other), 9, now_s=1.0) is None
    assert o.on_edit("file:///other.py", BEFORE + TEXT, len(BEFORE + TEXT), len(TEXT), now_s=1.0) is None
    assert o.counts["accepted"] == 0 and o.accepted_chars == 0 and "r2" in o.shown


def test_a_suggestion_shown_early_then_grown_is_accepted_with_its_grown_text():
    o, _ = outcomes()
    show(o, text="    return")             # the text final so far; the same request answers again when done
    show(o)
    after = BEFORE + TEXT
    assert o.on_edit("file:///add.py", after, len(after), len(TEXT), now_s=1.0) is not None
    assert o.accepted_chars == len(TEXT) and o.counts["shown"] == 1
