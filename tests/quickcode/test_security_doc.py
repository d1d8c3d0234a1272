"""docs/security.md stays true: every test its threats name exists, and every defence file they name too."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def threats() -> dict[int, str]:
    """Each `### N. title` section of the threat list: its number → its text (title, defence, test)."""
    doc = (REPO / "docs" / "security.md").read_text()
    parts = re.split(r"^### (\d+)\. ", doc, flags=re.M)
    return {int(n): text.split("\n## ")[0] for n, text in zip(parts[1::2], parts[2::2])}


def test_every_test_and_file_the_threats_name_exists():
    found = threats()
    assert len(found) >= 20 and sorted(found) == list(range(1, len(found) + 1))
    named = 0
    for n, text in found.items():
        assert "**Defence.**" in text and "**Test.**" in text, n
        files = re.findall(r"`(tests/[\w/]+\.py)", text)
        for path, names in re.findall(r"`(tests/[\w/]+\.py)((?:::\w+)?)`", text):
            source = (REPO / path).read_text()
            if names:
                assert f"def {names[2:]}(" in source, (n, path, names)
            named += 1
        for name in re.findall(r"`::(\w+)`", text):     # `tests/x.py::a`, `::b` — b in a file the threat names
            assert any(f"def {name}(" in (REPO / p).read_text() for p in files), (n, name)
        for path in re.findall(r"`((?:backend|protocol|lsp_client|editors)/[\w/.-]+\.(?:py|ts|mjs|json))", text):
            assert (REPO / path).exists(), (n, path)
    assert named >= 20
    assert (REPO / "editors/vscode/test/logic.test.mjs").read_text().count("workspace-level endpoints") == 1


def test_the_page_reads_at_120_columns():
    lines = (REPO / "docs" / "security.md").read_text().splitlines()
    assert [n for n, line in enumerate(lines, 1) if len(line) > 120] == []
