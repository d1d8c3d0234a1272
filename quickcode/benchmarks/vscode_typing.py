"""`quickcode bench vscode`: the typing benchmark's developer in a real VS Code — what they accept, and when ghost
text shows — with the extension as shipped, the real language server and one real backend.

VS Code is code-server 4.100.3 (VS Code 1.100.3) in Debian's headless Chromium
(quickcode/benchmarks/vscode_driver.py, set up as tests/editors/test_vscode.py), driven one key at a time by
editors/vscode/test/e2e/bridge_code_server.mjs;
the developer (quickcode/benchmarks/editor_typing.py, the same as `quickcode bench neovim`'s: the same gaps,
typos and acceptance coins at the same positions of the same segments) reads the ghost text from the editor's
DOM and presses Tab when all of it is what they are about to type. The editor types verbatim (no auto-closing
brackets or quotes, no auto-indent: `VERBATIM_TYPING`); each Tab is checked on the cursor's line as rendered
(a Tab that wrote other text is counted and undone), and each session's file, saved at its end, is compared
with the segment. The simulated VS Code of `quickcode bench typing` (quickcode/benchmarks/editor_sim.py, style
`vscode`) stands for this editor; this benchmark says how close it is.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from quickcode.benchmarks import vscode_driver
from quickcode.benchmarks.editor_sim import TypingModel
from quickcode.benchmarks.editor_typing import serving, type_segment, write_rows
from quickcode.benchmarks.neovim_driver import QUICKCODE
from quickcode.benchmarks.report import Report, md_table, percentile
from quickcode.benchmarks.typing import _segments, add_segment_arguments, held_out_files

BRIDGE = vscode_driver.E2E / "bridge_code_server.mjs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_segment_arguments(p)
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


class Bridge:
    """The node process that holds the browser: one JSON command per line, one JSON reply per line."""

    def __init__(self, cs_url: str, workspace: Path, stderr_path: Path):
        self._err = open(stderr_path, "w")
        self.proc = subprocess.Popen(
            ["node", str(BRIDGE)], cwd=BRIDGE.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._err, text=True, bufsize=1,
            env={**os.environ, "CS_URL": cs_url, "WS": str(workspace),
                 "CHROMIUM": vscode_driver.CHROMIUM})
        ready = self._read()
        if not ready.get("ready"):
            raise RuntimeError(f"the browser bridge did not start: {ready}")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the browser bridge exited:\n" + Path(self._err.name).read_text()[-3000:])
        return json.loads(line)

    def __call__(self, op: str, **args) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        reply = self._read()
        if not reply.get("ok"):
            raise RuntimeError(f"bridge {op}: {reply.get('error')}")
        return reply

    def close(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(30)
        except Exception:
            self.proc.kill()
        self._err.close()


class VsCodeEditor:
    """quickcode/benchmarks/editor_typing.py's Editor on the bridge, for one workspace file."""

    def __init__(self, bridge: Bridge, file: str):
        self.bridge, self.file = bridge, file

    def start(self, before: str) -> None:
        self.bridge("open", file=self.file)      # the workspace file holds `before` already

    def key(self, text: str) -> None:
        self.bridge("key", text=text)

    def backspace(self) -> None:
        self.bridge("backspace")

    def ghost(self) -> str | None:
        return self.bridge("ghost")["ghost"]

    def tab(self, expected_before: str, ghost: str, res: dict) -> str:
        """Tab, then the cursor's line as rendered must be the last line of what was typed plus `ghost`. In the
        line's indentation VS Code's Tab accepts only a suggestion whose leading blanks are narrower than a tab
        (`inlineSuggestionHasIndentationLessThanTabSize`), else it indents: the developer sees the indentation
        grow towards the suggestion and the rest of it shown again, and presses Tab again (counted in
        `tab_indents`). Anything else a Tab wrote is counted and undone."""
        was = expected_before.rsplit("\n", 1)[-1]
        first, _, more = ghost.partition("\n")
        want_first = was + first                                     # the cursor's line once the first line is in
        want = (expected_before + ghost).rsplit("\n", 1)[-1]
        line, presses = was, 0
        while presses < 8:
            self.bridge("tab")
            presses += 1
            line = self._line_other_than(line)
            if line == want:
                return ghost
            if line is None or line.strip() or not want_first.startswith(line):
                break
            res["tab_indents"] = res.get("tab_indents", 0) + 1      # Tab indented towards the suggestion
            rest = want_first[len(line):] + ("\n" + more if more else "")
            if not self._ghost_becomes(rest):
                break
        res["tab_nothing" if line == was else "tab_wrong"] += 1
        if line != was:
            res.setdefault("wrong", []).append({"expected": want[-60:], "got": (line or "")[-60:], "ghost": ghost})
        for _ in range(presses):
            self.bridge("undo")                # the Tabs' text out again
        return ""

    def _line_other_than(self, line: str, timeout_s: float = 1.0) -> str | None:
        deadline = time.monotonic() + timeout_s
        now = line
        while time.monotonic() < deadline and now == line:
            time.sleep(0.005)
            now = self.bridge("line")["line"]
        return now

    def _ghost_becomes(self, text: str, timeout_s: float = 1.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ghost() == text:
                return True
            time.sleep(0.005)
        return False


def _waterfalls(lsp_log: Path) -> int:
    """Backend requests the language server made so far (one `waterfall` line each)."""
    return lsp_log.read_text(errors="replace").count(" waterfall ") if lsp_log.exists() else 0


def run(args: argparse.Namespace) -> dict:
    from rich.progress import Progress

    from quickcode.backend.launch import free_port

    if vscode_driver.missing():
        raise SystemExit(vscode_driver.missing())
    segs = _segments(held_out_files(args), args.sessions, args.chars, args.seed)
    report = Report("vscode", "A developer typing in a real VS Code (code-server): the extension as shipped",
                    out=args.out)
    lsp_log = (report.dir / "vscode-lsp.log").resolve()      # the language server runs elsewhere
    lsp_log.unlink(missing_ok=True)
    rows: list[dict] = []
    with serving(args.url, report.dir / "vscode-backend.log") as url, tempfile.TemporaryDirectory() as tmp, \
            Progress() as bar:
        tmp_path = Path(tmp)
        ws = tmp_path / "ws"
        ws.mkdir()
        names = [f"s{i + 1}_{path.name}" for i, (path, _, _) in enumerate(segs)]
        for name, (_, before, _) in zip(names, segs):
            (ws / name).write_text(before)
        env = vscode_driver.install(tmp_path, {
            **vscode_driver.VERBATIM_TYPING, "quickcode.server.command": QUICKCODE,
            "quickcode.server.args": ["lsp"], "quickcode.endpoints": [url], "quickcode.server.logFile": str(lsp_log)})
        port = free_port()
        cs = vscode_driver.start(tmp_path, ws, port, env, report.dir / "vscode-code-server.log")
        bridge = None
        try:
            bridge = Bridge(f"http://127.0.0.1:{port}", ws, report.dir / "vscode-bridge.log")
            task = bar.add_task("sessions", total=len(segs))
            for i, (name, seg) in enumerate(zip(names, segs)):
                bar.update(task, description=seg[0].name)
                rows.append({**_session(bridge, ws / name, seg, args.seed + i, args.speed, lsp_log), "session": i})
                bar.advance(task)
        finally:
            if bridge is not None:
                bridge.close()
            vscode_driver.stop(cs)
    write_rows(report.dir / "vscode-rows.jsonl.gz", rows)
    return write(report, rows, segs, args)


def _session(bridge: Bridge, file: Path, seg, seed: int, speed: float, lsp_log: Path) -> dict:
    """One segment typed into `file` of the workspace; then saved and compared with the segment."""
    path, before, target = seg
    requests_before = _waterfalls(lsp_log)
    res = type_segment(VsCodeEditor(bridge, file.name), before, target, seed, TypingModel(speed=speed))
    time.sleep(0.3)
    bridge("save")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and file.read_text() == before:
        time.sleep(0.1)
    res["typed_as_is"] = file.read_text() == before + target
    time.sleep(0.5)             # the session's last waterfall lines
    res["backend_requests"] = _waterfalls(lsp_log) - requests_before
    return {**res, "arm": "vscode", "file": path.name, "chars": len(target)}


def write(report: Report, rows: list[dict], segs, args) -> dict:
    n = len(rows)
    table = [[r["session"] + 1, r["file"], r["accepted_chars"], r["backend_requests"],
              "ok" if r["typed_as_is"] else "NOT as typed"] for r in rows]
    report.add(f"{n} segments × {args.chars} characters of held-out files, seed {args.seed}, speed {args.speed}; "
               "one VS Code (code-server), the extension's .vsix, the real language server, one backend.\n\n"
               + md_table(["segment", "file", "accepted chars", "backend requests", "file at the end"], table))
    ghosts = [x for r in rows for x in r["pause_to_ghost_ms"]]
    total = {k: sum(r.get(k, 0) for r in rows) for k in ("accepted_chars", "keystrokes", "backend_requests",
                                                          "pauses", "ghost_at_pause", "tab_wrong", "tab_nothing",
                                                          "tab_indents")}
    typed = sum(r["chars"] for r in rows)
    report.add("## Totals\n\n" + md_table(
        ["accepted chars", "per 100 typed", "keys", "backend requests", "pauses with ghost text",
         "pause → ghost p50 ms", "p95 ms", "Tab wrote other text", "Tab wrote nothing",
         "Tabs that indented first", "segments as typed"],
        [[total["accepted_chars"], round(100 * total["accepted_chars"] / max(1, typed), 1), total["keystrokes"],
          total["backend_requests"], f"{total['ghost_at_pause']} / {total['pauses']}",
          percentile(ghosts, 50) if ghosts else float("nan"), percentile(ghosts, 95) if ghosts else float("nan"),
          total["tab_wrong"], total["tab_nothing"], total["tab_indents"], sum(r["typed_as_is"] for r in rows)]]))
    head = {"segments": n, "chars_per_segment": args.chars, "accepted_chars": total["accepted_chars"],
            "accepted_per_100": round(100 * total["accepted_chars"] / max(1, typed), 2),
            "backend_requests": total["backend_requests"], "tab_wrong": total["tab_wrong"],
            "tab_indents": total["tab_indents"],
            "typed_as_is": sum(r["typed_as_is"] for r in rows),
            "pause_to_ghost_p50_ms": percentile(ghosts, 50) if ghosts else None,
            "pause_to_ghost_p95_ms": percentile(ghosts, 95) if ghosts else None}
    return report.finish(head)
