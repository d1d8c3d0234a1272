"""`VllmEngine`: the `Engine` on vLLM's AsyncLLM — engine arguments from settings, DELTA token streaming,
abort, engine statistics.

With quickcode/backend/vllm_logits.py (the copy model and token healing as a logits processor, loaded by vLLM
from its name), vllm_heal.py (healing when the engine speculates) and vllm_stats.py (its step statistics) the
only modules of the backend that import vLLM. The draft model rides in
`speculative_config`; prefix caching uses a small block size so that a prompt that grows by a keystroke
still hits (vLLM caches whole blocks only).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import AsyncIterator

from tokenizers import Tokenizer

from quickcode.backend.copy_model import EXTRA_KEY as COPY_KEY
from quickcode.backend.copy_model import parse_lambdas
from quickcode.backend.cpu_features import cpu_flags, served_dtype
from quickcode.backend.engine import Delta, EngineStats, load_tokenizer
from quickcode.backend.fim_templates import FimTemplate
from quickcode.backend.heal_mask import EXTRA_KEY as HEAL_KEY
from quickcode.backend.heal_mask import token_texts
from quickcode.backend.model_info import check_head_size, require_model_folder, served_max_model_len
from quickcode.backend.settings import Settings
from quickcode.backend.vllm_heal import heal_steps
from quickcode.backend.vllm_stats import stat_logger_factory

log = logging.getLogger("quickcode.engine")
ENGINE_SHUTDOWN_TIMEOUT_S = 2.0
LOGITS_FQCN = "quickcode.backend.vllm_logits:QuickcodeLogitsProcessor"   # imported in vLLM's engine process


def preload_iomp() -> None:
    """vLLM warns that speculative decoding on CPU is much slower without Intel OpenMP preloaded; the engine
    processes are spawned, so setting LD_PRELOAD here (before the engine starts) reaches them."""
    lib = Path(sys.prefix) / "lib" / "libiomp5.so"
    current = os.environ.get("LD_PRELOAD", "")
    if lib.exists() and "libiomp" not in current:
        os.environ["LD_PRELOAD"] = f"{lib}:{current}" if current else str(lib)


def check_head_sizes(s: Settings) -> None:
    """On the CPU, refuse a target or draft whose head size vLLM's CPU attention has no kernel for (it would
    die inside the engine processes with no word of why)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    for folder in [s.target_path] + ([s.draft_model] if s.spec_method == "draft" else []):
        check_head_size(Path(folder), CPUAttentionBackend.get_supported_head_sizes())


def engine_dtype(s: Settings) -> str:
    from vllm.platforms import current_platform

    return served_dtype(s.dtype, current_platform.is_cpu(), cpu_flags())


def engine_args(s: Settings):
    from vllm.engine.arg_utils import AsyncEngineArgs

    spec = None
    if s.spec_method == "draft":
        spec = {"method": "draft_model", "model": str(s.draft_model),
                "num_speculative_tokens": s.num_speculative_tokens}
    elif s.spec_method == "ngram":
        spec = {"method": "ngram", "num_speculative_tokens": s.num_speculative_tokens,
                "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    return AsyncEngineArgs(
        model=str(s.target_path), tokenizer=str(s.target_path), served_model_name=[s.served_model_name],
        dtype=engine_dtype(s), max_model_len=served_max_model_len(s), block_size=s.block_size,
        enable_prefix_caching=s.enable_prefix_caching, enforce_eager=s.enforce_eager,
        gpu_memory_utilization=s.gpu_memory_utilization, tensor_parallel_size=s.tensor_parallel_size,
        data_parallel_size=s.data_parallel_size, pipeline_parallel_size=s.pipeline_parallel_size,
        distributed_executor_backend=s.distributed_executor_backend, max_num_seqs=s.max_num_seqs,
        speculative_config=spec, scheduling_policy="priority", disable_log_stats=not s.engine_log_stats,
        per_request_spec_decode_metrics="summary" if spec else "none", seed=0,
        # a speculating engine takes no custom logits processor: it heals by allowed_token_ids (vllm_heal.py)
        logits_processors=([LOGITS_FQCN] if (parse_lambdas(s.copy_lambdas) or s.heal_token) and spec is None
                           else None),
    )


def copy_args(s: Settings, template: FimTemplate | None) -> dict:
    """The requests' `extra_args` that turn the copy model on ({}: off). The FIM template's special tokens
    never count as copied followers."""
    lambdas = parse_lambdas(s.copy_lambdas)
    if not lambdas:
        return {}
    t = template
    special = [] if t is None else [i for i in (t.prefix_id, t.suffix_id, t.middle_id, t.file_id, t.repo_id,
                                                *t.stop_ids) if i is not None]
    return {COPY_KEY: {"lambdas": list(lambdas), "max_n": s.copy_max_n, "exclude": special}}


