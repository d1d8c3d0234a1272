"""The typing benchmark's developer in a real editor (`quickcode bench neovim`, `quickcode bench vscode`).

The developer is quickcode/benchmarks/editor_sim.py's TypingModel (the same gaps, typos and acceptance coin at
the same position of the same segment, seed by seed), Tab-only: while waiting before the next key they read
the ghost text the editor shows and press Tab when all of it is what they are about to type. The editor is an
adapter (`Editor`); what a Tab wrote is the adapter's to check. Every session ends with the editor's text
compared with the segment (typed as is).
"""
from __future__ import annotations

import contextlib
import gzip
import json
import random
import time
from pathlib import Path
from typing import Protocol

from quickcode.benchmarks.accept_rule import accepted_len
from quickcode.benchmarks.editor_sim import TypingModel
from quickcode.benchmarks.typing_figures import PAUSE_MS      # a gap longer than this is a pause

POLL_S = 0.01             # how often the developer looks at the screen


class Editor(Protocol):
    def start(self, before: str) -> None:
        """`before` in the buffer, the cursor at its end, in insert mode."""

    def key(self, text: str) -> None:
        """One key: a character, or Enter followed by the next line's indentation (`\\n` + blanks; the
        editor's own auto-indent is off, so the developer types it, as one key)."""

    def backspace(self) -> None: ...

    def ghost(self) -> str | None:
        """The ghost text shown (lines joined by `\\n`), None when there is none."""

    def tab(self, expected_before: str, ghost: str, res: dict) -> str:
        """Press Tab on `ghost`: the characters it wrote ("" if none; what went wrong counted in `res`)."""


def type_segment(editor: Editor, before: str, target: str, seed: int, model: TypingModel,
                 progress=None) -> dict:
    """Type `target` after `before` in `editor`, Tab-only; the session's figures."""
    editor.start(before)
    at, last_key = 0, time.monotonic()
    res = {"accepted_chars": 0, "accepts": [], "tab_wrong": 0, "tab_nothing": 0, "keystrokes": 0,
           "pause_to_ghost_ms": [], "pauses": 0, "ghost_at_pause": 0, "pause_detail": []}
    after_accept = False
    while at < len(target):
        rng = random.Random(f"{seed}:{at}")
        line_start = at == 0 or target[:at].rstrip(" \t").endswith("\n")
        gap_ms = model.gap_ms(rng, "\n" if line_start else target[at - 1])
        is_pause = gap_ms > PAUSE_MS
        res["pauses"] += is_pause
        seen, considered, took = None, None, ""
        key_wall = time.time() - (time.monotonic() - last_key)     # the last key, on the logs' clock
        while (left_s := last_key + gap_ms / 1000 - time.monotonic()) > 0:
            ghost = editor.ghost()
            if ghost and seen is None:
                seen = round((time.monotonic() - last_key) * 1000, 1)
                if is_pause:
                    res["pause_to_ghost_ms"].append(seen)
                    res["ghost_at_pause"] += 1
            if ghost and ghost != considered:
                considered = ghost
                if accepted_len(ghost, target[at:], "whole") and rng.random() < model.accept_prob:
                    time.sleep(model.react_ms / model.speed / 1000)
                    ghost = editor.ghost()
                    if ghost and accepted_len(ghost, target[at:], "whole"):
                        took = editor.tab(before + target[:at], ghost, res)
                        break
            time.sleep(min(POLL_S, max(0.0, left_s)))
        if is_pause:    # where each pause was, for the waterfall lines of the language server's log
            res["pause_detail"].append({"at": at, "ghost_ms": seen, "after_accept": after_accept,
                                        "key_wall": round(key_wall, 3), "before": target[max(0, at - 24):at]})
        after_accept = bool(took)
        if took:
            res["accepts"].append({"at": at, "text": took})
            res["accepted_chars"] += len(took)
            at += len(took)
            last_key = time.monotonic()
            continue
        ch = target[at]
        if rng.random() < model.typo_rate and ch.isalpha():
            editor.key(chr(ord("a") + rng.randrange(26)))
            time.sleep(model.gap_ms(rng, "x") / 1000)
            editor.backspace()
            res["keystrokes"] += 2
            time.sleep(model.gap_ms(rng, "x") / 1000)
        if ch == "\n":            # Enter with the next line's indentation (auto-indent off: typed as one key)
            nxt = target[at + 1:]
            ch += nxt[: len(nxt) - len(nxt.lstrip(" \t"))]
        editor.key(ch)
        res["keystrokes"] += 1
        at += len(ch)
        last_key = time.monotonic()
        if progress:
            progress(at, len(target))
    return res


@contextlib.contextmanager
def serving(url: str | None, log_path: Path):
    """The WebSocket URL of the backend to type against: `url` (a running one), else one started for the run
    (the embedded default, its log at `log_path`) and stopped after it."""
    if url is not None:
        yield url
        return
    from quickcode.backend.launch import start_backend, stop_backend

    backend = start_backend(log_path)
    try:
        yield backend.ws_url
    finally:
        stop_backend(backend)


def write_rows(path: Path, rows: list[dict]) -> None:
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
