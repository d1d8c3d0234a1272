"""Each package's opening docstring is the map of its tree (issue 18): it names every module the package has, so
a newcomer who reads `quickcode/backend/__init__.py` knows every file in `ls quickcode/backend`."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["quickcode/backend", "quickcode/lsp_client"])
def test_the_package_docstring_names_every_module(package):
    doc = (REPO / package / "__init__.py").read_text()
    assert doc.startswith('"""'), f"{package}/__init__.py opens with no docstring"
    named = set(re.findall(r"\b(\w+)\.py\b", doc))
    modules = {p.stem for p in (REPO / package).glob("*.py") if p.stem != "__init__"}
    assert modules - named == set(), f"modules {package}/__init__.py does not describe"


def test_the_readme_parts_table_names_every_package():
    table = [line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `")]
    parts = {m.group(1) for line in table if (m := re.match(r"\| `quickcode/(\w+)/`", line))}
    packages = {p.parent.name for p in (REPO / "quickcode").glob("*/__init__.py")}
    assert packages - parts == set()
