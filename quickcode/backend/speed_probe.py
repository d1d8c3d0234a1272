"""`quickcode probe`: how fast the default profile answers typing-size requests on this machine, recorded for
`profile = "auto"` (quickcode/backend/profiles.py `choose_profile`), which serves the default only where it
answers within the typing budget and the light profile elsewhere. Set-up runs it once the default is built
(scripts/setup.sh); the record is tied to the CPU and the build it measured, so an image or a folder copied to
another machine is measured again there, not trusted.

The requests are what a language server sends while a developer types (quickcode/lsp_client/config.py): the
cursor a few characters further each time through a held-out standard-library module, the text around it as
prompt and suffix in the server's windows, a word's worth of tokens (`word_max_tokens`), one at a time on a
warm engine. The figure is the time to the end of each answer, when an editor can show it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import sysconfig
import time
from datetime import datetime, timezone
from pathlib import Path

from quickcode.backend.assets import built_models_dir
from quickcode.backend.cpu_features import cpu_flags, cpu_model, native_bf16_flags
from quickcode.backend.profiles import choose_profile, default_built, has_gpu, profile_settings

# the case study's latency targets (TTFT P50 < 100 ms, P95 < 200 ms), here for the whole answer
BUDGET_P50_MS = 100.0
BUDGET_P95_MS = 200.0
RECORD_NAME = "speed-probe.json"
FILE = "textwrap.py"                    # held out of every model's training (quickcode/benchmarks/cold.py)
STEP_CHARS = 4                          # a short burst of typing between two pauses
WORD_TOKENS = 2                         # quickcode/lsp_client/config.py `word_max_tokens`
PREFIX_CHARS, SUFFIX_CHARS = 3000, 800  # the language server's windows (quickcode/lsp_client/config.py)


def record_path() -> Path:
    return built_models_dir() / RECORD_NAME


def this_machine() -> dict:
    """What the record is valid for: the CPU's model, the cores this process may use, its native bf16."""
    return {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)), "bf16": native_bf16_flags(cpu_flags())}


def default_target() -> Path:
    """The folder the default profile serves."""
    return Path(profile_settings("default")["model_int8"])


def build_stamp(target_dir: Path) -> str:
    """The served weights' size and modification time: a rebuilt default is measured again."""
    try:
        st = (target_dir / "model.safetensors").stat()
    except OSError:
        return ""
    return f"{st.st_size}:{int(st.st_mtime)}"


def within_budget(p50_ms: float, p95_ms: float) -> bool:
    return p50_ms <= BUDGET_P50_MS and p95_ms <= BUDGET_P95_MS


def valid_record(record: dict | None, machine: dict, stamp: str) -> dict | None:
    """The record if it measured this machine and this build, else None (pure)."""
    if not record or record.get("machine") != machine or not stamp or record.get("build") != stamp:
        return None
    if not all(isinstance(record.get(k), (int, float)) for k in ("answer_p50_ms", "answer_p95_ms")):
        return None
    return record


def read_record() -> dict | None:
    """This machine's record for the default as built here, or None (not probed, or probed elsewhere)."""
    try:
        record = json.loads(record_path().read_text())
    except (OSError, ValueError):
        return None
    return valid_record(record, this_machine(), build_stamp(default_target()))


def typing_requests(n: int) -> list[tuple[str, str]]:
    """(prefix, suffix) at `n` cursor positions `STEP_CHARS` apart, as the module is typed from a third in.
    The prefix window starts at one line throughout, as the language server's does between its moves (which
    it prefills ahead: quickcode/lsp_client/warmup.py)."""
    text = (Path(sysconfig.get_paths()["stdlib"]) / FILE).read_text()
    start = text.index("\n", len(text) // 3) + 1
    window_start = text.index("\n", start - PREFIX_CHARS) + 1
    typed_end = start + n * STEP_CHARS
    suffix = text[typed_end:typed_end + SUFFIX_CHARS]
    return [(text[window_start:pos], suffix) for pos in range(start + STEP_CHARS, typed_end + 1, STEP_CHARS)]


def answer_ms(client, http_url: str, prefix: str, suffix: str) -> float:
    """The client-side time to the end of one greedy streamed answer through `POST /v1/completions`."""
    body = {"prompt": prefix, "suffix": suffix, "max_tokens": WORD_TOKENS, "temperature": 0.0, "stream": True}
    t0 = time.perf_counter()
    with client.stream("POST", f"{http_url}/v1/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            raise RuntimeError(f"/v1/completions answered {r.status_code}: {r.read()[:300]!r}")
        for _ in r.iter_lines():
            pass
    return (time.perf_counter() - t0) * 1000


def measure(http_url: str, n: int, warmup: int = 3) -> list[float]:
    import httpx

    cases = typing_requests(n + warmup)
    with httpx.Client() as client:
        for pre, suf in cases[:warmup]:              # a fresh engine's first requests pay one-off costs
            answer_ms(client, http_url, pre, suf)
        times = []
        for i, (pre, suf) in enumerate(cases[warmup:], 1):
            times.append(answer_ms(client, http_url, pre, suf))
            print(f"\r[probe] {i}/{n} requests, last {times[-1]:.0f} ms", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return times


def make_record(times: list[float], machine: dict, stamp: str, now: datetime) -> dict:
    p50, p95 = statistics.median(times), statistics.quantiles(times, n=20, method="inclusive")[18]
    return {"machine": machine, "build": stamp, "requests": len(times), "answer_p50_ms": round(p50, 1),
            "answer_p95_ms": round(p95, 1), "budget_p50_ms": BUDGET_P50_MS, "budget_p95_ms": BUDGET_P95_MS,
            "within_budget": within_budget(p50, p95), "measured": now.strftime("%Y-%m-%d %H:%M UTC")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=40, help="timed typing-size requests (after 3 untimed)")
    p.add_argument("--force", action="store_true", help="measure even if this machine's record is there")


def run(args: argparse.Namespace) -> int:
    from quickcode.backend.launch import start_backend, stop_backend

    if has_gpu():
        print("[probe] a GPU: profile = \"auto\" serves the default here, nothing to measure",
              file=sys.stderr)
        return 0
    if not default_built():
        raise SystemExit(f"quickcode probe: the default's model is not built in {built_models_dir()} "
                         "(scripts/setup.sh model)")
    record = read_record()
    if record is None or args.force:
        print("[probe] starting the default profile's backend (a minute or more: it compiles)",
              file=sys.stderr)
        log = built_models_dir() / "speed-probe-backend.log"
        backend = start_backend(log, "profile=default", timeout_s=900)
        try:
            times = measure(backend.http_url, args.requests)
        finally:
            stop_backend(backend)
        record = make_record(times, this_machine(), build_stamp(default_target()), datetime.now(timezone.utc))
        try:
            record_path().write_text(json.dumps(record, indent=1) + "\n")
        except OSError as e:                         # e.g. an image's read-only folder: measured, not kept
            print(f"[probe] could not keep the record in {record_path()}: {e}", file=sys.stderr)
    served, why = choose_profile("auto", native_bf16_flags(cpu_flags()), gpu=False, probe=record)
    print(f"[probe] profile = \"auto\" serves {served} here: {why} ({record_path()})", file=sys.stderr)
    print(json.dumps(record))
    return 0
