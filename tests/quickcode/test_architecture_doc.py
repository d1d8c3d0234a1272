"""docs/architecture.md stays the map of the code (issue 47): its section on each flow names every module of the
package that runs it, so a module added to `quickcode/lsp_client/` or `quickcode/backend/` without a place in the
map fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
MAX_LINES = 150
MAX_COLUMNS = 120


def section(package: str) -> str:
    """The text of the `## ` section whose heading names `package/`."""
    parts = re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)
    found = [p for p in parts[1:] if f"`{package}/`" in p.splitlines()[0]]
    assert len(found) == 1, f"docs/architecture.md has {len(found)} sections headed with `{package}/`"
    return found[0]


@pytest.mark.parametrize("package", ["quickcode/lsp_client", "quickcode/backend"])
def test_the_flow_of_each_package_names_every_module_it_has(package):
    named = set(re.findall(r"\b(\w+)\.py\b", section(package)))
    modules = {str(p.relative_to(REPO / package).with_suffix("")).replace("/", ".")
               for p in (REPO / package).rglob("*.py") if p.name != "__init__.py"}
    assert modules - named == set(), f"modules of {package}/ that docs/architecture.md does not place"


def test_the_document_is_short_and_readable_at_120_columns():
    lines = DOC.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES
    assert [n for n, line in enumerate(lines, 1) if len(line) > MAX_COLUMNS] == []


def test_every_test_file_it_names_exists():
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", DOC.read_text(encoding="utf-8")))
    assert named and {p for p in named if not (REPO / p).is_file()} == set()
