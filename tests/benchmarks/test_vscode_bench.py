"""`quickcode bench vscode`'s figures from its session rows (quickcode/benchmarks/vscode_typing.py `write`):
pure, on hand-made rows — the sessions themselves need a real VS Code and a backend (`quickcode bench
vscode`)."""
from __future__ import annotations

import argparse

from quickcode.benchmarks.report import Report
from quickcode.benchmarks.vscode_typing import write


def _row(session, chars, ghosts, indents=0, as_typed=True):
    return {"session": session, "file": f"f{session}.py", "chars": 100, "accepted_chars": chars,
            "pause_to_ghost_ms": ghosts, "keystrokes": 100 - chars, "backend_requests": 10,
            "pauses": len(ghosts) + 1, "ghost_at_pause": len(ghosts), "tab_wrong": 0, "tab_nothing": 0,
            "tab_indents": indents, "typed_as_is": as_typed}


def test_the_headline_totals_the_sessions(tmp_path):
    rows = [_row(0, 30, [50.0, 70.0], indents=2), _row(1, 10, [90.0], as_typed=False)]
    args = argparse.Namespace(chars=100, seed=0, speed=1.0)
    head = write(Report("vscode", "t", out=tmp_path), rows, [], args)
    assert head["accepted_chars"] == 40 and head["accepted_per_100"] == 20.0
    assert head["backend_requests"] == 20 and head["tab_indents"] == 2 and head["typed_as_is"] == 1
    assert head["pause_to_ghost_p50_ms"] == 70.0
    text = (tmp_path / "vscode.md").read_text()
    assert "NOT as typed" in text and "Tabs that indented first" in text
