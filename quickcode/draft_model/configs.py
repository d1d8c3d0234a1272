"""Model sizes and training profiles: one dataclass each, named presets, the same code on CPU and GPU.

The embedded default (this 2-core CPU) uses `cpu-target` + `cpu-draft`; the GPU profile's draft is a
1.1B Llama trained on the target's tokenizer (`gpu-draft-1b`, for a 13B code target). `test-*` run in seconds.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelSize:
    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_position_embeddings: int = 2048
    rope_theta: float = 10_000.0
    tie_embeddings: bool = True

    def hf_config(self, vocab_size: int, eot_id: int):
        from transformers import LlamaConfig

        return LlamaConfig(
            vocab_size=vocab_size, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_layers, num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads, max_position_embeddings=self.max_position_embeddings,
            rope_theta=self.rope_theta, tie_word_embeddings=self.tie_embeddings,
            bos_token_id=None, eos_token_id=eot_id, pad_token_id=eot_id, rms_norm_eps=1e-5,
        )


MODEL_SIZES = {m.name: m for m in [
    ModelSize("test-target", 64, 2, 1, 1, 128, max_position_embeddings=1024),
    ModelSize("test-draft", 32, 1, 1, 1, 64, max_position_embeddings=1024),
    ModelSize("cpu-target", 192, 6, 3, 3, 512),
    ModelSize("cpu-draft", 128, 2, 2, 2, 384),
    # the scaling sweep's larger candidates (quickcode bench sizes); bf16 folders: 17 / 25 / 35 MB
    ModelSize("cpu-8m", 256, 8, 4, 4, 704),
    ModelSize("cpu-12m", 320, 8, 5, 5, 864),
    ModelSize("cpu-17m", 384, 8, 6, 6, 1024),
    ModelSize("gpu-draft-1b", 2048, 22, 32, 4, 5632, max_position_embeddings=16_384, rope_theta=1e6,
              tie_embeddings=False),
]}


@dataclass(frozen=True)
class TrainProfile:
    name: str
    seq_len: int
    batch_size: int
    lr: float
    min_lr_ratio: float = 0.1
    warmup_steps: int = 200
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    bf16: bool = False        # bf16 autocast (fp32 weights, optimizer); pays only with native bf16 (cpu_step)
    compile: bool = False
    # the step's implementation (quickcode/draft_model/train.py Trainer): "hf" (transformers' Llama, full
    # logits; the original path) or "fast" (quickcode/draft_model/fastllama.py: fused attention, chunked loss)
    impl: str = "hf"
    fused_adamw: bool = False
    ce_chunk_tokens: int = 1024  # fast: the loss's token chunk (logits of one chunk live at once)
    threads: int = 0          # 0 = torch default
    eval_every: int = 250
    eval_windows: int = 64
    ckpt_every: int = 250
    kd_alpha: float = 0.9     # distillation: weight of KL(target || draft) against plain cross-entropy
    kd_temperature: float = 1.0
    # the loss (and the LM head, most of a small draft's cost) on this many random positions of each batch, 0 = all:
    # every position still goes through the decoder, so attention learns from all of them
    loss_positions: int = 0


PROFILES = {p.name: p for p in [
    TrainProfile("test", seq_len=64, batch_size=4, lr=3e-3, warmup_steps=5, eval_every=10, eval_windows=4,
                 ckpt_every=10),
    TrainProfile("cpu", seq_len=512, batch_size=8, lr=2e-3),
    TrainProfile("gpu", seq_len=4096, batch_size=64, lr=3e-4, warmup_steps=2000, bf16=True, compile=True,
                 eval_every=1000, eval_windows=256, ckpt_every=1000),
]}


# the step `quickcode model train` takes on a CPU with native bf16 (quickcode/backend/cpu_features.py): the
# fast path in bf16 autocast; without native bf16 the original fp32 step stays (bf16 is emulated there, far
# slower; docs/decisions.md#bf16-train-step)
NATIVE_BF16_STEP = {"impl": "fast", "fused_adamw": True, "compile": True, "bf16": True}


def cpu_step(flags: Iterable[str]) -> dict:
    """Overrides of the `cpu` profile's step for a CPU with these flags (empty: the profile's own, fp32)."""
    from quickcode.backend.cpu_features import native_bf16

    return dict(NATIVE_BF16_STEP) if native_bf16(flags) else {}


def profile(name: str, **overrides) -> TrainProfile:
    return replace(PROFILES[name], **{k: v for k, v in overrides.items() if v is not None})
