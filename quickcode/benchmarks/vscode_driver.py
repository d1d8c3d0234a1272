"""A real VS Code 1.100.3 (code-server 4.100.3 from npm, in .tools/code-server) with the packaged extension
(editors/vscode/dist/quickcode.vsix), set up as tests/editors/test_vscode.py and `quickcode bench vscode` use
it: user settings, the extension installed by `--install-extension`, code-server started and stopped. Needs
`scripts/setup.sh editors` (make test runs it).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE_SERVER = REPO / ".tools" / "code-server" / "node_modules" / ".bin" / "code-server"
VSIX = REPO / "editors" / "vscode" / "dist" / "quickcode.vsix"
E2E = REPO / "editors" / "vscode" / "test" / "e2e"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

SETTINGS = {
    "editor.inlineSuggest.enabled": True,
    # no suggest widget competing for Tab (word-based suggestions); the ghost text is the UI under test
    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
    "editor.suggestOnTriggerCharacters": False,
    "editor.wordBasedSuggestions": "off",
    "files.autoSave": "off",
    "git.enabled": False,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "security.workspace.trust.enabled": False,
    "extensions.autoUpdate": False,
    "extensions.autoCheckUpdates": False,
    "extensions.ignoreRecommendations": True,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "chat.disableAIFeatures": True,
}

# a developer typing a file as it is: nothing the editor adds by itself (brackets, quotes, indentation)
VERBATIM_TYPING = {
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "editor.autoClosingComments": "never",
    "editor.autoClosingOvertype": "never",
    "editor.autoSurround": "never",
    "editor.autoIndent": "none",
    "editor.formatOnType": False,
    "editor.acceptSuggestionOnEnter": "off",
    "editor.insertSpaces": True,
    "editor.detectIndentation": False,
}


def missing() -> str | None:
    """What of code-server and the .vsix is missing (None: both there)."""
    if CODE_SERVER.exists() and VSIX.exists():
        return None
    return f"code-server or the .vsix is missing ({CODE_SERVER}, {VSIX}): run scripts/setup.sh editors"


def install(tmp: Path, settings: dict) -> dict:
    """User data with `settings` and the extension installed under `tmp`; the environment to run code-server
    in (its own XDG folders: the language server's learnt state stays there too)."""
    data, exts = tmp / "data", tmp / "ext"
    (data / "User").mkdir(parents=True)
    exts.mkdir()
    (data / "User" / "settings.json").write_text(json.dumps({**SETTINGS, **settings}, indent=1))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "XDG_DATA_HOME": str(tmp / "xdg-data"),
           "XDG_STATE_HOME": str(tmp / "xdg-state")}
    inst = subprocess.run([str(CODE_SERVER), "--user-data-dir", str(data), "--extensions-dir", str(exts),
                           "--install-extension", str(VSIX)], capture_output=True, text=True, timeout=300, env=env)
    if inst.returncode != 0 or "successfully installed" not in inst.stdout:
        raise RuntimeError("installing the extension failed:\n" + inst.stdout + inst.stderr)
    if not any(p.name.startswith("quickcode.quickcode-") for p in exts.iterdir()):
        raise RuntimeError(f"the extension is not in {exts}: {list(exts.iterdir())}")
    return env


def start(tmp: Path, workspace: Path, port: int, env: dict, log_path: Path) -> subprocess.Popen:
    """code-server on 127.0.0.1:`port` for `workspace`, with the user data of `install`; returns once it answers
    /healthz (raises if it exits or does not answer within 120 s)."""
    with open(log_path, "w") as log:
        cs = subprocess.Popen(
            [str(CODE_SERVER), "--auth", "none", "--bind-addr", f"127.0.0.1:{port}", "--disable-telemetry",
             "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override",
             "--user-data-dir", str(tmp / "data"), "--extensions-dir", str(tmp / "ext"), str(workspace)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if cs.poll() is not None:
            raise RuntimeError("code-server exited:\n" + log_path.read_text(errors="replace")[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return cs
        except OSError:
            time.sleep(0.3)
    stop(cs)
    raise RuntimeError("code-server never answered /healthz:\n" + log_path.read_text(errors="replace")[-3000:])


def stop(cs: subprocess.Popen) -> None:
    try:
        os.killpg(cs.pid, signal.SIGTERM)
        cs.wait(15)
    except Exception:
        try:
            os.killpg(cs.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
