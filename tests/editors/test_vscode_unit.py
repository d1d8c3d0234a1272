"""The VS Code extension's own unit tests (editors/vscode/test/*.test.mjs: node:test over src/logic.ts, bundled by
esbuild) run in the suite, through the extension's `npm test` (node_modules from scripts/setup.sh editors) —
among them that workspace-level endpoints/token/advanced are ignored (docs/security.md, threat 11), the token
comes from secret storage, and plain ws:// to another host is flagged."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support.editor_helpers import REPO

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
    assert "workspace-level endpoints, token and advanced are ignored" in r.stdout   # threat 11's test ran


def test_the_extension_is_ready_for_a_marketplace():
    """Icon, CHANGELOG and the workspace-trust capability are declared, exist, and go into the packaged .vsix."""
    import json
    import struct

    pkg = json.loads((EXT / "package.json").read_text())
    icon = EXT / pkg["icon"]
    head = icon.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert width == height >= 128, (width, height)     # the marketplace wants at least 128 × 128
    changelog = (EXT / "CHANGELOG.md").read_text()
    assert f"\n## {pkg['version']}\n" in changelog
    trust = pkg["capabilities"]["untrustedWorkspaces"]
    assert trust["supported"] is True and trust["description"]
    # the claim it rests on: the settings that choose what runs and where code goes are machine-scoped
    props = pkg["contributes"]["configuration"]["properties"]
    for key in ("quickcode.server.command", "quickcode.server.args", "quickcode.server.env", "quickcode.endpoints",
                "quickcode.advanced"):
        assert props[key].get("scope") == "machine", key
    r = subprocess.run(["npm", "run", "-s", "bundle"], cwd=EXT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run(["npx", "--no-install", "vsce", "ls", "--no-dependencies"], cwd=EXT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    files = set(r.stdout.split())
    assert {"package.json", "README.md", "CHANGELOG.md", "LICENSE", pkg["icon"], "dist/extension.js"} <= files, files
