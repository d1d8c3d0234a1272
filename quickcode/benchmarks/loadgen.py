"""Load-generation kit of the backend benchmarks: code prompts of N tokens, a WebSocket client (frames through
quickcode/protocol/'s codec), backends (started by quickcode/backend/launch.py), metrics."""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
import resource
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from prometheus_client.parser import text_string_to_metric_families

from quickcode.backend.launch import RunningBackend, backend_at, start_backend
from quickcode.protocol import (PROTOCOL_VERSION, Cancel, Chunk, Complete, Done, Error, Hello, Priority, ProtocolError, Welcome,
                                decode, encode)

Backend = RunningBackend          # a `quickcode serve` the benchmark started, or one given by URL (`backend_from_url`)
backend_from_url = backend_at

REPO = Path(__file__).resolve().parents[2]


# ── prompts: real code cut to a token length ─────────────────────────────────────────────────────────────────

class CodeCorpus:
    """Python source (the standard library, then this repo) tokenized once with the target's tokenizer; a
    prompt of N tokens is the text of N consecutive tokens starting at a line start."""

    def __init__(self, tokenizer_path: Path | None = None, max_chars: int = 1_200_000, seed: int = 0):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_path or REPO / "models" / "target" / "tokenizer.json"))
        files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")) + sorted(REPO.glob("quickcode/backend/*.py"))
        parts, total = [], 0
        for f in files:
            try:
                text = f.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            parts.append(text)
            total += len(text)
            if total >= max_chars:
                break
        self.text = "\n".join(parts)
        enc = tok.encode(self.text)
        self.offsets = [o[0] for o in enc.offsets]
        self.n_tokens = len(self.offsets)
        # token indexes that start a line: prompts start there, like a file's head
        self.line_starts = [i for i, o in enumerate(self.offsets) if o == 0 or self.text[o - 1] == "\n"]
        self.rng = random.Random(seed)

    def prompt(self, n_tokens: int, start: int | None = None) -> tuple[str, int]:
        """(text of about `n_tokens` tokens, start token index). Different starts make prefix-cache misses."""
        n_tokens = max(1, min(n_tokens, self.n_tokens - 1))
        if start is None:
            hi = self.n_tokens - n_tokens - 1
            i = self.rng.randrange(len(self.line_starts))
            start = min(self.line_starts[i], hi)
        end = min(start + n_tokens, self.n_tokens - 1)
        return self.text[self.offsets[start]:self.offsets[end]], start


# ── a WebSocket client that keeps many requests in flight on one session ─────────────────────────────────────

@dataclass
class Outcome:
    """One request as the client saw it. Times in seconds (perf_counter); the server's Timing in ms."""
    id: str
    user: str
    prompt_tokens: int
    t_send: float
    t_first: float | None = None     # first chunk
    t_end: float | None = None       # done/error
    finish: str = ""                 # done's finish_reason, or "error:<code>"
    chunks: int = 0
    text: str = ""
    timing: dict = field(default_factory=dict)

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_send

    @property
    def total_s(self) -> float | None:
        return None if self.t_end is None else self.t_end - self.t_send


class Session:
    """One WebSocket session (a synthetic user or editor). `complete` sends a request and returns its Outcome
    object at once; `wait(id)` awaits its terminal frame."""

    _ids = itertools.count()

    def __init__(self, url: str, user: str = ""):
        self.url, self.user = url, user
        self.ws = None
        self.outcomes: dict[str, Outcome] = {}
        self._done: dict[str, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self.session_id = ""
        self.other_frames: list = []      # protocol messages of no request of ours (e.g. session errors)

    async def open(self, open_timeout_s: float = 30.0) -> "Session":
        self.ws = await websockets.connect(self.url, open_timeout=open_timeout_s, max_size=1 << 24,
                                           ping_interval=None, compression=None)
        await self.ws.send(encode(Hello(protocol_version=PROTOCOL_VERSION, client="quickcode-bench", user=self.user)).decode())
        welcome = decode(await asyncio.wait_for(self.ws.recv(), open_timeout_s), 1 << 24)
        if not isinstance(welcome, Welcome):
            raise RuntimeError(f"no welcome: {welcome}")
        self.session_id = welcome.session_id
        self._reader = asyncio.create_task(self._read())
        return self

    def complete(self, prefix: str, *, suffix: str = "", max_tokens: int = 16, priority: str = "normal",
                 prompt_tokens: int = 0, stop: list[str] | None = None, rid: str | None = None) -> Outcome:
        rid = rid or f"r{next(self._ids)}"
        out = Outcome(rid, self.user, prompt_tokens, time.perf_counter())
        self.outcomes[rid] = out
        self._done[rid] = asyncio.get_running_loop().create_future()
        frame = Complete(id=rid, prefix=prefix, suffix=suffix, max_tokens=max_tokens, priority=Priority(priority),
                         language="python", stop=list(stop or []))
        asyncio.ensure_future(self.ws.send(encode(frame).decode()))
        return out

    async def cancel(self, rid: str) -> None:
        await self.ws.send(encode(Cancel(id=rid)).decode())

    async def wait(self, rid: str, timeout_s: float | None = None) -> Outcome:
        await asyncio.wait_for(asyncio.shield(self._done[rid]), timeout_s)
        return self.outcomes[rid]

    @property
    def pending(self) -> list[str]:
        return [k for k, f in self._done.items() if not f.done()]

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                now = time.perf_counter()
                try:
                    msg = decode(raw, 1 << 24)
                except ProtocolError as e:     # a frame this client cannot read: kept, never fatal
                    self.other_frames.append(Error(code=e.code.value, message=e.message, id=e.id))
                    continue
                out = self.outcomes.get(getattr(msg, "id", None) or "")
                if out is None:
                    self.other_frames.append(msg)
                    continue
                if isinstance(msg, Chunk):
                    if out.t_first is None:
                        out.t_first = now
                    out.chunks += 1
                    out.text += msg.text
                elif isinstance(msg, (Done, Error)):
                    out.t_end = now
                    out.finish = msg.finish_reason.value if isinstance(msg, Done) else f"error:{msg.code}"
                    out.timing = dataclasses.asdict(msg.timing) if isinstance(msg, Done) else {}
                    fut = self._done.get(out.id)
                    if fut is not None and not fut.done():
                        fut.set_result(out)
        except websockets.ConnectionClosed:
            pass
        finally:   # the session is gone: whatever had not ended stays unfinished (t_end None)
            for rid, f in self._done.items():
                if not f.done():
                    f.set_result(self.outcomes[rid])

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5)
            except (asyncio.TimeoutError, Exception):
                self._reader.cancel()


# ── backends ─────────────────────────────────────────────────────────────────────────────────────────────────

def raise_nofile() -> int:
    """Raise this process's open-files soft limit to its hard limit (10k sockets need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def bench_backend(name: str, settings: list[str], timeout_s: float = 600.0) -> Backend:
    """Start `quickcode serve --set k=v ...` on a free port (quickcode/backend/launch.py); log in artifacts/logs/bench-NAME.log."""
    return start_backend(REPO / "artifacts" / "logs" / f"bench-{name}.log", *settings, timeout_s=timeout_s)


# ── /metrics ─────────────────────────────────────────────────────────────────────────────────────────────────

def scrape(http_url: str) -> dict[str, float]:
    """The backend's /metrics → {'name{labels}': value} (samples only)."""
    with urllib.request.urlopen(f"{http_url}/metrics", timeout=10) as r:
        return samples(r.read().decode())


def samples(text: str) -> dict[str, float]:
    """Prometheus text → {'name{labels}': value}, read by prometheus_client's parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def histogram(samples: dict[str, float], name: str, since: dict[str, float] | None = None) -> list[tuple[float, float]]:
    """[(upper bound le, cumulative count)] of histogram `name`, minus an earlier scrape `since`."""
    rows = []
    prefix = f'{name}_bucket{{le="'
    for k, v in samples.items():
        if k.startswith(prefix):
            le = k[len(prefix):].split('"')[0]
            rows.append((float("inf") if le == "+Inf" else float(le), v - (since or {}).get(k, 0.0)))
    return sorted(rows)


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """Prometheus-style quantile (q in 0..1) by linear interpolation inside the bucket; NaN when empty."""
    if not buckets or buckets[-1][1] <= 0:
        return float("nan")
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 0.0)
        prev_le, prev_c = le, c
    return prev_le


def share_within(buckets: list[tuple[float, float]], le: float) -> float:
    """Fraction of observations ≤ `le` (exact when `le` is a bucket bound)."""
    total = buckets[-1][1] if buckets else 0
    return next((c for b, c in buckets if b >= le - 1e-12), total) / total if total else float("nan")


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def finite(obj):
    """NaN → None, recursively, so the headline is valid JSON."""
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [finite(v) for v in obj]
    return obj
