"""`python -m tests.support.fake_serve --port P [--hold] [--drain-s S] [--set KEY=VALUE]`: the real server (uvicorn
with `quickcode serve`'s settings, real HTTP and WebSockets) in a process of its own over the `FakeEngine` — for
tests that kill or stop a backend process (and bring one back on the same port), or signal it, where vLLM's own
behaviour is not the point. `start(...)` runs it and waits until it is ready.

Each request writes `result = compute()` and a newline; with `--hold` it writes its first token and then
nothing more for an hour: a stream that is running whenever the test looks, on any machine. `--drain-s`: the
drain deadline at SIGTERM (default 0.5 s); `--max-tokens-limit`, `--host`, `--auth-bootstrap-dir` as the
settings; `--set` any other setting (as `quickcode serve --set`).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from quickcode.backend import serve
from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.launch import RunningBackend
from quickcode.backend.settings import Settings

TOKENS = ("result", " =", " compute", "()", "\n")
HOLD_S = 3600.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--hold", action="store_true", help="hold every stream after its first token")
    ap.add_argument("--drain-s", type=float, default=0.5, help="the drain deadline at SIGTERM")
    ap.add_argument("--max-tokens-limit", type=int, default=Settings().max_tokens_limit)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--auth-bootstrap-dir", type=Path, default=None, help="the setting auth_bootstrap_dir")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    sets = dict(kv.split("=", 1) for kv in args.set)
    settings = Settings(**{"spec_method": "off", "heal_token": False, "replica_id": "fake-process",
                           "port": args.port, "host": args.host, "auth_bootstrap_dir": args.auth_bootstrap_dir,
                           "shutdown_drain_s": args.drain_s,
                           "max_tokens_limit": args.max_tokens_limit, "log_level": "warning",
                           "heal_space": False,     # the script's first token starts a word: nothing to heal
                           **sets})
    engine = FakeEngine(settings, script=lambda prompt: TOKENS, per_token_s=HOLD_S if args.hold else 0.001)
    serve.run(settings, engine)      # as `quickcode serve` runs: the drain at SIGTERM, the exit code


def start(log_path: Path, port: int, *args: str) -> RunningBackend:
    """This module as a process on `port` (its own process group: killed whole), once /readyz says so."""
    from tests.conftest import REPO
    from tests.support.waits import until
    from tests.support.ws_helpers import http_get

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.fake_serve", "--port", str(port), *args],
                                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    b = RunningBackend(port, proc, log_path)

    def ready() -> bool:
        assert proc.poll() is None, f"the fake backend exited:\n{b.log_tail()}"
        try:
            return http_get(f"{b.http_url}/readyz", timeout_s=2)[0] == 200
        except OSError:
            return False
    until(ready, "the fake backend to become ready", hang_s=120, poll_s=0.05)
    return b


if __name__ == "__main__":
    main()
