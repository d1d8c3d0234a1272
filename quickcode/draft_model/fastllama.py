"""A training-only Llama with the HF `LlamaForCausalLM` parameter names and maths, built for CPU throughput.

The same weights give the same logits as `transformers`' Llama (tests/draft_model/test_fastllama.py), so
checkpoints load into `LlamaForCausalLM` and export unchanged. What it does differently:
- attention is the fused CPU flash kernel (`F.scaled_dot_product_attention`), or, compiled at 256–512 tokens,
  matmuls over causal query blocks that inductor fuses with the softmax (`causal_attention`); RoPE tables are
  computed once per length;
- the loss never keeps the (tokens × vocab) logits: `chunked_cross_entropy` runs the tied LM head and the
  cross-entropy over token chunks and computes their gradients in the same pass (one chunk's logits at a time);
- the decoder body can be `torch.compile`d (inductor fuses RMSNorm, RoPE, SwiGLU and the residual adds into C++
  loops) while the loss stays eager.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _head_dim(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


class _Attention(nn.Module):
    def __init__(self, d: int, n_heads: int, n_kv: int):
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = n_heads, n_kv, d // n_heads
        self.q_proj = nn.Linear(d, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        y = causal_attention(q, k, v, enable_gqa=self.n_kv != self.n_heads)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool = False
                     ) -> torch.Tensor:
    """Causal attention, the way that measured fastest here for the mode and the length: compiled (the training
    step's body) at 256–512 tokens, plain matmuls in two query blocks (`_blocked_causal`); otherwise the fused
    CPU flash kernel (`_flash_causal`). Eager the blocks are slower, and past 512 tokens their (T × T) scores
    grow (docs/decisions.md#attention-blocks)."""
    t = q.shape[-2]
    if torch.compiler.is_compiling() and 256 <= t <= 512 and not enable_gqa:
        return _blocked_causal(q, k, v, blocks=2)
    return _flash_causal(q, k, v, enable_gqa)


def _blocked_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: int) -> torch.Tensor:
    """Softmax attention over query blocks, each against the keys up to its own end (the blocks above the
    diagonal never computed), scores and softmax in fp32; inductor fuses the scaling, mask, softmax and casts
    around the matmuls."""
    t, scale = q.shape[-2], q.shape[-1] ** -0.5
    edges = [t * i // blocks for i in range(blocks + 1)]
    out = []
    for lo, hi in zip(edges, edges[1:]):
        scores = (q[..., lo:hi, :] @ k[..., :hi, :].transpose(-1, -2)).float() * scale
        keep = torch.ones(hi - lo, hi, dtype=torch.bool, device=q.device).tril(diagonal=lo)  # query lo+i: keys ≤ lo+i
        weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
        out.append(weights.to(v.dtype) @ v[..., :hi, :])
    return torch.cat(out, dim=-2)


def _flash_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> torch.Tensor:
    """Causal SDPA; from 256 to 512 tokens in two query halves, the first half against the first half of the
    keys only. The CPU flash kernel takes the keys in blocks of up to 512 and skips a block only when it is
    wholly above the diagonal, so one causal call at ≤ 512 tokens computes (and masks) the whole T × T; the
    halves skip the upper-right quarter. Past 512 tokens the kernel's own skipping does it better than the
    halves' masked second call (docs/decisions.md#attention-halves)."""
    t = q.shape[-2]
    if t < 256 or t > 512 or t % 2:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=enable_gqa)
    h = t // 2
    first = F.scaled_dot_product_attention(q[..., :h, :], k[..., :h, :], v[..., :h, :], is_causal=True,
                                           enable_gqa=enable_gqa)
    mask = torch.ones(h, t, dtype=torch.bool, device=q.device).tril(diagonal=h)   # query h+i: keys ≤ h+i
    second = F.scaled_dot_product_attention(q[..., h:, :], k, v, attn_mask=mask, enable_gqa=enable_gqa)
    return torch.cat((first, second), dim=-2)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)   # HF's rotate_half
    return x * cos + rotated * sin


