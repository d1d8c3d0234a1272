"""Per-user state files (learnt typing pauses, predictor weights): keystroke timings are personal, so each file
is created 0600 by open(2) itself (never world-readable, not even between a write and a chmod) in a 0700
directory, written whole to a temporary file and renamed over the old one."""
from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)            # an old temporary file keeps its old mode: start from none
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
