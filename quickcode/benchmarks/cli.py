"""`quickcode bench NAME` and `quickcode report`: each benchmark is a module with `add_arguments(parser)` and
`run(args) -> dict` (the headline figures; the module writes its report through
quickcode/benchmarks/report.py).
"""
from __future__ import annotations

import argparse
import importlib

BENCHES = {
    "trace": ("quickcode.benchmarks.trace", "replay a code-completion trace (Azure format) over WebSockets"),
    "overload": ("quickcode.benchmarks.overload", "1-5x the sustainable rate: our scheduler vs a tuned capped FIFO and vLLM's "
                                         "priority scheduling"),
    "sessions": ("quickcode.benchmarks.sessions", "10,000 concurrent WebSocket sessions held by one backend"),
    "soak": ("quickcode.benchmarks.soak", "simulated editors and abusive clients on one backend for an hour: nothing may grow"),
    "overhead": ("quickcode.benchmarks.overhead", "what WebSocket + scheduler add over raw AsyncLLM (or over a vLLM "
                                        "server called directly: --engine openai); tokenization"),
    "typing": ("quickcode.benchmarks.typing", "replay typing through the real language server vs a naive baseline"),
    "cold": ("quickcode.benchmarks.cold", "cold prompts through /v1/completions: time to the first chunk vs the 600 ms budget"),
    "neovim": ("quickcode.benchmarks.neovim_typing", "a developer typing in a real Neovim: asked at pauses vs on every change"),
    "vscode": ("quickcode.benchmarks.vscode_typing", "the same developer typing in a real VS Code (code-server) with the extension"),
    "nes": ("quickcode.benchmarks.nes", "next-edit suggestions on held-out real edit sequences vs plain inline "
                                       "completion: exact next edits, characters supplied, latency"),
    "invoke": ("quickcode.benchmarks.invoke", "an invoked suggestion (trigger-suggestion key) per arm: exact lines, latency"),
    "draft": ("quickcode.benchmarks.draft", "draft acceptance per code pattern (PyTorch and vLLM), speed-ups, INT8"),
    "quality": ("quickcode.benchmarks.quality", "HumanEval single-line infilling (exact, pass@1), idiom lines, top-1, typing: "
                                      "old vs current models"),
    "train": ("quickcode.benchmarks.train", "training throughput: the original step vs the fast path (tokens/s, FLOP/s)"),
    "sizes": ("quickcode.benchmarks.sizes", "model sizes: vLLM latency (cold, typing) vs the budget, loss vs training compute"),
    "copy": ("quickcode.benchmarks.copy_mix", "a copy (cache) model mixed into the target's distribution: exact first lines"),
    "tokenizer": ("quickcode.benchmarks.tokenizer", "BPE vocabulary sizes: characters per token vs embedding cost"),
    "faults": ("quickcode.benchmarks.faults", "faults while many developers type (engine killed, link down, drain, log disk "
                                    "full): recovery, errors shown, hangs, cross-user answers"),
}


def register(sub: argparse._SubParsersAction, only: str | None = None) -> None:
    if only in (None, "bench"):
        _register_bench(sub)
    if only in (None, "report"):
        _register_report(sub)


def _register_bench(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmarks: a markdown report, then one JSON line of headline figures")
    bsub = bench.add_subparsers(dest="bench_name", required=True)
    for name, (module, helptext) in BENCHES.items():
        p = bsub.add_parser(name, help=helptext)
        p.set_defaults(func=_runner(module), bench_module=module)
        try:
            importlib.import_module(module).add_arguments(p)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(func=_missing(name))


def _register_report(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("report", help="latency breakdown table (component, p50, p95, share) from a running backend")
    rep.set_defaults(func=_runner("quickcode.benchmarks.breakdown"), bench_module="quickcode.benchmarks.breakdown")
    try:
        importlib.import_module("quickcode.benchmarks.breakdown").add_arguments(rep)
    except ModuleNotFoundError as e:
        if e.name != "quickcode.benchmarks.breakdown":
            raise


def _runner(module: str):
    def run(args: argparse.Namespace) -> int:
        importlib.import_module(module).run(args)
        return 0
    return run


def _missing(name: str):
    def run(args: argparse.Namespace) -> int:
        raise SystemExit(f"benchmark {name!r} is not built yet")
    return run
