"""`FakeEngine`: the `Engine` with scripted tokens on an injected clock, for tests of our own code (session,
service, scheduler, OpenAI endpoint, auth, limits) in milliseconds, without vLLM.

It keeps the engine contract the service relies on: at most `max_running` requests run at once and the rest
wait (lower priority value first, then arrival); a running request yields its script's tokens one by one (the
first after `ttft_s`, each next after `per_token_s`, on `clock`), and ends with "length" at `max_tokens`,
"stop" at a stop string or the end of its script; `abort(id)` or a cancelled consumer ends it as "abort".
Every request is recorded with how it ended (`requests`), and `stats` counts running/waiting requests and
steps as vLLM's do — so a test proves an abort by what the engine reports, not by a race with the clock.

With a `ManualClock`, time moves only when the test says so: a request can be held running for as long as the
test needs, on any machine.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, Iterable

from quickcode.backend.engine import Delta, EngineStats, load_tokenizer
from quickcode.backend.fake_clock import Clock, ManualClock, RealClock  # noqa: F401 — for the tests
from quickcode.backend.model_info import served_max_model_len
from quickcode.backend.settings import Settings

DEFAULT_TOKENS = ("    return", " a", " +", " b", "\n")


@dataclass
class FakeRequest:
    """One engine request as the engine saw it. `ended_by`: "abort" (`abort(id)`), "cancel" (the consumer was
    cancelled or closed the stream), "engine_died", or None (it finished by itself)."""
    id: str
    prompt_ids: list[int]
    max_tokens: int
    stop: list[str]
    temperature: float
    priority: int
    arrived_s: float
    state: str = "waiting"           # waiting → running → finished
    tokens: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    ended_by: str | None = None
    started_s: float | None = None
    finished_s: float | None = None
    _wakeup: asyncio.Future | None = None   # what the request's generator awaits (a slot, or the next token)
    _seq: int = 0
    cache_salt: str | None = None    # the tenant's prefix-cache salt, as the service passed it

    @property
    def aborted(self) -> bool:
        return self.finish_reason == "abort"

    @property
    def text(self) -> str:
        return "".join(self.tokens)


class EngineDied(RuntimeError):
    pass


class FakeEngine:
    """See the module docstring. `script(prompt_text)` gives the tokens a request writes (default: a
    fixed few); `scorer(ids, first)` what `logprob_sums` says of a window; `hold_start` (a threading.Event)
    keeps `start` waiting until it is set; `start_error`
    makes it fail."""

    def __init__(self, settings: Settings | None = None, *,
                 script: Callable[[str], Iterable[str]] | None = None,
                 ttft_s: float = 0.002, per_token_s: float = 0.001, clock: Clock | None = None,
                 max_running: int | None = None, hold_start: threading.Event | None = None,
                 start_error: str | None = None, scorer: Callable[[list[int], int], float] | None = None):
        self.settings = settings or Settings()
        self.script = script or (lambda prompt: DEFAULT_TOKENS)
        self.scorer = scorer or (lambda ids, first: float(first - len(ids)))
        self.ttft_s, self.per_token_s = ttft_s, per_token_s
        self.clock = clock or RealClock()
        self.max_running = max_running or self.settings.max_num_seqs
        self.stats = EngineStats()
        self.tokenizer = None
        self.template = None
        self.start_error: str | None = None
        self.started_s: float | None = None
        self.max_model_len = 0
        self.dtype = ""
        self.requests: dict[str, FakeRequest] = {}
        self.shut_down = False
        self._hold_start = hold_start
        self._fail_start = start_error
        self._dead = False
        self._started = False
        self._seq = itertools.count()

    # ── lifecycle
    def start(self) -> None:
        t0 = time.perf_counter()
        if self._hold_start is not None:
            self._hold_start.wait()
        if self._fail_start:
            self.start_error = self._fail_start
            raise RuntimeError(self._fail_start)
        self.tokenizer, self.template = load_tokenizer(self.settings)
        config = json.loads((self.settings.target_path / "config.json").read_text())
        self.max_model_len = served_max_model_len(self.settings) or config["max_position_embeddings"]
        self.started_s = time.perf_counter() - t0
        self._started = True

    def start_like(self, other: "FakeEngine") -> None:
        """Start with a started engine's tokenizer and template (tests that start many engines load them
        once)."""
        self.tokenizer, self.template = other.tokenizer, other.template
        self.max_model_len = other.max_model_len
        self.started_s = 0.0
        self._started = True

    def shutdown(self) -> None:
        self.shut_down = True

    def die(self) -> None:
        """The engine core dies: every live request's stream raises, new ones are refused."""
        self._dead = True
        for req in self.requests.values():
            if req.state != "finished":
                self._finish(req, None, "engine_died")

    def fail(self, request_id: str) -> None:
        """One request fails in the engine (its stream raises); the engine and the other requests live on."""
        req = self.requests.get(request_id)
        if req is not None and req.state != "finished":
            self._finish(req, None, "engine_died")

    @property
    def ready(self) -> bool:
        return self._started and not self._dead

    @property
    def dead(self) -> bool:
        return bool(self.start_error) or self._dead

    @property
    def error(self) -> str | None:
        if self.start_error:
            return self.start_error
        if self._dead:
            return "engine core died"
        return None if self._started else "engine starting"

    # ── what tests read
    def by_client_id(self, rid: str) -> list[FakeRequest]:
        """The engine requests of a client's request id (the service names them `<session>:<id>`)."""
        return [r for key, r in self.requests.items() if key.rsplit(":", 1)[-1] == rid]

    @property
    def live(self) -> list[FakeRequest]:
        return [r for r in self.requests.values() if r.state != "finished"]

    # ── requests
    async def generate(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str],
                       temperature: float, priority: int, cache_salt: str | None = None,
                       healed: str = "", _script_suffix: str = "") -> AsyncIterator[Delta]:
        if self._dead:
            raise EngineDied("engine core died")
        if request_id in self.requests and self.requests[request_id].state != "finished":
            raise ValueError(f"request {request_id!r} is already running")
        req = FakeRequest(request_id, list(prompt_ids), max_tokens, list(stop or []), temperature, priority,
                          self.clock.now(), _seq=next(self._seq), cache_salt=cache_salt)
        self.requests[request_id] = req
        self._count()
        try:
            await self._admit(req)
            prompt = self.tokenizer.decode(prompt_ids) + _script_suffix
            tokens = _healed_first(iter(self.script(prompt)), healed)
            nxt = next(tokens, None)
            delay_s = self.ttft_s
            while req.state == "running":
                await self._wait(req, self.clock.sleep(delay_s))
                if req.state != "running":
                    break
                delay_s = self.per_token_s
                tok, nxt = nxt or "", next(tokens, None)   # an empty script: one end-of-text token
                finish = None
                req.tokens.append(tok)
                cut = _stop_at(req.text, req.stop)
                if cut is not None:             # vLLM leaves the stop string out of the text
                    tok = req.tokens[-1] = tok[:max(0, len(tok) - (len(req.text) - cut))]
                    finish = "stop"
                elif len(req.tokens) >= max_tokens:
                    finish = "length"
                elif nxt is None:
                    finish = "stop"
                self.stats.steps += 1
                self.stats.updated_s = self.clock.now()
                if finish:
                    self._finish(req, finish, None)
                    self.stats.finished[finish] = self.stats.finished.get(finish, 0) + 1
                yield Delta(text=tok, num_tokens=1, finish_reason=finish)
            if req.ended_by == "engine_died":
                raise EngineDied("engine core died")
            if req.ended_by == "abort":
                yield Delta(text="", num_tokens=0, finish_reason="abort")
        finally:   # cancelled, or the consumer closed the stream: vLLM aborts the request then
            if req.state != "finished":
                self._finish(req, "abort", "cancel")

    async def sample(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str], n: int,
                     temperature: float, seed: int, priority: int, cache_salt: str | None = None,
                     healed: str = "", min_tokens: int = 0) -> list[tuple[str, int]]:
        """`n` runs of `generate` at once (ids `<request_id>-<i>`), whole; sample i of a temperature > 0 is
        the script's prompt with `sample_marker(i)` appended (a script tells the samples apart by it). The
        stop string that ended one is kept (vLLM's include_stop_str_in_output); `min_tokens` as vLLM's."""
        async def one(i: int) -> tuple[str, int]:
            rid = f"{request_id}-{i}"
            text, count = "", 0
            marker = sample_marker(i) if temperature > 0 else ""
            async for d in self.generate(rid, prompt_ids, max_tokens, [], temperature, priority, cache_salt,
                                         healed, _script_suffix=marker):
                text, count = text + d.text, count + d.num_tokens
                cut = _stop_at(text[len("".join(self.requests[rid].tokens[:min_tokens])):], stop)
                if cut is not None:
                    start = len("".join(self.requests[rid].tokens[:min_tokens]))
                    stop_s = next(s for s in stop if text[start + cut:].startswith(s))
                    await self.abort(rid)
                    return text[:start + cut] + stop_s, count
            return text, count

        return list(await asyncio.gather(*(one(i) for i in range(n))))

    async def logprob_sums(self, request_id: str, windows: list[tuple[list[int], int]], priority: int,
                           cache_salt: str | None = None) -> list[float]:
        """`scorer(ids, first)` per window (default: fewer scored tokens score higher); each counts as one
        finished engine request `<request_id>-s<i>`."""
        out = []
        for i, (ids, first) in enumerate(windows):
            rid = f"{request_id}-s{i}"
            req = FakeRequest(rid, list(ids), 1, [], 0.0, priority, self.clock.now(), _seq=next(self._seq),
                              cache_salt=cache_salt)
            self.requests[rid] = req
            await self.clock.sleep(self.ttft_s)
            self._finish(req, "length", None)
            out.append(self.scorer(ids, first))
        return out

    async def abort(self, request_id: str) -> None:
        req = self.requests.get(request_id)
        if req is not None and req.state != "finished":
            self._finish(req, "abort", "abort")

    # ── internals
    async def _admit(self, req: FakeRequest) -> None:
        self._schedule()
        if req.state == "waiting":
            await self._wait(req, asyncio.get_running_loop().create_future())

    async def _wait(self, req: FakeRequest, what) -> None:
        """Wait for `what` (a slot future or a clock sleep) unless the request ends first."""
        fut = asyncio.ensure_future(what)
        req._wakeup = fut
        try:
            await asyncio.wait([fut])
        finally:
            req._wakeup = None
            if not fut.done():
                fut.cancel()

    def _schedule(self) -> None:
        """Start waiting requests while slots are free (lower priority value first, then arrival)."""
        running = sum(1 for r in self.requests.values() if r.state == "running")
        waiting = sorted((r for r in self.requests.values() if r.state == "waiting"),
                         key=lambda r: (r.priority, r._seq))
        for req in waiting[:max(0, self.max_running - running)]:
            req.state, req.started_s = "running", self.clock.now()
            if req._wakeup is not None and not req._wakeup.done():
                req._wakeup.set_result(None)
        self._count()

    def _finish(self, req: FakeRequest, reason: str | None, ended_by: str | None) -> None:
        req.state, req.finish_reason, req.ended_by = "finished", reason, ended_by
        req.finished_s = self.clock.now()
        if req._wakeup is not None and not req._wakeup.done():
            req._wakeup.cancel()
        self._schedule()

    def _count(self) -> None:
        self.stats.num_running = sum(1 for r in self.requests.values() if r.state == "running")
        self.stats.num_waiting = sum(1 for r in self.requests.values() if r.state == "waiting")


def sample_marker(i: int) -> str:
    """What `FakeEngine.sample` appends to the prompt text its script sees for sample i (temperature > 0)."""
    return f"\x00sample{i}"


def _stop_at(text: str, stop: list[str]) -> int | None:
    """Where the earliest stop string begins in `text` (vLLM leaves the stop string out of the output)."""
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(cuts) if cuts else None


def _healed_first(tokens, healed: str):
    """A script's tokens as vLLM's healing mask lets them out (quickcode/backend/heal_mask.py): the healed
    text is written first — by tokens that agree with it as they are, else put in front of the first one that
    does not."""
    for tok in tokens:
        if healed and not tok.startswith(healed):
            if healed.startswith(tok):
                healed = healed[len(tok):]
            else:
                tok, healed = healed + tok, ""
        else:
            healed = ""
        yield tok
    if healed:
        yield healed

