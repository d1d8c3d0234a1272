"""`quickcode bench cold`: the time to the first streamed chunk of a cold prompt through the product's own
`POST /v1/completions` — distinct windows of held-out code (`--tokens` tokens each, by the served model's
tokenizer: nothing of them in the prefix cache), one at a time, after one untimed request that warms the
engine up. Issue 14's budget for a cold 1,000-token prompt: 600 ms on the 2-core CPU.

A running backend (`--url http://host:port`), or one started here with a config and overrides (`--config
FILE`, `--set profile=light`), so two configurations can be compared one after the other.
"""
from __future__ import annotations

import argparse
import sysconfig
import tomllib
from pathlib import Path

from quickcode.benchmarks.report import Report, md_table, percentile

BUDGET_MS = 600.0
FILES = ["textwrap.py", "shlex.py", "plistlib.py", "webbrowser.py", "codecs.py", "pdb.py", "types.py", "signal.py",
         "contextvars.py", "wsgiref/handlers.py", "sqlite3/__init__.py", "curses/__init__.py"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="a running backend (http://host:port); default: start one")
    p.add_argument("--config", type=Path, default=None, help="a TOML config for the backend started here")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the backend started here (repeatable)")
    p.add_argument("--tokenizer", type=Path, default=None,
                   help="the served model's folder (its tokenizer.json; default: the one the settings serve)")
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--prompts", type=int, default=12)
    p.add_argument("--out", type=Path, default=None, help="write the report here (default benchmarks/reports/)")


def prompts(tokenizer_dir: Path, n: int, tokens: int) -> list[str]:
    """`n` distinct windows of `tokens` tokens of held-out standard-library modules."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    ids = [tok.encode((stdlib / f).read_text(), add_special_tokens=False).ids for f in FILES]
    out = []
    for k in range(1 + n // len(FILES)):             # windows a file apart, then further into each file
        for file_ids in ids:
            window = file_ids[500 + 2 * k * tokens:][:tokens]
            if len(window) == tokens and len(out) < n:
                out.append(tok.decode(window))
    if len(out) < n:
        raise SystemExit(f"only {len(out)} distinct {tokens}-token windows in {len(FILES)} modules")
    return out


def first_chunk_ms(client, http: str, prompt: str) -> float:
    """The client-side time to the first chunk of a greedy 4-token completion (quickcode/benchmarks/quality.py `complete`)."""
    from quickcode.benchmarks.quality import complete

    ms = complete(client, http, prompt, "", 4)["ttfc_ms"]
    if ms is None:
        raise RuntimeError("the completion streamed no text")
    return ms


def run(args: argparse.Namespace) -> dict:
    settings = dict(kv.split("=", 1) for kv in args.set)
    config = tomllib.loads(args.config.read_text()) if args.config else {}
    if args.tokenizer is None:
        from quickcode.backend.settings import Settings

        model = Settings(**{**config, **settings}).target_path   # the folder the backend started here serves
    else:
        model = Path(args.tokenizer)
    texts = prompts(model, args.prompts + 1, args.tokens)
    report = Report("cold", f"Cold {args.tokens}-token prompts through /v1/completions: time to the first chunk",
                    out=args.out)
    backend, http = None, args.url
    if http is None:
        from quickcode.backend.launch import start_backend

        kvs = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in {**config, **settings}.items()]
        backend = start_backend(report.dir / "cold-backend.log", *kvs)
        http = backend.http_url
    import httpx

    try:
        with httpx.Client() as client:
            first_chunk_ms(client, http, texts[0])             # warms the engine up: untimed
            times = [first_chunk_ms(client, http, t) for t in texts[1:]]
    finally:
        if backend is not None:
            from quickcode.backend.launch import stop_backend

            stop_backend(backend)
    p50, p95 = percentile(times, 50), percentile(times, 95)
    where = f"`{args.url}`" if args.url else f"started here: config `{args.config}`, settings `{settings or {}}`"
    report.add(f"Backend: {where}; tokenizer of `{model}`. {len(times)} distinct prompts of exactly {args.tokens} "
               f"tokens (held-out standard-library modules), one at a time, after one untimed warm-up request; "
               f"`max_tokens` 4, greedy, streamed.\n\n"
               + md_table(["figure", "value"], [["first chunk p50 ms", p50], ["first chunk p95 ms", p95],
                                                ["max ms", max(times)], [f"budget {BUDGET_MS:.0f} ms met (p50)",
                                                                         "yes" if p50 <= BUDGET_MS else "no"]])
               + "\n\nEach prompt, ms: " + ", ".join(f"{t:.0f}" for t in times))
    return report.finish({"prompts": len(times), "tokens": args.tokens, "p50_ms": round(p50, 1),
                          "p95_ms": round(p95, 1), "max_ms": round(max(times), 1),
                          "budget_ms": BUDGET_MS, "p50_within_budget": p50 <= BUDGET_MS,
                          "config": str(args.config) if args.config else None, "settings": settings})
