"""Next-edit suggestions in a real VS Code 1.100.3 (code-server, headless Chromium, the packaged extension from
editors/vscode/dist/quickcode.vsix) with `quickcode.nextEdit` on, the real language server and a real backend on
the fake engine (its "model" rewrites the editable region, `a + b` → `a * b`, once `#mul` is typed two lines
below: the editor code is what is under test, and the embedded model was not tuned for edits). The extension
shows the edit where it goes — `+` struck through and `→ *` after that line, not the cursor's — a key typed drops
it, the pause after the next asks again, Escape drops it, Tab applies it, and the file saved holds the edit and
the typed keys only (Tab inserted no tab). With the setting off nothing is shown and no edit is asked.

Needs `scripts/setup.sh editors`. Run alone: .venv/bin/python -m pytest tests/editors/test_vscode_next_edit.py -s
"""
from __future__ import annotations

import time

import pytest

from quickcode.backend.edit_prompt import CURSOR, REGION_END, REGION_START
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.launch import free_port
from quickcode.backend.settings import Settings
from quickcode.benchmarks import vscode_driver
from quickcode.benchmarks.neovim_driver import wait_until
from quickcode.benchmarks.vscode_typing import Bridge
from tests.lsp_client.test_lsp_next_edit import edit_prompts, rewrite_region
from tests.support.editor_helpers import QUICKCODE, failure_context

pytestmark = [pytest.mark.editor, pytest.mark.vscode, pytest.mark.slow]

DOC = "def add(a, b):\n    total = a + b\n    return total\n"
MARK = "#mul"
# a deadline and a wait no machine misses (under load an edit past the server's default deadline is dropped,
# and nothing asks again until the next key): this test is about what the editor shows, not how fast
SHOW_TIMEOUT_S = 60.0


def running_code_server(tmp_path, ws_url: str, next_edit: bool):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(DOC)
    lsp_log = tmp_path / "lsp.log"
    env = vscode_driver.install(tmp_path, {
        **vscode_driver.VERBATIM_TYPING, "quickcode.server.command": QUICKCODE, "quickcode.server.args": ["lsp"],
        "quickcode.endpoints": [ws_url], "quickcode.server.logFile": str(lsp_log), "quickcode.nextEdit": next_edit,
        "quickcode.deadlineMs": SHOW_TIMEOUT_S * 1000, "quickcode.advanced": {"predictor": False, "stateDir": ""}})
    port = free_port()
    cs = vscode_driver.start(tmp_path, ws, port, env, tmp_path / "code-server.log")
    return ws, lsp_log, cs, f"http://127.0.0.1:{port}"


def extension_logs(tmp_path) -> dict:
    """The extension's output channel (code-server writes it under the user data's logs)."""
    return {f"extension log {p.name}": p for p in sorted((tmp_path / "data" / "logs").glob("**/*quickcode*.log"))}


def rewrite_below_mark(prompt: str) -> list[str]:
    """The fake model, for an edit prompt: `a + b` made `a * b` when a line of the region is exactly MARK (the
    cursor's line once it is typed), else the region as it is (no edit); for a completion, nothing."""
    if not prompt.endswith(REGION_START + "\n"):
        return []
    region = prompt.split(REGION_START + "\n")[1].split(REGION_END)[0].replace(CURSOR, "")
    new = region.replace("a + b", "a * b") if MARK in region.split("\n") else region
    return [new, REGION_END, "\n"]


def shown(bridge: Bridge):
    return bridge("nextEdit")["nextEdit"]


@pytest.fixture
def engine():
    return FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite_region)


def test_vscode_shows_a_next_edit_away_from_the_cursor_and_tab_applies_it(tmp_path, fake_backend):
    if vscode_driver.missing():
        pytest.fail(vscode_driver.missing())
    b = fake_backend(FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite_below_mark))
    ws, lsp_log, cs, url = running_code_server(tmp_path, b.ws_url, next_edit=True)
    bridge = None
    try:
        bridge = Bridge(url, ws, tmp_path / "bridge.log")
        bridge("open", file="calc.py")                    # the cursor at the end: line 4, below `return total`
        context = lambda: failure_context(lsp_log, None, {"code-server log": tmp_path / "code-server.log",
                                                           **extension_logs(tmp_path)})
        bridge("key", text=MARK)
        seen = []

        def the_marks_edit():   # an edit asked before the mark was typed may show first; the mark's replaces it
            e = shown(bridge)
            if e and (not seen or seen[-1] != e):
                seen.append(e)
            return e if e and e["struck"] == "+" else None

        edit = wait_until(the_marks_edit, SHOW_TIMEOUT_S, step=0.1)
        assert edit, f"the mark's next edit not shown (shown: {seen})\n" + context()
        print("[vscode next edit] shown:", edit)
        assert edit["struck"] == "+" and edit["preview"] == "*", edit
        assert edit["struck_line"] == edit["preview_line"] == 2 and edit["cursor_line"] == 4, edit  # away from it

        bridge("key", text="x")                            # typed something else: dropped (no edit there)
        assert wait_until(lambda: shown(bridge) is None, 10, step=0.05), "typing did not drop it"
        bridge("backspace")                                # back where the edit is proposed: shown again
        assert wait_until(lambda: shown(bridge), SHOW_TIMEOUT_S, step=0.1), "not asked again after typing"
        bridge("escape")                                   # Escape drops it, and it stays dropped
        assert wait_until(lambda: shown(bridge) is None, 10, step=0.05), "Escape did not drop it"
        time.sleep(1.0)
        assert shown(bridge) is None, "dropped by Escape, shown again with nothing typed"

        bridge("key", text="x")
        bridge("backspace")
        assert wait_until(lambda: shown(bridge), SHOW_TIMEOUT_S, step=0.1), "not asked again after typing"
        bridge("tab")                                      # applies it, two lines above the cursor
        edited = "    total = a * b"                       # the cursor ends the edit it applied (async: wait)
        assert wait_until(lambda: bridge("line")["line"] == edited, 10, step=0.05), (
            f"Tab did not apply it: cursor's line {bridge('line')['line']!r}\n" + context())
        bridge("save")
        path = ws / "calc.py"
        expected = DOC.replace("a + b", "a * b") + MARK
        assert wait_until(lambda: path.read_text() == expected, 10, step=0.1), (repr(path.read_text()), expected)
        assert wait_until(lambda: shown(bridge) is None, 5, step=0.05)
    finally:
        if bridge is not None:
            bridge.close()
        vscode_driver.stop(cs)


def test_vscode_with_next_edits_off_shows_none_and_asks_none(tmp_path, fake_backend, engine):
    if vscode_driver.missing():
        pytest.fail(vscode_driver.missing())
    b = fake_backend(engine)
    ws, lsp_log, cs, url = running_code_server(tmp_path, b.ws_url, next_edit=False)
    bridge = None
    try:
        bridge = Bridge(url, ws, tmp_path / "bridge.log")
        bridge("open", file="calc.py")
        bridge("key", text="x")
        time.sleep(1.5)                                    # time for a wrong edit to show (on, it shows: above)
        assert shown(bridge) is None and edit_prompts(engine) == 0
        bridge("tab")                                      # Tab is a Tab
        bridge("save")
        path = ws / "calc.py"
        assert wait_until(lambda: path.read_text() != DOC, 10, step=0.1)
        assert path.read_text().startswith(DOC + "x") and path.read_text()[len(DOC) + 1:].strip() == ""
    finally:
        if bridge is not None:
            bridge.close()
        vscode_driver.stop(cs)
