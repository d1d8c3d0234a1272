"""Save a PNG of ghost text in a real VS Code (the README's picture), driven as tests/editors/test_vscode.py
drives it: code-server with the packaged extension in Debian's headless Chromium
(editors/vscode/test/e2e/drive_code_server.mjs), against a real backend. Needs `scripts/setup.sh editors`.

    .venv/bin/python scripts/screenshot_ghost_text.py [--url ws://HOST:PORT/v1/ws] [--set KEY=VALUE ...]
                                                      [--out docs/images/ghost-text-vscode.png]

Without --url it starts `quickcode serve` (the default profile, or --config / --set) and stops it afterwards.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from quickcode.backend.launch import backend_at, free_port, start_backend  # noqa: E402
from quickcode.benchmarks import vscode_driver  # noqa: E402

DRIVER = vscode_driver.E2E / "drive_code_server.mjs"
MAX_PNG_BYTES = 300_000        # what the README's test allows

# (file name, text before the cursor, keys typed after it like a user); tried in order until ghost text shows
SCENES = [
    ("geometry.py",
     'import math\n\n\nclass Point:\n    """A point in the plane."""\n\n'
     "    def __init__(self, x: float, y: float):\n        self.x = x\n        self.y = y\n\n"
     '    def distance_to(self, other: "Point") -> float:\n'
     '        """The Euclidean distance to `other`."""\n        ',
     "return math."),
    ("words.py",
     "import collections\n\n\ndef most_common_words(text: str, n: int = 10) -> list[tuple[str, int]]:\n"
     '    """The `n` most frequent words of `text`, most frequent first."""\n'
     "    words = text.lower().split()\n    ",
     "counts = "),
]

# what makes a picture readable at the README's width; the extension's settings as a user sets them
PICTURE_SETTINGS = {
    "editor.fontSize": 17,
    "editor.minimap.enabled": False,
    "editor.lineNumbers": "on",
    "breadcrumbs.enabled": False,
    "workbench.activityBar.location": "hidden",
    "window.commandCenter": False,
}
# the client waits for the line to be written whole (a picture, not a latency figure: no settled-words preview)
PICTURE_CLIENT = {"linePatienceMs": 0, "deadlineMs": 5000}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running backend's WebSocket URL (default: start one)")
    ap.add_argument("--config", type=Path, help="a TOML config for the backend started here")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a backend setting")
    ap.add_argument("--unit", default="block", choices=("word", "block"),
                    help="the client's suggestionUnit (block: the whole line shows)")
    ap.add_argument("--viewport", default="1000x560", help="the browser's WIDTHxHEIGHT in pixels")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "ghost-text-vscode.png")
    args = ap.parse_args(argv)
    if vscode_driver.missing():
        raise SystemExit(vscode_driver.missing())

    tmp = Path(tempfile.mkdtemp(prefix="qc-shot-"))
    env = {"QUICKCODE_CONFIG": str(args.config.resolve())} if args.config else None
    backend = backend_at(args.url) if args.url else start_backend(tmp / "backend.log", *args.set, env=env)
    cs, ok = None, False
    try:
        ws = tmp / "ws"
        ws.mkdir()
        for name, before, _ in SCENES:
            (ws / name).write_text(before)
        settings = {**PICTURE_SETTINGS, "quickcode.server.command": sys.executable,
                    "quickcode.server.args": ["-m", "quickcode", "lsp"],
                    "quickcode.endpoints": [backend.ws_url],
                    "quickcode.server.logFile": str(tmp / "lsp.log"),
                    "quickcode.advanced": {**PICTURE_CLIENT, "suggestionUnit": args.unit}}
        cs_env = vscode_driver.install(tmp, settings)
        port = free_port()
        cs = vscode_driver.start(tmp, ws, port, cs_env, tmp / "code-server.log")
        shot, result = tmp / "shot.png", tmp / "result.json"
        subprocess.run(
            ["node", str(DRIVER)], cwd=DRIVER.parent, capture_output=True, text=True, timeout=540,
            env={**os.environ, "CS_URL": f"http://127.0.0.1:{port}", "WS": str(ws),
                 "CHROMIUM": vscode_driver.CHROMIUM,
                 "ATTEMPTS": json.dumps([{"file": f, "typed": typed} for f, _, typed in SCENES]),
                 "SCREENSHOT": str(shot), "RESULT": str(result), "VIEWPORT": args.viewport})
        res = json.loads(result.read_text()) if result.exists() else {"error": "the driver wrote no result"}
        if res.get("error") or not res.get("accepted"):
            raise SystemExit(f"no ghost text: {res.get('error') or res.get('attempts')} (logs in {tmp})")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, args.out)
        size = args.out.stat().st_size
        print(json.dumps({"out": str(args.out), "bytes": size, "file": res["accepted"]["file"],
                          "typed": res["accepted"]["typed"], "ghost": res["accepted"]["ghost"]}))
        ok = size <= MAX_PNG_BYTES
        return 0 if ok else 1
    finally:
        if cs is not None:
            vscode_driver.stop(cs)
        if not args.url:
            backend.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)      # the logs stay only when something went wrong


if __name__ == "__main__":
    sys.exit(main())
