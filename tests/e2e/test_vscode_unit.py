"""The VS Code extension's own unit tests (editors/vscode/test/*.test.mjs: node:test over src/logic.ts, bundled by
esbuild) run in the suite, through the extension's `npm test` (node_modules from scripts/setup.sh editors)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.e2e.editor_helpers import REPO

pytestmark = [pytest.mark.editor]

EXT = REPO / "editors" / "vscode"


def test_the_extension_unit_tests_pass():
    assert shutil.which("npm"), "npm is not installed: scripts/setup.sh editors installs it"
    assert (EXT / "node_modules" / "esbuild").is_dir(), "run scripts/setup.sh editors (npm ci in editors/vscode)"
    r = subprocess.run(["npm", "test", "--silent"], cwd=EXT, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    counts = {k: int(v) for k, v in re.findall(r"^# (tests|pass|fail|skipped|cancelled|todo) (\d+)$", r.stdout, re.M)}
    files = sorted(p.name for p in (EXT / "test").glob("*.test.mjs"))
    print(f"\nVS Code extension unit tests ({', '.join(files)}): {counts}")
    assert counts.get("tests", 0) > 0 and counts["pass"] == counts["tests"], out[-4000:]
    assert counts.get("fail", 0) == counts.get("skipped", 0) == counts.get("cancelled", 0) == 0, out[-4000:]
