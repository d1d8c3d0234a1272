"""`python -m tests.fake_serve --port P [--hold]`: the real server (uvicorn with `quickcode serve`'s settings,
real HTTP and WebSockets) in a process of its own over the `FakeEngine` — for tests that kill a backend
process and bring one back on the same port, where vLLM's own behaviour is not the point.

Each request writes `result = compute()` and a newline; with `--hold` it writes its first token and then
nothing more for an hour: a stream that is running whenever the test looks, on any machine.
"""
from __future__ import annotations

import argparse

import uvicorn

from backend.app import create_app
from backend.fake_engine import FakeEngine
from backend.serve import uvicorn_config
from backend.settings import Settings

TOKENS = ("result", " =", " compute", "()", "\n")
HOLD_S = 3600.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--hold", action="store_true", help="hold every stream after its first token")
    args = ap.parse_args()
    settings = Settings(spec_method="off", replica_id="fake-process", port=args.port, shutdown_drain_s=0.5,
                        heal_space=False)     # the script's first token starts a word: nothing to heal
    engine = FakeEngine(settings, script=lambda prompt: TOKENS, per_token_s=HOLD_S if args.hold else 0.001)
    uvicorn.Server(uvicorn_config(create_app(settings, engine), settings, log_level="warning")).run()


if __name__ == "__main__":
    main()
