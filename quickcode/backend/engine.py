"""What the completion service needs from an inference engine: the `Engine` protocol, its stream item `Delta`
and its step statistics `EngineStats`.

Three engines implement it: `quickcode.backend.vllm_engine.VllmEngine` (vLLM's AsyncLLM in this process: what
`quickcode serve` runs by default), `quickcode.backend.remote_engine.RemoteEngine` (an OpenAI-compatible vLLM
server or router: `engine = "openai"`) and `quickcode.backend.fake_engine.FakeEngine` (scripted tokens on an
injected clock: tests of our own code in milliseconds). The service, session and OpenAI endpoint import only
this module, never vLLM.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import AsyncIterator, Protocol

from tokenizers import Tokenizer

from quickcode.backend.fim_templates import FimTemplate, reads_markers_as_text
from quickcode.backend.model_info import require_model_folder
from quickcode.backend.settings import Settings


log = logging.getLogger("quickcode.engine")


@dataclass
class EngineStats:
    """Engine-wide counters, updated on every engine step (vLLM: its stat-logger hook, in the frontend
    process)."""
    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: float = 0.0
    prefix_queries: int = 0          # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0             # ... of which found
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)
    steps: int = 0
    updated_s: float = 0.0
    # requests the engine itself finished, by its finish reason ("stop", "length"): an aborted request is
    # never counted here — that, and the running/waiting counts back at 0, is how a test sees an abort
    # reach the engine
    finished: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Delta:
    """One streamed step of one request: new text, and on the last one the finish and its statistics."""
    text: str
    num_tokens: int
    finish_reason: str | None = None   # vLLM's: "stop" | "length" | "abort"
    # prompt tokens found in the prefix cache: on the first delta (embedded), or on the last (a remote server
    # says it in its final usage)
    num_cached_tokens: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0


class Engine(Protocol):
    """An engine the lifespan starts (`start` blocks: it runs in a thread) and stops, and the service
    streams from.

    Contract of `generate`: it yields `Delta`s until one carries a `finish_reason`; cancelling the
    consumer, or `abort(request_id)`, ends the engine request (it stops producing tokens and leaves the
    running count)."""
    stats: EngineStats
    tokenizer: Tokenizer | None
    template: FimTemplate | None
    start_error: str | None          # set when `start` failed: the engine will never serve
    started_s: float | None          # how long `start` took
    max_model_len: int
    dtype: str                       # what the weights compute in, once started ("" before; the fake: "")

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    @property
    def ready(self) -> bool: ...

    @property
    def dead(self) -> bool:
        """Gone for good (failed to start, or died): only a restart of the process cures it."""

    @property
    def error(self) -> str | None: ...

    def generate(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str],
                 temperature: float, priority: int, cache_salt: str | None = None,
                 healed: str = "") -> AsyncIterator[Delta]:
        """`cache_salt`: the tenant's salt (quickcode/backend/tenancy.py): prefix-cache hits only among
        requests with the same salt (None: the shared cache). `healed`: the output must start with this text,
        written by tokens that agree with it (token healing, quickcode/backend/fim.py `heal`; "" none)."""

    async def sample(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str], n: int,
                     temperature: float, seed: int, priority: int, cache_salt: str | None = None,
                     healed: str = "", min_tokens: int = 0) -> list[tuple[str, int]]:
        """`n` whole completions (text, the stop string that ended it included; tokens) of one prompt, at
        `temperature` with `seed` (0.0: greedy). `min_tokens`: no stop string ends one before that. Cancelling
        the caller aborts them."""

    async def logprob_sums(self, request_id: str, windows: list[tuple[list[int], int]], priority: int,
                           cache_salt: str | None = None) -> list[float]:
        """For each (ids, first): Σ log P(ids[i] | ids[:i]) for i ≥ first (quickcode/backend/rerank.py)."""

    async def abort(self, request_id: str) -> None: ...


def load_tokenizer(settings: Settings) -> tuple[Tokenizer, FimTemplate]:
    """The target model folder's tokenizer and FIM template (the prompt is built from ids on our side)."""
    folder = settings.target_path
    require_model_folder(folder, settings.target_setting, ("config.json", "tokenizer.json"))
    tok = reads_markers_as_text(Tokenizer.from_file(str(folder / "tokenizer.json")))
    template = FimTemplate.load(settings.target_path, tok, settings.fim_order, settings.fim_template)
    log.info("FIM template %s (order %s)", template.name, template.order)
    return tok, template