class VllmEngine:
    """Owns one AsyncLLM. `start()` blocks for the engine start-up (run it in a thread)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.stats = EngineStats()
        self.llm = None
        self.tokenizer: Tokenizer | None = None
        self.template: FimTemplate | None = None
        self._copy_args: dict = {}
        self.start_error: str | None = None
        self.started_s: float | None = None
        self.max_model_len = served_max_model_len(settings) or 0   # vLLM's own figure once started
        self.dtype = ""
        self._stopping = False
        # request id → the id of its healing step in flight (speculating engines: vllm_heal.py), for `abort`
        self._heal_step_ids: dict[str, str] = {}

    # ── lifecycle
    def start(self) -> None:
        s = self.settings
        t0 = time.perf_counter()
        try:
            self.tokenizer, self.template = load_tokenizer(s)
            self._copy_args = copy_args(s, self.template)
            if s.heal_token and s.spec_method != "off":
                token_texts(self.tokenizer)      # the vocabulary's texts, before the first healed request
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, int(round(s.kv_cache_gib)))))
            if s.cpu_reserved_cores is not None:   # the spawned engine processes read it at start
                os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", str(s.cpu_reserved_cores))
            if s.preload_iomp and s.spec_method != "off":
                preload_iomp()
            from vllm.v1.engine.async_llm import AsyncLLM

            if s.spec_method == "draft":
                require_model_folder(Path(s.draft_model), "draft_model")
            check_head_sizes(s)
            self.llm = AsyncLLM.from_engine_args(engine_args(s),
                                                 stat_loggers=[stat_logger_factory(self.stats)])
        except Exception as e:  # the engine did not come up: /readyz stays red and says why
            self.start_error = f"{type(e).__name__}: {e}"
            raise
        self.started_s = time.perf_counter() - t0
        self.max_model_len = self.llm.model_config.max_model_len
        self.dtype = str(self.llm.model_config.dtype).removeprefix("torch.")
        log.info("engine ready in %.1f s (model %s, %s, spec %s, copy model %s, token healing %s)",
                 self.started_s, s.target_path, self.dtype, s.spec_method,
                 f"λ {s.copy_lambdas}" if self._copy_args else "off", "on" if s.heal_token else "off")
        threading.Thread(target=self._reap_on_death, args=(_engine_processes(),), daemon=True,
                         name="engine-death-reaper").start()

    def _reap_on_death(self, procs: list[tuple[int, float]]) -> None:
        """When the EngineCore dies, vLLM notices at once (`errored`), but the core's workers, orphaned,
        linger until they read their death pipe — 7 to 40 s on a loaded 2-core machine — holding the memory
        (or the GPU) a restarted engine needs. Kill the engine processes seen at start-up (pid + creation
        time)."""
        while not self.llm.errored:
            time.sleep(0.25)
        if self._stopping:
            return   # a normal shutdown: vLLM stops its own processes
        import psutil

        log.error("the engine died: /readyz is red, requests get engine_unavailable; "
                  "killing its leftover processes")
        for pid, created in procs:
            try:
                p = psutil.Process(pid)
                if p.create_time() == created:
                    p.kill()
            except psutil.Error:
                pass

    def shutdown(self) -> None:
        self._stopping = True
        if self.llm is not None:
            # the drain is over and nothing is running: after this the EngineCore is killed rather than waited
            # for (vLLM's default 5 s; a loaded machine needs all of it to tear torch down)
            self.llm.shutdown(timeout=ENGINE_SHUTDOWN_TIMEOUT_S)

    @property
    def ready(self) -> bool:
        return self.llm is not None and not self.llm.errored

    @property
    def dead(self) -> bool:
        return bool(self.start_error) or (self.llm is not None and self.llm.errored)

    @property
    def error(self) -> str | None:
        if self.start_error:
            return self.start_error
        if self.llm is not None and self.llm.errored:
            return "engine core died"
        return None if self.llm is not None else "engine starting"

    # ── requests
    async def generate(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str],
                       temperature: float, priority: int, cache_salt: str | None = None,
                       healed: str = "") -> AsyncIterator[Delta]:
        """Stream deltas. Cancelling the consumer (or `abort`) aborts the engine request. `cache_salt`: the
        tenant's salt (quickcode/backend/tenancy.py) — prefix-cache hits only among requests with the same
        salt."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        if healed and self.settings.spec_method != "off":
            written: list[int] = []
            async for ids, delta in heal_steps(self, request_id, prompt_ids, healed, max_tokens, temperature,
                                               priority, cache_salt):
                written += ids
                yield delta
                if delta.finish_reason is not None:
                    return
            prompt_ids, max_tokens, healed = prompt_ids + written, max_tokens - len(written), ""
            if max_tokens <= 0:
                yield Delta(text="", num_tokens=0, finish_reason="length")
                return
        params = SamplingParams(max_tokens=max_tokens, temperature=temperature, stop=stop or None,
                                stop_token_ids=list(self.template.stop_ids) if self.template else None,
                                output_kind=RequestOutputKind.DELTA, skip_special_tokens=True,
                                extra_args=self._extra_args(healed))
        # Rendered here (cheap for ids) so that AsyncLLM takes its synchronous input path; an unrendered
        # prompt goes through the renderer's thread pool, a costlier hop (docs/decisions.md#render-ids).
        async for out in self.llm.generate(self._render(prompt_ids, cache_salt), params, request_id,
                                           priority=priority):
            c = out.outputs[0]
            sd = c.spec_decode_metrics
            yield Delta(text=c.text, num_tokens=len(c.token_ids), finish_reason=c.finish_reason,
                        num_cached_tokens=out.num_cached_tokens or 0,
                        spec_draft_tokens=sd.num_draft_tokens if sd else 0,
                        spec_accepted_tokens=sum(j * n for j, n in enumerate(sd.histogram)) if sd else 0)

    async def sample(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str], n: int,
                     temperature: float, seed: int, priority: int, cache_salt: str | None = None,
                     healed: str = "", min_tokens: int = 0) -> list[tuple[str, int]]:
        """`n` sampled completions (text with the stop string that ended it, tokens), whole (not streamed),
        from one engine request: its children share the prompt's prefill. `min_tokens`: no stop string ends
        one earlier (the given-back text may hold a stop string: a line end)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        head_text, head_ids = "", []
        if healed and self.settings.spec_method != "off":    # healed first, once for all children
            async for ids, delta in heal_steps(self, request_id, prompt_ids, healed, max_tokens, temperature,
                                               priority, cache_salt):
                head_text, head_ids = head_text + delta.text, head_ids + ids
                if delta.finish_reason is not None:
                    return [(head_text, len(head_ids))] * n
            prompt_ids, healed = prompt_ids + head_ids, ""
            max_tokens, min_tokens = max_tokens - len(head_ids), max(0, min_tokens - len(head_ids))
            if max_tokens <= 0:
                return [(head_text, len(head_ids))] * n
        params = SamplingParams(n=n, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                stop=stop or None, min_tokens=min_tokens, include_stop_str_in_output=True,
                                stop_token_ids=list(self.template.stop_ids) if self.template else None,
                                output_kind=RequestOutputKind.FINAL_ONLY, skip_special_tokens=True,
                                extra_args=self._extra_args(healed))
        final = None
        async for out in self.llm.generate(self._render(prompt_ids, cache_salt), params, request_id,
                                           priority=priority):
            final = out
        outs = sorted(final.outputs, key=lambda c: c.index) if final else []
        return [(head_text + c.text, len(head_ids) + len(c.token_ids)) for c in outs]

    async def logprob_sums(self, request_id: str, windows: list[tuple[list[int], int]], priority: int,
                           cache_salt: str | None = None) -> list[float]:
        """For each (ids, first): the sum of log P(ids[i] | ids[:i]) over i ≥ first, one engine request per
        window, all at once (vLLM batches their prefills; a prompt whose logprobs are asked for is computed
        whole, the prefix cache not read)."""
        import asyncio

        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0,
                                output_kind=RequestOutputKind.FINAL_ONLY, detokenize=False)

        async def one(i: int, ids: list[int], first: int) -> float:
            final = None
            async for out in self.llm.generate(self._render(ids, cache_salt), params, f"{request_id}-s{i}",
                                               priority=priority):
                final = out
            lps = final.prompt_logprobs if final is not None else None
            if not lps:
                return float("-inf")
            return sum(lps[j][ids[j]].logprob for j in range(max(1, first), len(ids)))

        return list(await asyncio.gather(*(one(i, ids, first) for i, (ids, first) in enumerate(windows))))

    def _render(self, prompt_ids: list[int], cache_salt: str | None):
        from vllm.inputs import TokensPrompt

        tokens = TokensPrompt(prompt_token_ids=prompt_ids)
        if cache_salt is not None:
            tokens["cache_salt"] = cache_salt
        (prompt,) = self.llm.renderer.render_cmpl([tokens])
        return prompt

    def _extra_args(self, healed: str) -> dict | None:   # what our logits processor reads (vllm_logits.py)
        if self.settings.spec_method != "off":
            return None          # no logits processor of ours is loaded (engine_args)
        return ({**self._copy_args, HEAL_KEY: healed} if healed else self._copy_args) or None

    async def abort(self, request_id: str) -> None:
        if self.llm is not None:
            step_id = self._heal_step_ids.get(request_id)
            await self.llm.abort([request_id, step_id] if step_id else request_id)


def _engine_processes() -> list[tuple[int, float]]:
    """(pid, create_time) of this process's vLLM descendants (EngineCore, workers)."""
    import psutil

    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.name().startswith("VLLM::"):
                out.append((p.pid, p.create_time()))
        except psutil.Error:
            pass
    return out
