"""`quickcode bench typing`'s rows: one JSON line per typed session, gzip-compressed when the name ends in .gz
(appended as gzip members, which a reader takes as one stream), so a run kept with `--rows x.jsonl.gz` is read
back by every tool (`typing_arms`, `typing_cost`) and continued by the next hold."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


def _open(path: Path, mode: str):
    return gzip.open(path, mode + "t") if path.suffix == ".gz" else path.open(mode)


def read_rows(path: Path) -> list[dict]:
    with _open(path, "r") as f:
        return [json.loads(line) for line in f if line.strip()]


def append_row(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
