"""The `quickcode` command: one entry point, subcommands registered by the part of the tree that owns them.

Imports are lazy (inside each subcommand) so that `quickcode lsp` never pays for torch or vLLM.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from backend import cli as backend_cli
    from benchmarks import cli as bench_cli
    from draft_model import cli as model_cli

    parser = argparse.ArgumentParser(prog="quickcode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    backend_cli.register(sub)
    model_cli.register(sub)
    bench_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
