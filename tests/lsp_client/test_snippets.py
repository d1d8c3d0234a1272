"""Neighbouring-file snippets (quickcode/lsp_client/snippets.py): the most recently touched files are kept,
the least recent evicted first, and windows of the other same-language files come back most similar first."""
from __future__ import annotations

from quickcode.lsp_client.snippets import NeighbourFiles

PARSER = "def parse_header(stream):\n    header = stream.read_header()\n    return header\n"
WRITER = "def write_record(stream, record):\n    stream.write_record(record)\n"


def test_the_least_recently_touched_file_is_evicted_first():
    n = NeighbourFiles(max_files=2)
    n.touch("a", "a.py", "python", PARSER)
    n.touch("b", "b.py", "python", WRITER)
    n.touch("a", "a.py", "python", PARSER)          # touched again: the most recent
    n.touch("c", "c.py", "python", "x = 1\n")
    assert set(n.docs.keys()) == {"a", "c"}
    n.forget("a")
    assert list(n.docs.keys()) == ["c"]


def test_no_files_kept_when_none_are_allowed():
    n = NeighbourFiles(max_files=0)
    n.touch("a", "a.py", "python", PARSER)
    assert len(n.docs) == 0 and n.best("b", "python", "parse_header stream", 2) == []


def test_windows_of_other_same_language_files_most_similar_first():
    n = NeighbourFiles(max_files=4)
    n.touch("p", "p.py", "python", PARSER)
    n.touch("w", "w.py", "python", WRITER)
    n.touch("j", "j.js", "javascript", PARSER)
    n.touch("me", "me.py", "python", PARSER)
    assert n.best("me", "python", "header = stream.read_header()", 2) == [("p.py", PARSER.rstrip("\n")),
                                                                          ("w.py", WRITER.rstrip("\n"))]
