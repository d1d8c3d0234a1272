"""The README stays one a newcomer reads (issue 47): at most 100 lines of at most 120 columns, the two commands CI and
new users run first, a real picture of ghost text, a three-step quickstart."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_LINES = 100
MAX_COLUMNS = 120
MAX_IMAGE_BYTES = 300_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def lines() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


def test_the_readme_is_short_and_readable_at_120_columns():
    assert len(lines()) <= MAX_LINES
    assert [n for n, line in enumerate(lines(), 1) if len(line) > MAX_COLUMNS] == []


def test_the_two_commands_come_first_and_the_makefile_has_them():
    text = [line for line in lines()[1:] if line.strip()]          # after the title
    assert text[0].startswith("```"), "the README opens with the commands' code block"
    end = text.index("```", 1)
    commands = [line.split("#")[0].strip() for line in text[1:end]]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_the_screenshot_is_a_committed_png_under_300_kb():
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", README.read_text(encoding="utf-8"))
    shots = [REPO / p for p in images if p.startswith("docs/images/") and p.endswith(".png")]
    assert shots, "no screenshot from docs/images/ in the README"
    for shot in shots:
        data = shot.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) <= MAX_IMAGE_BYTES, (shot, len(data))


def test_the_quickstart_has_three_steps():
    text = README.read_text(encoding="utf-8")
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^(\d)\. ", quickstart, re.M) == ["1", "2", "3"]
