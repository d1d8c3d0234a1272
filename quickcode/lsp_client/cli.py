"""`quickcode lsp`: the language server on stdio — arguments, logging, and the backend endpoints and token from
the command line or the environment."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client import stdio
from quickcode.lsp_client.server import build_server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="quickcode lsp", description="the quickcode language server (stdio)")
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", action="append", default=None,
                   help="backend WebSocket URL (repeat for several regions); default $QUICKCODE_ENDPOINTS or local")
    p.add_argument("--token", default=None, help="API token (default $QUICKCODE_TOKEN)")
    p.add_argument("--log-file", default=os.environ.get("QUICKCODE_LSP_LOG"))
    p.add_argument("--log-level", default=os.environ.get("QUICKCODE_LSP_LOG_LEVEL"),
                   help="default INFO with a log file (one waterfall line per request), WARNING on stderr")
    p.add_argument("--stdio", action="store_true", help="accepted for editors that pass it; stdio is the only transport")


def run(args: argparse.Namespace) -> int:
    handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    level = args.log_level or ("INFO" if args.log_file else "WARNING")
    logging.basicConfig(level=level.upper(), handlers=[handler],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level.upper() != "DEBUG":
        logging.getLogger("pygls").setLevel(logging.WARNING)   # it logs every message body at INFO
    cfg = ClientConfig()
    env_endpoints = os.environ.get("QUICKCODE_ENDPOINTS")
    if args.endpoint:
        cfg.endpoints = args.endpoint
    elif env_endpoints:
        cfg.endpoints = [e.strip() for e in env_endpoints.split(",") if e.strip()]
    cfg.token = args.token or os.environ.get("QUICKCODE_TOKEN", "")
    stdio.serve(build_server(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
