"""The settings reference is the settings model (issue 48, item 5): `quickcode serve --help` names every field of
`quickcode/backend/settings.py`'s `Settings` with its default, type and unit, docs/settings.md is generated from the same
model and fails here when the two drift, and each field carries a one-line description without measurements."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from quickcode.backend import settings_doc
from quickcode.backend.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "settings.md"
REGENERATE = "quickcode serve --settings-markdown > docs/settings.md"
# what a measurement looks like: a ratio (1.13x), an interval ([6.4, 8.7]), a share, a date, a report's path
FIGURES = re.compile(r"\d(\.\d+)?x\b|\[\s*-?\d[\d.]*\s*,|\d\s*%|\b20\d\d-\d\d|benchmarks/reports|\bp(50|95)\b")


@pytest.fixture(scope="module")
def serve_help() -> str:
    """`quickcode serve --help` as an operator runs it (no QUICKCODE_* of this environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUICKCODE_")}
    out = subprocess.run([sys.executable, "-m", "quickcode", "serve", "--help"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_serve_help_lists_every_field_of_the_settings_model_with_its_default(serve_help):
    entries = {m.group(1): m.group(2) for m in re.finditer(r"^    (\w+) = (.+?)  \(", serve_help, re.M)}
    assert set(entries) == set(Settings.model_fields), "fields missing from (or unknown to) serve --help"
    for d in settings_doc.settings_docs():
        assert entries[d.name] == d.default
        assert d.description.split()[0] in serve_help.split(f"    {d.name} = ", 1)[1]
    assert entries["port"] == "8765" and entries["precision"].startswith('"')
    assert re.search(r"^    ttft_budget_ms = [\d.]+  \(float, milliseconds\)$", serve_help, re.M)
    assert re.search(r"^    spec_method = \"\w+\"  \(draft \| ngram \| off\)$", serve_help, re.M)
    assert re.search(r"^    copy_max_n = 4  \(int ≥ 1, ≤ 16\)$", serve_help, re.M)


def test_docs_settings_md_is_what_the_model_generates():
    assert DOC.read_text() == settings_doc.markdown(), f"docs/settings.md is stale: run  {REGENERATE}"
    assert REGENERATE in DOC.read_text()


def test_the_doc_names_each_settings_environment_variable_type_and_default():
    doc = DOC.read_text()
    for d in settings_doc.settings_docs():
        entry = doc.split(f"- **`{d.name}`** (`QUICKCODE_{d.name.upper()}`): ", 1)
        assert len(entry) == 2, f"{d.name} has no entry"
        assert entry[1].replace("\n  ", " ").startswith(f"{d.kind}"), d.name
    assert all(len(line) <= 120 for line in doc.splitlines())
    assert "/work/" not in doc and str(Path.home()) not in doc   # no path of the machine it was made on


def test_a_changed_description_makes_the_doc_stale(monkeypatch):
    """The drift test can fail: a description edited in the code and not regenerated differs from the doc."""
    field = Settings.model_fields["port"]
    monkeypatch.setattr(field, "description", "a description the doc does not have")
    assert settings_doc.markdown() != DOC.read_text()
    assert "a description the doc does not have" in settings_doc.help_text()


def test_every_field_has_a_short_description_without_measurements_and_a_section():
    entries = set(re.findall(r"^### ([\w-]+)\s*$", (REPO / "docs" / "decisions.md").read_text(), re.M))
    for d in settings_doc.settings_docs():
        for entry in re.findall(r"docs/decisions\.md#([\w-]+)", d.description):
            assert entry in entries, f"{d.name} points to no entry docs/decisions.md#{entry}"
        assert d.description, f"{d.name} has no docstring (its description in --help and docs/settings.md)"
        assert len(d.description) <= 240, f"{d.name}: one line of what and why, not {len(d.description)} chars"
        assert not FIGURES.search(d.description), f"{d.name}: measurements go in docs/decisions, not here"
        assert d.section != "settings", f"{d.name} is under no `# ──` section comment"


def test_types_defaults_and_units_are_read_from_the_field():
    assert settings_doc.kind_of(Literal["bf16", "int8"], []) == "bf16 | int8"
    assert settings_doc.kind_of(bool, []) == "true | false"
    assert settings_doc.kind_of(Path | None, []) == "path or unset"
    assert settings_doc.kind_of(list[str], []) == "list of str"
    assert settings_doc.kind_of(float, Settings.model_fields["tokens_reload_s"].metadata) == "float ≥ 0.0"
    assert settings_doc.unit_of("rate_limit_per_s") == "per second" and settings_doc.unit_of("port") == ""
    assert settings_doc.unit_of("hello_timeout_s") == "seconds" and settings_doc.unit_of("kv_cache_gib") == "GiB"
    fields = Settings.model_fields
    assert settings_doc.default_of(fields["max_frame_bytes"]) == "1048576 (1 MiB)"
    assert settings_doc.default_of(fields["replica_id"]) == settings_doc.COMPUTED
    assert settings_doc.default_of(fields["ssl_certfile"]) == settings_doc.UNSET
    assert settings_doc.default_of(fields["draft_model"]) == '"models/draft"'
    assert settings_doc.default_of(fields["allowed_origins"]) == "[]"
