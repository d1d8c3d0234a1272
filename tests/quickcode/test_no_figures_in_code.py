"""Measurements live in docs/decisions.md and the reports, not in code (issue 47): no code comment or docstring
of the product's packages, and no comment of a shipped config, holds a bootstrap interval (`[1.09, 1.19]`), a
measured multiple (`1.13x`), a report path or a date; and every `docs/decisions.md#entry` pointer the code
keeps names an entry that exists."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# "quickcode": its own modules (cli, demo), not the benchmarks beneath it
PACKAGES = ("quickcode/backend", "quickcode/lsp_client", "quickcode/protocol", "quickcode/draft_model", "quickcode")
DECISIONS = REPO / "docs" / "decisions.md"

_NUM = r"[-+−]?\d[\d,]*(?:\.\d+)?\s*%?"
FIGURES = {
    "a bootstrap interval": re.compile(rf"\[\s*{_NUM}\s*,\s*{_NUM}\s*\]"),
    "a measured multiple": re.compile(r"\b\d+\.\d+\s?[x×](?!\w)"),
    "a report path": re.compile(r"benchmarks/reports"),
    "a date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
}
POINTER = re.compile(r"docs/decisions\.md#([\w-]+)")


def _python_texts(path: Path):
    """(line, text) of every comment and docstring line of one module."""
    src = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                for i, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + i, line


def _toml_comments(path: Path):
    """(line, text) of every comment of a TOML file (what follows a `#` outside a string)."""
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', '""', line)
        if "#" in code:
            yield n, code[code.index("#"):]


def _texts():
    for package in PACKAGES:
        for path in sorted((REPO / package).glob("*.py" if package == "quickcode" else "**/*.py")):
            for n, text in _python_texts(path):
                yield path.relative_to(REPO), n, text
    for path in sorted((REPO / "configs").glob("*.toml")):
        for n, text in _toml_comments(path):
            yield path.relative_to(REPO), n, text


def figures_in(text: str) -> list[str]:
    return [kind for kind, pattern in FIGURES.items() if pattern.search(text)]


@pytest.mark.parametrize("text, kinds", [
    ("# bench typing: accepted characters 1.13x [1.09, 1.19] without it", ["a bootstrap interval",
                                                                         "a measured multiple"]),
    ("# p95 −206 ms [−217, −202]", ["a bootstrap interval"]),
    ("# 82.1 % [79.3 %, 84.3 %] fewer requests", ["a bootstrap interval"]),
    ("# INT8 runs at 0.81× of bf16", ["a measured multiple"]),
    ("# (benchmarks/reports/typing-cost2/)", ["a report path"]),
    ("# measured on 2026-11-28", ["a date"]),
    ("# why: the first token is the wait (docs/decisions.md#spec-off)", []),
    ("# windows move in steps of this many lines", []),
    ("# every client input is hostile: lists[0] and x[i, j] stay code", []),
])
def test_the_patterns_find_figures_and_leave_plain_reasons(text, kinds):
    assert figures_in(text) == kinds


def test_no_code_comment_or_docstring_holds_a_figure():
    found = [f"{path}:{n}: {', '.join(kinds)}: {text.strip()[:100]}"
             for path, n, text in _texts() if (kinds := figures_in(text))]
    assert not found, ("figures belong in docs/decisions.md (or a report), the code keeps one line of why and "
                       "a pointer `docs/decisions.md#entry`:\n" + "\n".join(found))


def test_every_pointer_names_a_decision_entry():
    entries = set(re.findall(r"^### ([\w-]+)\s*$", DECISIONS.read_text(encoding="utf-8"), re.M))
    missing = [f"{path}:{n}: #{name}" for path, n, text in _texts()
               for name in POINTER.findall(text) if name not in entries]
    assert entries and not missing, "pointers to no entry of docs/decisions.md:\n" + "\n".join(missing)
