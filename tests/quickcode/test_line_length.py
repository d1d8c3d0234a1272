"""Lines of product code stay within pyproject's `[tool.ruff] line-length` (110): ruff is not in the venv and
selects no E501 by default, so nothing else holds them. The packages held so far: quickcode.backend,
quickcode.protocol and quickcode's own modules (lsp_client, draft_model and benchmarks still have longer lines;
add each here once it is wrapped)."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELD = ("quickcode/backend", "quickcode/protocol", "quickcode")   # "quickcode": its own modules only
MAX_CHARS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]


@pytest.mark.parametrize("package", HELD)
def test_no_line_is_longer_than_the_configured_length(package):
    long = [f"{path.relative_to(REPO)}:{n}: {len(line)} chars"
            for path in sorted((REPO / package).glob("*.py" if package == "quickcode" else "**/*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > MAX_CHARS]
    assert not long, f"lines over {MAX_CHARS} characters:\n" + "\n".join(long)
