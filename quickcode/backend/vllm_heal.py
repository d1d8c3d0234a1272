"""Token healing where the engine speculates: vLLM 0.32 loads no custom logits processor then (so not
quickcode/backend/vllm_logits.py), but keeps a request's `allowed_token_ids` at every position it
verifies. The healed text (quickcode/backend/heal_mask.py) is written again by one-token requests held
to the agreeing tokens; `VllmEngine` then streams the request's rest, speculating, from the cached
prefix.
"""
from __future__ import annotations

from quickcode.backend import metrics
from quickcode.backend.engine import Delta
from quickcode.backend.heal_mask import HealState, token_texts


async def heal_steps(engine, request_id: str, prompt_ids: list[int], healed: str, max_tokens: int,
                     temperature: float, priority: int, cache_salt: str | None):
    """One-token requests of `engine` (a started VllmEngine), each held to the tokens that agree with what
    is left of `healed`, until it is written again; yields (token ids, delta) per step. The step in flight
    is recorded in `engine._heal_step_ids` so that aborting the request aborts it."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    state = HealState(healed, engine.tokenizer.encode(healed, add_special_tokens=False).ids,
                      token_texts(engine.tokenizer))
    written: list[int] = []
    try:
        while (allowed := state.allowed(written)) is not None and len(written) < max_tokens:
            step_id = f"{request_id}-heal{len(written)}"
            engine._heal_step_ids[request_id] = step_id
            metrics.HEAL_STEPS.inc()
            params = SamplingParams(max_tokens=1, temperature=temperature, allowed_token_ids=list(allowed),
                                    output_kind=RequestOutputKind.DELTA, skip_special_tokens=True)
            async for out in engine.llm.generate(engine._render(prompt_ids + written, cache_salt), params,
                                               step_id, priority=priority):
                c = out.outputs[0]
                ids = list(c.token_ids)
                written += ids
                stopped = bool(ids) and engine.template is not None and ids[-1] in engine.template.stop_ids
                yield ids, Delta(text=c.text, num_tokens=len(ids),
                                 finish_reason="stop" if stopped else (
                                     c.finish_reason if c.finish_reason == "abort" else None),
                                 num_cached_tokens=out.num_cached_tokens or 0)
    finally:
        engine._heal_step_ids.pop(request_id, None)

