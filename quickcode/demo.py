"""`quickcode demo`: the whole stack on the embedded default, as a developer would meet it.

Starts the backend (real vLLM on the profile a bare `quickcode serve` picks, or `--profile`), starts the
language server, opens a real source file the models never saw in training (a held-out standard-library
module), types part of it keystroke by keystroke as VS Code would send it, accepts suggestions that match what
comes next, and prints what was completed, the keystrokes it saved and how fast. The last line of output is
one JSON object of headline figures.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sysconfig
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from quickcode.backend.launch import RunningBackend, start_backend, stop_backend
from quickcode.protocol.stats import percentile

REPO = Path(__file__).resolve().parent.parent
console = Console(stderr=True, width=130)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None,
                   help="use a running backend (ws://host:port/v1/ws) instead of starting one")
    p.add_argument("--file", type=Path, default=None,
                   help="source file to type (default: a held-out stdlib module)")
    p.add_argument("--prefill-lines", type=int, default=40,
                   help="lines already in the file when it is opened")
    p.add_argument("--chars", type=int, default=700, help="characters to type")
    p.add_argument("--style", choices=["vscode", "neovim", "neovim-pause"], default="vscode",
                   help="how the editor asks: VS Code's way, the Neovim plugin's (every change, no "
                        "cancel), or Neovim's own (200 ms after the last key)")
    p.add_argument("--speed", type=float, default=1.5, help="typing speed multiple (1 ≈ 55 words/minute)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", choices=("auto", "default", "light"), default="auto",
                   help="the embedded profile the backend serves (auto: as a bare `quickcode serve` does)")


def heldout_file() -> Path:
    """A standard-library module held out of the models' training (named in
    models/target/quickcode_train.json)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    try:
        from quickcode.backend.assets import models_dir

        mods = json.loads((models_dir() / "target" / "quickcode_train.json").read_text())["heldout_modules"]
    except (OSError, KeyError, ValueError):
        mods = []
    for m in mods:
        if m.startswith("stdlib:"):
            name = m.split(":", 1)[1]
            for cand in (stdlib / f"{name}.py", stdlib / name / "__init__.py"):
                if cand.is_file() and cand.stat().st_size > 4000:
                    return cand
    return stdlib / "textwrap.py"


def start_demo_backend(log_path: Path, profile: str = "auto") -> RunningBackend:
    t0 = time.monotonic()
    with console.status("[bold]starting the backend (vLLM engine)…") as status:
        b = start_backend(log_path, f"profile={profile}", on_wait=lambda s: status.update(
            f"[bold]starting the backend (vLLM engine)… {s:.0f} s"))
    ready = _readyz(b.http_url)
    console.print(f"backend ready in {time.monotonic() - t0:.1f} s: profile {ready.get('profile')} "
                  f"({ready.get('profile_why')}), {ready.get('precision')} {ready.get('target')} "
                  f"(log {log_path.relative_to(REPO)})")
    return b


def _readyz(http_url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"{http_url}/readyz", timeout=5) as r:
        return json.loads(r.read())


def _pct(xs: list[float], q: float) -> float:
    return round(percentile(xs, q), 1)


async def session(url: str, path: Path, args: argparse.Namespace) -> dict:
    from quickcode.benchmarks.editor_sim import SimEditor, TypingModel, lsp_command

    lines = path.read_text().splitlines(keepends=True)
    start = "".join(lines[: args.prefill_lines])
    target = "".join(lines[args.prefill_lines:])[: args.chars]
    log = REPO / "artifacts" / "logs" / "demo-lsp.log"
    ed = SimEditor(lsp_command(), env={"QUICKCODE_ENDPOINTS": url, "QUICKCODE_LSP_LOG": str(log)},
                   style=args.style, seed=args.seed)
    await ed.start()
    ed.open(path.resolve().as_uri(), start)
    for _ in range(100):          # the server connects to the backend after `initialized`
        st = await ed.command("quickcode.status")
        if getattr(st, "connected", False) or (isinstance(st, dict) and st.get("connected")):
            break
        await asyncio.sleep(0.1)
    console.print(f"typing {len(target)} characters of [bold]{path.name}[/] after line {args.prefill_lines}, "
                  f"as {args.style} would send them…")
    shown_before = 0

    def progress(i: int, n: int) -> None:
        nonlocal shown_before
        if i % 100 == 0:
            console.print(f"  {i}/{n} characters typed")

    res = await ed.type_text(target, TypingModel(speed=args.speed), progress=progress)
    await asyncio.sleep(0.3)
    stats = await ed.command("quickcode.stats")
    stats = stats if isinstance(stats, dict) else _obj(stats)
    await ed.stop()
    return {"res": res, "stats": stats, "target": target}


