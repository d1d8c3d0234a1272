"""A real VS Code 1.100.3 (code-server 4.100.3 from npm, in .tools/code-server) with the packaged extension
(editors/vscode/dist/quickcode.vsix) installed by `--install-extension`, settings pointing it at the real
language server and the session's real backend, driven in Debian's headless Chromium by playwright-core
(editors/vscode/test/e2e/drive_code_server.mjs): open a Python file, type, wait for the ghost text,
screenshot it (artifacts/code_server_ghost_text.png), accept with Tab, save, and check the file on disk is
exactly what was there + typed + the ghost text; the status-bar item says connected.

Needs `scripts/setup.sh editors` (make test runs it). Run alone: .venv/bin/python -m pytest -m vscode -s
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

from quickcode.backend.launch import free_port
from quickcode.benchmarks import vscode_driver
from quickcode.benchmarks.vscode_driver import CHROMIUM, E2E

from tests.support.editor_helpers import ARTIFACTS, CONTEXTS, QUICKCODE, Timer, failure_context

pytestmark = [pytest.mark.editor, pytest.mark.vscode, pytest.mark.slow]

DRIVER = E2E / "drive_code_server.mjs"
GHOST_TIMEOUT_MS = 60_000   # per typed context
SCREENSHOT = ARTIFACTS / "code_server_ghost_text.png"


def accepted_events(http_url: str) -> float:
    """The backend's count of `accepted` telemetry events (all sessions)."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r'^quickcode_completion_events_total\{[^}]*event="accepted"[^}]*\} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def last_inline_insert_text(lsp_log) -> list[str]:
    """insertText of every non-empty inline-completion answer the server sent (pygls logs what it sends)."""
    texts = []
    for line in lsp_log.read_text(errors="replace").splitlines():
        i = line.find("Sending data: ")
        if i < 0 or '"insertText"' not in line:
            continue
        try:
            body = json.loads(line[i + len("Sending data: "):])
        except ValueError:
            continue
        for item in (body.get("result") or {}).get("items", []):
            if isinstance(item.get("insertText"), str):
                texts.append(item["insertText"])
    return texts


HOSTILE_ENDPOINT = "ws://127.0.0.1:9/v1/ws"


def test_vscode_ghost_text_accept_save(backend, tmp_path):
    t = Timer()
    if vscode_driver.missing():
        pytest.fail(vscode_driver.missing())
    ws = tmp_path / "ws"
    ws.mkdir()
    lsp_log = tmp_path / "lsp.log"
    cs_log = tmp_path / "code-server.log"
    settings = {"quickcode.server.command": QUICKCODE, "quickcode.server.args": ["lsp"],
                "quickcode.endpoints": [backend.ws_url], "quickcode.server.logFile": str(lsp_log),
                # a deadline and a wait no machine misses: this test is about what the editor shows and saves,
                # not how fast (benchmarks measure that); a shared CI machine has stalled the engine for seconds
                "quickcode.deadlineMs": GHOST_TIMEOUT_MS}
    # a hostile repository: its .vscode/settings.json points the extension elsewhere; endpoints, advanced and
    # server.* are machine-scoped (user settings only), so completions must still come from the user's backend
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "settings.json").write_text(json.dumps({
        "quickcode.endpoints": [HOSTILE_ENDPOINT], "quickcode.advanced": {"endpoints": [HOSTILE_ENDPOINT]},
        "quickcode.token": "qc_from-the-repository", "quickcode.server.command": "/bin/false"}))
    attempts = []
    for i, (before, typed) in enumerate(CONTEXTS):
        name = f"demo{i}.py"
        (ws / name).write_text(before)
        attempts.append({"file": name, "typed": typed, "before": before})

    env = vscode_driver.install(tmp_path, settings)
    t.lap("extension_installed")

    port = free_port()
    accepted_before = accepted_events(backend.http_url)
    cs = vscode_driver.start(tmp_path, ws, port, env, cs_log)
    t.lap("code_server_up")
    result_path = tmp_path / "result.json"
    shot = tmp_path / "code_server_ghost_text.png"
    res: dict = {}
    try:
        drv = subprocess.run(
            ["node", str(DRIVER)], cwd=DRIVER.parent, capture_output=True, text=True, timeout=540,
            env={**os.environ, "CS_URL": f"http://127.0.0.1:{port}", "WS": str(ws), "CHROMIUM": CHROMIUM,
                 "ATTEMPTS": json.dumps([{"file": a["file"], "typed": a["typed"]} for a in attempts]),
                 "SCREENSHOT": str(shot), "RESULT": str(result_path),
                     "GHOST_TIMEOUT_MS": str(GHOST_TIMEOUT_MS)})
        t.lap("driver_done")
        context = failure_context(lsp_log, backend, {"code-server log": cs_log}) + \
            f"\n--- driver stderr:\n{drv.stderr[-3000:]}"
        assert result_path.exists(), f"driver wrote no result (rc {drv.returncode})\n{context}"
        res = json.loads(result_path.read_text())
        print("[vscode] driver:", json.dumps({k: v for k, v in res.items() if k != "console_errors"}, indent=1))
        assert not res.get("error"), f"{res['error']}\n{context}"
        a = res.get("accepted")
        assert a, f"no ghost text in any file: {res['attempts']}\n{context}"

        # the file on disk is what was there + what was typed + exactly the suggestion shown
        before = next(x["before"] for x in attempts if x["file"] == a["file"])
        saved = a["file_after_accept"]
        assert saved.startswith(before + a["typed"]), (saved, before + a["typed"])
        inserted = saved[len(before + a["typed"]):]
        ghost = a["ghost"]
        assert inserted, "Tab inserted nothing"
        assert inserted.startswith(ghost["inline"]), (inserted, ghost)
        if ghost["more"]:
            assert inserted == "\n".join([ghost["inline"], *ghost["more"]]), (inserted, ghost)
        # ... and that text came from the real stack: the language server sent it as an inline item
        # (read from pygls' INFO "Sending data" lines of the server log, when the server logs them)
        sent = last_inline_insert_text(lsp_log)
        if sent:
            assert inserted in sent, (inserted, sent[-5:])
        else:
            print("[vscode] the server log has no message bodies; insertText not cross-checked")

        assert res.get("status_label", "").startswith("quickcode connected"), res.get("status_label")
        assert HOSTILE_ENDPOINT not in lsp_log.read_text(errors="replace")   # the repository's endpoint was ignored
        cmds = res.get("commands", {})
        assert cmds.get("disabled") and cmds.get("enabled"), f"enable/disable commands: {cmds}"
        assert cmds.get("latency_report"), f"latency report did not open: {cmds}"
        # the accept reached the backend (the item's quickcode.accept command, or typed-through inference)
        deadline = time.monotonic() + 10
        while accepted_events(backend.http_url) <= accepted_before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert accepted_events(backend.http_url) > accepted_before, "no accepted telemetry at the backend"
        t.laps["ghost_after_typing_ms"] = a.get("ghost_after_typing_ms")
        t.laps["browser_timings_ms"] = res.get("timings_ms")
    finally:
        if shot.exists():
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, SCREENSHOT)
            print(f"[vscode] screenshot: {SCREENSHOT}")
        vscode_driver.stop(cs)
        t.report("vscode (code-server)")
