"""quickcode's vLLM logits processor: the copy model (quickcode/backend/copy_model.py) and the token-healing
mask (quickcode/backend/heal_mask.py), per request.

Registered with the engine when either is on (quickcode/backend/vllm_engine.py `engine_args`, by name:
LOGITS_FQCN); a request opts in through `SamplingParams.extra_args`: `quickcode_copy` = {"lambdas": [...],
"max_n": 4, "exclude": [ids]} (the FIM template's special tokens never count as copied followers) and/or
`quickcode_heal` = the healed text. Runs inside vLLM's engine process on the logits of every sampled token of
those requests: the copy model mixed in first, then the mask.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from quickcode.backend.copy_model import EXTRA_KEY as COPY_KEY
from quickcode.backend.copy_model import copy_distribution, mix_logits
from quickcode.backend.fim_templates import reads_markers_as_text
from quickcode.backend.heal_mask import EXTRA_KEY as HEAL_KEY
from quickcode.backend.heal_mask import HealState, mask_logits, token_texts


class _RequestLogits:
    """One request's: vLLM calls it with (prompt ids, output ids so far, the next token's logits)."""

    def __init__(self, copy: tuple[tuple[float, ...], int, frozenset[int]] | None, heal: HealState | None):
        self.copy, self.heal = copy, heal

    def __call__(self, prompt_ids: list[int], output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        if self.copy is not None:
            lambdas, max_n, exclude = self.copy
            n, dist = copy_distribution(prompt_ids + output_ids, max_n, exclude)
            logits = mix_logits(logits, n, dist, lambdas)
        if self.heal is not None and (allowed := self.heal.allowed(output_ids)) is not None:
            logits = mask_logits(logits, allowed)
        return logits


class QuickcodeLogitsProcessor(AdapterLogitsProcessor):
    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        super().__init__(vllm_config, device, is_pin_memory)
        self.tok = reads_markers_as_text(
            Tokenizer.from_file(str(Path(vllm_config.model_config.tokenizer) / "tokenizer.json")))
        self.texts = token_texts(self.tok)

    @classmethod
    def validate_params(cls, params: SamplingParams):
        extra = params.extra_args or {}
        opts = extra.get(COPY_KEY)
        if opts is not None:
            lams = opts.get("lambdas")
            if not (isinstance(lams, (list, tuple)) and 0 < len(lams) <= 8 and all(
                    isinstance(x, (int, float)) and 0 <= x < 1 for x in lams)):
                raise ValueError(f"{COPY_KEY}.lambdas: 1 to 8 numbers in [0, 1)")
            if not (isinstance(opts.get("max_n", 4), int) and 1 <= opts.get("max_n", 4) <= 16):
                raise ValueError(f"{COPY_KEY}.max_n: 1..16")
        healed = extra.get(HEAL_KEY)
        if healed is not None and not (isinstance(healed, str) and len(healed) <= 64):
            raise ValueError(f"{HEAL_KEY}: a string of at most 64 characters")

    def is_argmax_invariant(self) -> bool:
        return False     # both change the greedy choice: that is their point

    def new_req_logits_processor(self, params: SamplingParams) -> _RequestLogits | None:
        extra = params.extra_args or {}
        opts, healed = extra.get(COPY_KEY), extra.get(HEAL_KEY)
        if not opts and not healed:
            return None
        copy = None if not opts else (tuple(float(x) for x in opts["lambdas"]), int(opts.get("max_n", 4)),
                                      frozenset(int(t) for t in opts.get("exclude", ())))
        typed = [] if not healed else self.tok.encode(healed, add_special_tokens=False).ids
        heal = HealState(healed, typed, self.texts) if healed else None
        return _RequestLogits(copy, heal)
