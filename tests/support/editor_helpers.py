"""Shared bits of the real-editor tests: paths, timing, the quickcode server command, failure context."""
from __future__ import annotations

import json
import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
QUICKCODE = str(pathlib.Path(sys.executable).parent / "quickcode")

# Typed contexts where even the tiny embedded model reliably says something: (text before the cursor, keys
# typed after it like a user). The tests try them in order until ghost text appears.
CONTEXTS = [
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ", "self"),
    ("import os\nimport sys\n\n\ndef main(argv):\n    ", "if"),
    ("import os\n\n\ndef add(a, b):\n    return ", "a"),
    ("import ", "o"),
]


class Timer:
    """Named laps in ms since creation; printed by the tests (pytest -s shows them, -rA in the report)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> float:
        self.laps[name] = round((time.perf_counter() - self.t0) * 1000, 1)
        return self.laps[name]

    def report(self, title: str) -> str:
        line = f"[timing] {title}: " + json.dumps(self.laps)
        print(line)
        return line


def tail(path: os.PathLike | str, n: int = 40) -> str:
    p = pathlib.Path(path)
    if not p.exists():
        return f"({p} does not exist)"
    return "\n".join(p.read_text(errors="replace").splitlines()[-n:])


def failure_context(lsp_log: os.PathLike | str, backend=None, extra: dict | None = None) -> str:
    parts = [f"--- LSP log tail ({lsp_log}):", tail(lsp_log)]
    if backend is not None:
        parts += [f"--- backend log tail ({backend.log_path}):", backend.log_tail(40)]
    for name, path in (extra or {}).items():
        parts += [f"--- {name} ({path}):", tail(path)]
    return "\n".join(parts)
