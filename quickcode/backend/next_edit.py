"""A next-edit request on the engine: the model's rewrite of the editable region streamed to its end marker,
or until it copies the old region again after its change (the engine is stopped there), then the smallest
replacement of the old region (quickcode/backend/edit_prompt.py)."""
from __future__ import annotations

from typing import Callable

from quickcode.backend.edit_prompt import RegionAnswer, replacement
from quickcode.backend.engine import Delta, Engine
from quickcode.protocol import Edit, FinishReason

_FINISH = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH, "abort": FinishReason.CANCELLED}
Change = tuple[int, int, str]       # (start, end) in the region's characters, and the text that goes there


async def rewrite(engine: Engine, msg: Edit, request_id: str, prompt_ids: list[int], priority: int,
                  cache_salt: str | None,
                  on_delta: Callable[[Delta], None]) -> tuple[Change | None, FinishReason, bool]:
    """(the change, or None: the model kept the region or never closed it; how the engine ended; whether it
    must be aborted: the end marker came before the engine finished). Greedy: the one most likely edit.
    `on_delta` sees each streamed delta (timing, progress)."""
    answer, finish, stopped = RegionAnswer(msg.region), FinishReason.STOP, False
    async for d in engine.generate(request_id, prompt_ids, msg.max_tokens, [], 0.0, priority, cache_salt):
        on_delta(d)
        if answer.feed(d.text):
            stopped = d.finish_reason is None
            break
        if d.finish_reason:
            finish = _FINISH.get(d.finish_reason, FinishReason.STOP)
    new = answer.region(msg.region)
    return (None if new is None else replacement(msg.region, new)), finish, stopped
