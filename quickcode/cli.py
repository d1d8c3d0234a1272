"""The `quickcode` command: one entry point, subcommands registered by the part of the tree that owns them.

Only the chosen subcommand's arguments are built (and its modules imported), so `quickcode lsp` never pays
for torch, vLLM or the benchmarks.
"""
from __future__ import annotations

import argparse
import sys

COMMANDS = {
    "serve": "run the backend (FastAPI + vLLM)",
    "token": "issue or revoke per-user API tokens",
    "lsp": "the language server on stdio (editors launch this)",
    "doctor": "why are completions empty? check a backend endpoint step by step and print each fix",
    "demo": "start the backend and the language server, replay typing of a real file, print completions "
            "and timings",
    "model": "train, distil, evaluate, quantize and export models",
    "bench": "benchmarks: a markdown report, then one JSON line of headline figures",
    "report": "latency breakdown table (component, p50, p95, share)",
}


def _register(name: str, sub: argparse._SubParsersAction) -> None:
    if name in ("serve", "token"):
        from backend import cli as backend_cli

        backend_cli.register(sub, only=name)
    elif name == "lsp":
        from lsp_client.cli import add_arguments

        p = sub.add_parser("lsp", help=COMMANDS["lsp"])
        add_arguments(p)
        p.set_defaults(func=_lsp)
    elif name == "doctor":
        from lsp_client import doctor

        p = sub.add_parser("doctor", help=COMMANDS["doctor"], description=doctor.__doc__.splitlines()[0])
        doctor.add_arguments(p)
        p.set_defaults(func=doctor.run)
    elif name == "demo":
        from quickcode import demo

        p = sub.add_parser("demo", help=COMMANDS["demo"])
        demo.add_arguments(p)
        p.set_defaults(func=demo.run)
    elif name == "model":
        from draft_model import cli as model_cli

        model_cli.register(sub)
    elif name in ("bench", "report"):
        from benchmarks import cli as bench_cli

        bench_cli.register(sub, only=name)


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quickcode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, helptext in COMMANDS.items():
        if name == chosen:
            _register(name, sub)
        else:
            sub.add_parser(name, help=helptext, add_help=False)
    return parser


def _lsp(args: argparse.Namespace) -> int:
    from lsp_client.cli import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    if not hasattr(args, "func"):
        build_parser([args.cmd, "--help"]).parse_args([args.cmd, "--help"])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