def _obj(o) -> dict:
    if hasattr(o, "_asdict"):
        return {k: _obj(v) for k, v in o._asdict().items()}
    if isinstance(o, list):
        return [_obj(x) for x in o]
    return o


def run(args: argparse.Namespace) -> int:
    path = args.file or heldout_file()
    backend = None
    url = args.url
    if url is None:
        backend = start_demo_backend(REPO / "artifacts" / "logs" / "demo-backend.log", args.profile)
        url = backend.ws_url
    try:
        out = asyncio.run(session(url, path, args))
    finally:
        if backend is not None:
            stop_backend(backend)
    res, stats = out["res"], out["stats"]
    falls = [w for w in stats.get("waterfalls", []) if w.get("client_first_chunk_ms")]

    table = Table(title="accepted completions (typed by quickcode instead of the developer)")
    table.add_column("#", justify="right")
    table.add_column("completion")
    for n, text in enumerate(res.accepted_texts, 1):
        table.add_row(str(n), repr(text)[:100])
    console.print(table)

    t2 = Table(title="backend requests: time to first chunk at the language server")
    for col in ("id", "first chunk ms", "engine TTFT ms", "queue ms", "network ms", "prompt/cached tokens",
                "out tokens", "finish"):
        t2.add_column(col)
    for w in falls[-12:]:
        t2.add_row(w["id"], f"{w['client_first_chunk_ms']:.1f}", f"{w.get('ttft_ms', 0):.1f}",
                   f"{w.get('queue_ms', 0):.1f}", f"{w.get('network_ms', 0):.1f}",
                   f"{w.get('prompt_tokens', 0)}/{w.get('cached_tokens', 0)}",
                   str(w.get("output_tokens", "")), str(w.get("finish", w.get("lost", ""))))
    console.print(t2)

    first = [w["client_first_chunk_ms"] for w in falls]
    headline = {
        "file": path.name, "typed_chars": res.typed_chars, "keystrokes": res.keystrokes,
        "editor_requests": res.requests, "backend_requests": stats.get("backend_requests"),
        "suggestions_shown": res.shown, "accepted": res.accepted, "accepted_chars": res.accepted_chars,
        # accepted characters less the keys that took them, per character of the text written
        "keystrokes_saved": res.keys_saved,
        "keystrokes_saved_per_char": round(res.keys_saved / max(1, len(out["target"])), 3),
        "share_of_text_from_completions":
            round(res.accepted_chars / max(1, res.accepted_chars + res.typed_chars), 3),
        "served_from_cache": stats.get("served_cache"), "served_inflight": stats.get("served_inflight"),
        "first_chunk_ms_p50": _pct(first, 50), "first_chunk_ms_p95": _pct(first, 95),
        "pause_to_ghost_ms_p50": _pct(res.pause_to_ghost_ms, 50),
        "pause_to_ghost_ms_p95": _pct(res.pause_to_ghost_ms, 95),
        "file_matches_source": res.final_text.endswith(out["target"]),
    }
    console.print(f"\n[bold]{res.accepted} completions accepted[/], {res.accepted_chars} characters "
                  f"({headline['share_of_text_from_completions']:.0%} of the text); [bold]{res.keys_saved} "
                  f"keystrokes saved[/] ({headline['keystrokes_saved_per_char']:.0%} of the text's "
                  f"{len(out['target'])} characters); first chunk p50 "
                  f"{headline['first_chunk_ms_p50']} ms, p95 {headline['first_chunk_ms_p95']} ms")
    print(json.dumps(headline), flush=True)
    return 0
