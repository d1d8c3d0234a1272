"""The `quickcode` command: one entry point, subcommands registered by the part of the tree that owns them.

Only the chosen subcommand's arguments are built (and its modules imported), so `quickcode lsp` never pays
for torch, vLLM or the benchmarks, and the language-server distribution (quickcode-lsp: quickcode/cli.py,
quickcode/lsp_client/, quickcode/protocol/) runs `lsp` and `doctor` with the backend's packages absent; its
other commands say so.
"""
from __future__ import annotations

import argparse
import sys

COMMANDS = {
    "serve": "run the backend (FastAPI + vLLM)",
    "token": "issue or revoke per-user API tokens",
    "probe": "time the default profile on typing-size requests here (`profile = auto` serves it if fast)",
    "lsp": "the language server on stdio (editors launch this)",
    "doctor": "why are completions empty? check a backend endpoint step by step and print each fix",
    "demo": "start the backend and the language server, replay typing of a real file, print completions "
            "and timings",
    "model": "train, distil, evaluate, quantize and export models",
    "bench": "benchmarks: a markdown report, then one JSON line of headline figures",
    "report": "latency breakdown table (component, p50, p95, share)",
}

# the extra of the full `quickcode` package each backend-side command needs (`lsp` and `doctor` need none)
EXTRAS = {"serve": "cpu", "token": "server", "probe": "cpu", "demo": "cpu", "model": "train",
          "bench": "bench", "report": "bench"}
# the full package's own modules, absent from the language-server distribution
FULL_ONLY = ("quickcode.backend", "quickcode.draft_model", "quickcode.benchmarks", "quickcode.demo")


def missing_module_message(name: str, err: ModuleNotFoundError) -> str:
    """Why `quickcode NAME` cannot run here, and what to install: the full package, or the extra it lacks."""
    missing = err.name or str(err)
    extra = EXTRAS.get(name, "cpu")
    if missing in FULL_ONLY or missing.startswith(tuple(f"{m}." for m in FULL_ONLY)):
        return (f"quickcode {name}: this is the language-server package (quickcode-lsp: `quickcode lsp` and "
                f"`quickcode doctor` only). `{name}` is part of the full quickcode package: from a "
                f"checkout, `pip install '.[{extra}]'` (or the quickcode wheel of `make dist`, "
                f"with [{extra}]).")
    return (f"quickcode {name}: needs the Python package {missing.split('.')[0]!r}, which is not installed: "
            f"install the quickcode package with its extra [{extra}] (from a checkout: "
            f"`pip install '.[{extra}]'`).")


def _register(name: str, sub: argparse._SubParsersAction) -> None:
    if name in ("serve", "token", "probe"):
        from quickcode.backend import cli as backend_cli

        backend_cli.register(sub, only=name)
    elif name == "lsp":
        from quickcode.lsp_client.cli import add_arguments

        p = sub.add_parser("lsp", help=COMMANDS["lsp"])
        add_arguments(p)
        p.set_defaults(func=_lsp)
    elif name == "doctor":
        from quickcode.lsp_client import doctor

        p = sub.add_parser("doctor", help=COMMANDS["doctor"], description=doctor.__doc__.splitlines()[0])
        doctor.add_arguments(p)
        p.set_defaults(func=doctor.run)
    elif name == "demo":
        from quickcode import demo

        p = sub.add_parser("demo", help=COMMANDS["demo"])
        demo.add_arguments(p)
        p.set_defaults(func=demo.run)
    elif name == "model":
        from quickcode.draft_model import cli as model_cli

        model_cli.register(sub)
    elif name in ("bench", "report"):
        from quickcode.benchmarks import cli as bench_cli

        bench_cli.register(sub, only=name)


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quickcode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, helptext in COMMANDS.items():
        if name == chosen:
            try:
                _register(name, sub)
            except ModuleNotFoundError as err:
                raise SystemExit(missing_module_message(name, err)) from None
        else:
            sub.add_parser(name, help=helptext, add_help=False)
    return parser


def _lsp(args: argparse.Namespace) -> int:
    from quickcode.lsp_client.cli import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    if not hasattr(args, "func"):
        build_parser([args.cmd, "--help"]).parse_args([args.cmd, "--help"])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
