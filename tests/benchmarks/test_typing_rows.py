"""`bench typing --rows x.jsonl.gz` keeps gzip (every reader opens a .gz name as gzip), appended a session at
a time as a hold goes, and read back by the next hold and by typing_arms / typing_cost."""
from __future__ import annotations

import gzip

from quickcode.benchmarks.rows import append_row, read_rows


def test_rows_named_gz_are_gzip_and_read_back_after_appends(tmp_path):
    path = tmp_path / "run" / "rows.jsonl.gz"
    append_row(path, {"session": 0, "arm": "ours"})
    append_row(path, {"session": 1, "arm": "ours", "text": "é\n"})      # a second hold appends a gzip member
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    with gzip.open(path, "rt") as f:                                     # what any gzip reader sees
        assert len(f.read().splitlines()) == 2
    assert read_rows(path) == [{"session": 0, "arm": "ours"}, {"session": 1, "arm": "ours", "text": "é\n"}]


def test_plain_rows_stay_plain(tmp_path):
    path = tmp_path / "rows.jsonl"
    append_row(path, {"session": 3})
    assert path.read_text() == '{"session": 3}\n' and read_rows(path) == [{"session": 3}]
