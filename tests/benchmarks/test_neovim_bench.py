"""`quickcode bench neovim`'s figures from its session rows (quickcode/benchmarks/neovim_typing.py `_write`):
pure, on hand-made rows — the sessions themselves need a real Neovim and a backend (`quickcode bench
neovim`)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from quickcode.benchmarks.neovim_typing import _write
from quickcode.benchmarks.report import Report


def _row(session, arm, chars, ghosts, wrong=0, as_typed=True):
    return {"session": session, "arm": arm, "accepted_chars": chars, "pause_to_ghost_ms": ghosts,
            "keystrokes": 100 - chars, "backend_requests": 10, "pauses": len(ghosts) + 1,
            "ghost_at_pause": len(ghosts), "tab_wrong": wrong, "tab_nothing": 0, "typed_as_is": as_typed}


def test_the_headline_pairs_the_arms_segment_by_segment(tmp_path, capsys):
    segs = [(Path("a.py"), "", "x" * 100), (Path("b.py"), "", "y" * 100)]
    rows = [_row(0, "pause", 10, [200.0, 210.0]), _row(0, "keystroke", 30, [3.0, 5.0]),
            _row(1, "pause", 20, [220.0]), _row(1, "keystroke", 20, [4.0], wrong=1, as_typed=False)]
    args = argparse.Namespace(chars=100, seed=0, speed=1.0, plugin=None)
    head = _write(Report("neovim", "t", out=tmp_path), rows, ["pause", "keystroke"], segs, args)
    assert head["arms"]["pause"]["accepted_chars"] == 30
    assert head["arms"]["keystroke"]["accepted_chars"] == 50
    assert head["arms"]["keystroke"]["tab_wrong"] == 1 and head["arms"]["keystroke"]["typed_as_is"] == 1
    ratio = head["keystroke_vs_pause"]
    assert ratio["accepted_ratio"] == round(50 / 30, 3)
    lo, hi = ratio["accepted_ratio_90"]
    assert 1.0 <= lo <= ratio["accepted_ratio"] <= hi <= 3.0       # the two segments: 3.0x and 1.0x
    assert ratio["pause_to_ghost_p95_diff_ms"] < 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == head   # the last line: the headline
    assert "NOT as typed" in (tmp_path / "neovim.md").read_text()
