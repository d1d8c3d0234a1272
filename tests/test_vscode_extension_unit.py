"""The VS Code extension's own unit tests (editors/vscode/test/logic.test.mjs, `npm test`: node --test over
src/logic.ts) — among them that workspace-level endpoints/token/advanced are ignored, the token comes from
secret storage, and plain ws:// to another host is flagged. Needs the extension's node_modules (esbuild),
which `make setup-all` (scripts/setup_editors.sh) installs."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.editor]
EXT = REPO / "editors" / "vscode"


def test_extension_unit_tests_pass():
    if shutil.which("npm") is None or not (EXT / "node_modules" / "esbuild").exists():
        pytest.fail("npm and editors/vscode/node_modules are needed: make setup-all")
    r = subprocess.run(["npm", "test"], cwd=EXT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "# fail 0" in r.stdout and "workspace-level endpoints, token and advanced are ignored" in r.stdout
