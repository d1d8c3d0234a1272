"""A `best_of` request (protocol `Complete.best_of`): the greedy line and sampled ones from the engine, each
scored in the code around it (quickcode/backend/rerank.py), the best returned — the service sends it whole."""
from __future__ import annotations

import asyncio

from quickcode.backend import rerank
from quickcode.backend.engine import Engine
from quickcode.backend.eol import to_lf
from quickcode.backend.fim import Healed
from quickcode.backend.scheduler import Job
from quickcode.protocol import Complete

MAX_BEST_OF = rerank.MAX_BEST_OF


def wanted(msg: Complete) -> bool:
    """Whether `msg` takes the best-of path (never a warm-up)."""
    return msg.best_of > 1 and not msg.prefill_only


def job(key, user: str, msg: Complete, prompt_tokens: int, prefetch: bool = False) -> Job:
    """The scheduler's view of it: the engine work it stands for (a line per candidate, a window each), so
    that waits are predicted and load shed by what it costs."""
    return Job(key, user, prompt_tokens + msg.best_of * rerank.WINDOW_TOKENS, msg.max_tokens * msg.best_of,
               prefetch=prefetch)


async def best_line(engine: Engine, msg: Complete, prompt_ids: list[int], engine_id: str, priority: int,
                    cache_salt: str | None, given_back: str, heal_token: bool) -> tuple[str, int]:
    """(the best line, tokens the engine generated). `given_back`: the prompt's healed text
    (quickcode/backend/fim.py `heal`), which every completion starts with and loses here; with `heal_token`
    the engine keeps to it. Cancelling this aborts every engine request of it."""
    healed = given_back if heal_token else ""
    heal_tokens = len(engine.tokenizer.encode(healed, add_special_tokens=False).ids) if healed else 0
    # the line ends at its line end — not at one the given-back text holds (the cursor at a line start)
    args = dict(max_tokens=msg.max_tokens + heal_tokens, stop=["\n", *(x for x in msg.stop if x != "\n")],
                priority=priority, cache_salt=cache_salt, healed=healed,
                min_tokens=heal_tokens if "\n" in healed else 0)
    greedy, sampled = await asyncio.gather(
        engine.sample(engine_id + "-g", prompt_ids, n=1, temperature=0.0, seed=0, **args),
        engine.sample(engine_id + "-n", prompt_ids, n=msg.best_of - 1, temperature=rerank.SAMPLE_TEMPERATURE,
                      seed=0, **args))
    texts = [cut_at(t, msg.stop) for t in (Healed(given_back).feed(text) for text, _ in greedy + sampled)
             if t is not None]
    lines = rerank.distinct_lines(texts)
    prefix, suffix = to_lf(msg.prefix), to_lf(msg.suffix)
    windows = [rerank.window(engine.tokenizer, prefix, line, suffix) for line in lines]
    scores = await engine.logprob_sums(engine_id + "-s", [(w.ids, w.first_scored) for w in windows], priority,
                                       cache_salt) if len(lines) > 1 else [0.0] * len(lines)
    return rerank.best(lines, scores), sum(n for _, n in greedy + sampled)


def cut_at(text: str, stop: list[str]) -> str:
    """The text before the client's first stop string (the engine keeps stop strings, for the line end)."""
    cuts = [i for i in (text.find(x) for x in stop if x) if i >= 0]
    return text[:min(cuts)] if cuts else text