class _Mlp(nn.Module):
    def __init__(self, d: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(d, inter, bias=False)
        self.up_proj = nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()                                                   # as HF: normalised in fp32
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class _Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg.hidden_size
        self.self_attn = _Attention(d, cfg.num_attention_heads, cfg.num_key_value_heads)
        self.mlp = _Mlp(d, cfg.intermediate_size)
        self.input_layernorm = _RMSNorm(d, cfg.rms_norm_eps)
        self.post_attention_layernorm = _RMSNorm(d, cfg.rms_norm_eps)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class _Body(nn.Module):
    """HF's `model.*`: embeddings, layers, final norm (the part that is compiled)."""

    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(_Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = _RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        rope = getattr(cfg, "rope_parameters", None) or {}
        self.head_dim, self.rope_theta = _head_dim(cfg), float(rope.get("rope_theta", getattr(cfg, "rope_theta", 1e4)))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        inv_freq = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32,
                                                           device=input_ids.device) / self.head_dim))
        freqs = torch.outer(torch.arange(t, dtype=torch.float32, device=input_ids.device), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        x = self.embed_tokens(input_ids)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)      # as HF: the tables in the weights' dtype
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class FastLlama(nn.Module):
    """`LlamaForCausalLM`'s parameters (same names, tied head), trained through `loss`."""

    def __init__(self, cfg):
        super().__init__()
        rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
        if rope.get("rope_type", "default") != "default" or getattr(cfg, "attention_bias", False) \
                or getattr(cfg, "mlp_bias", False) or _head_dim(cfg) * cfg.num_attention_heads != cfg.hidden_size:
            raise ValueError("FastLlama covers plain Llama only (no rope scaling, no biases, head_dim = d / heads)")
        self.config = cfg
        self.model = _Body(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self._init_weights(cfg)

    def _init_weights(self, cfg) -> None:   # HF Llama's: normal(0, initializer_range), norms at 1
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=cfg.initializer_range)

    def compile_body(self) -> None:
        # kept out of the module tree: the state dict stays HF's
        self.__dict__["_compiled_body"] = torch.compile(self.model, dynamic=False)
        self.__dict__["_compiled_loss_grad"] = torch.compile(_chunk_loss_grad, dynamic=False)

    def body(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.__dict__.get("_compiled_body", self.model)(input_ids)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits (for evaluation: all of them at once)."""
        return self.lm_head(self.body(input_ids))

    def loss(self, input_ids: torch.Tensor, targets: torch.Tensor, chunk_tokens: int = 1024) -> torch.Tensor:
        h = self.body(input_ids)
        return chunked_cross_entropy(h.reshape(-1, h.shape[-1]), self.lm_head.weight, targets.reshape(-1),
                                     chunk_tokens, self.__dict__.get("_compiled_loss_grad", _chunk_loss_grad))


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of `h @ w.T` against `y`, computed chunk by chunk with its gradients in the same pass
    (as Liger-Kernel's fused linear cross-entropy): per chunk the logits, their softmax, and at once the
    gradients of `h` and `w` — three matmuls as in the plain loss, but no (tokens × vocab) tensor is kept for the
    backward pass, only the (tokens × d) and (vocab × d) gradients."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, w: torch.Tensor, y: torch.Tensor, chunk_tokens: int, chunk_grad):
        n, dev = h.shape[0], h.device
        # the matmuls' dtype: bf16 under autocast (cast once here, not at every use), else h's
        mm = torch.get_autocast_dtype(dev.type) if torch.is_autocast_enabled(dev.type) else h.dtype
        w_mm = w.to(mm)
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros_like(w, dtype=torch.float32)
        total = torch.zeros((), dtype=torch.float32, device=dev)
        for i in range(0, n, chunk_tokens):
            hc, yc = h[i:i + chunk_tokens].to(mm), y[i:i + chunk_tokens]
            loss_sum, g = chunk_grad(hc @ w_mm.t(), yc)
            total += loss_sum
            grad_h[i:i + chunk_tokens] = g @ w_mm
            grad_w += (g.t() @ hc).float()
        ctx.save_for_backward(grad_h, grad_w)
        ctx.n = n
        return total / n

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_out / ctx.n
        return grad_h * scale.to(grad_h.dtype), (grad_w * scale).to(grad_w.dtype), None, None, None


def _chunk_loss_grad(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk's summed cross-entropy (fp32) and its gradient wrt the logits, softmax - onehot, in the
    logits' dtype (the loss's elementwise part). Written as max, exp, sum and one select, not
    `log_softmax(...).exp()` and an indexed subtract: inductor makes it two passes over the logits, several
    times faster than the log-softmax form (docs/decisions.md#chunk-loss-grad)."""
    lf = logits.float()
    top = lf.amax(dim=-1, keepdim=True)
    e = torch.exp(lf - top)
    total = e.sum(dim=-1, keepdim=True)
    loss_sum = (torch.log(total[:, 0]) + top[:, 0] - lf.gather(1, y[:, None])[:, 0]).sum()
    p = e / total
    is_target = torch.arange(lf.shape[-1], device=lf.device)[None, :] == y[:, None]
    return loss_sum, torch.where(is_target, p - 1.0, p).to(logits.dtype)


def chunked_cross_entropy(h: torch.Tensor, w: torch.Tensor, y: torch.Tensor, chunk_tokens: int,
                          chunk_grad=_chunk_loss_grad) -> torch.Tensor:
    """Mean cross-entropy of `h @ w.T` against `y`, one token chunk of logits at a time (`_LinearCrossEntropy`)."""
    return _LinearCrossEntropy.apply(h, w, y, chunk_tokens, chunk_grad)


def from_hf(hf_model) -> FastLlama:
    fast = FastLlama(hf_model.config)
    missing, unexpected = fast.load_state_dict(hf_model.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise ValueError(f"state dicts differ: missing {missing}, unexpected {unexpected}")
    return fast


def to_hf(fast: FastLlama):
    from transformers import LlamaForCausalLM

    hf = LlamaForCausalLM(fast.config)
    hf.load_state_dict(fast.state_dict())
    return hf


def train_flops_per_token(cfg, seq_len: int) -> float:
    """Matmul FLOPs of one training token (forward + backward = 3 × forward): 6 × the parameters a token
    multiplies with (every linear layer and the LM head, not the embedding lookup) plus attention's scores and
    weighted sum (causal: half of the T × T products)."""
    d, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    kv = cfg.num_key_value_heads * (d // cfg.num_attention_heads)
    per_layer = d * d * 2 + d * kv * 2 + 3 * d * inter
    matmul_params = layers * per_layer + d * cfg.vocab_size
    attention = layers * 2 * 2 * d * seq_len / 2        # QK^T and AV, each 2·d per key, half the keys causal
    return 3 * (2 * matmul_params + attention)


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
