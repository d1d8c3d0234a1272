"""vLLM's per-step statistics (queue, KV cache, prefix-cache hits, speculation) into our `EngineStats`: a stat
logger vLLM calls after every engine step."""
from __future__ import annotations

import time

from quickcode.backend.engine import EngineStats


def stat_logger_factory(stats: EngineStats):
    from vllm.v1.metrics.loggers import StatLoggerBase

    class QuickcodeStatLogger(StatLoggerBase):
        def __init__(self, vllm_config, engine_index: int = 0):
            pass

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
            for f in iteration_stats.finished_requests if iteration_stats is not None else ():
                reason = str(f.finish_reason)
                stats.finished[reason] = stats.finished.get(reason, 0) + 1
            if scheduler_stats is None:
                return
            stats.num_running = scheduler_stats.num_running_reqs
            stats.num_waiting = scheduler_stats.num_waiting_reqs
            stats.kv_cache_usage = scheduler_stats.kv_cache_usage
            pc = scheduler_stats.prefix_cache_stats
            stats.prefix_queries += pc.queries
            stats.prefix_hits += pc.hits
            sd = scheduler_stats.spec_decoding_stats
            if sd is not None:
                stats.spec_drafts += sd.num_drafts
                stats.spec_draft_tokens += sd.num_draft_tokens
                stats.spec_accepted_tokens += sd.num_accepted_tokens
                missing = len(sd.num_accepted_tokens_per_pos) - len(stats.spec_accepted_per_pos)
                if missing > 0:
                    stats.spec_accepted_per_pos += [0] * missing
                for i, n in enumerate(sd.num_accepted_tokens_per_pos):
                    stats.spec_accepted_per_pos[i] += n
            stats.steps += 1
            stats.updated_s = time.monotonic()

        def log_engine_initialized(self):
            pass

    return QuickcodeStatLogger
