"""The fast training path computes what transformers' Llama computes: same logits, same loss, same gradients,
and its updates land in the HF module that checkpoints and exports read."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from quickcode.draft_model.configs import MODEL_SIZES, profile
from quickcode.draft_model.fastllama import (FastLlama, _blocked_causal, causal_attention, chunked_cross_entropy, from_hf,
                                             to_hf, train_flops_per_token)
from quickcode.draft_model.train import Trainer


def _hf(size="test-target", vocab=300, seed=0):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(MODEL_SIZES[size].hf_config(vocab, 0))


@pytest.mark.parametrize("size", ["test-target", "cpu-draft"])
def test_same_logits_loss_and_gradients_as_transformers(size):
    hf = _hf(size)
    fast = from_hf(hf)
    x = torch.randint(0, 300, (2, 33))
    ref = hf(input_ids=x[:, :-1]).logits
    out = fast(x[:, :-1])
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)
    ref_loss = F.cross_entropy(ref.reshape(-1, 300), x[:, 1:].reshape(-1))
    loss = fast.loss(x[:, :-1], x[:, 1:], chunk_tokens=7)          # chunks that do not divide the tokens
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    ref_loss.backward()
    loss.backward()
    ref_grads = dict(hf.named_parameters())
    for name, q in fast.named_parameters():
        torch.testing.assert_close(q.grad, ref_grads[name].grad, atol=1e-5, rtol=1e-3, msg=name)


def test_chunked_cross_entropy_is_the_mean_cross_entropy():
    h, w, y = torch.randn(50, 8, requires_grad=True), torch.randn(20, 8), torch.randint(0, 20, (50,))
    torch.testing.assert_close(chunked_cross_entropy(h, w, y, 16), F.cross_entropy(h @ w.t(), y))


@pytest.mark.parametrize("t", [32, 255, 256, 512, 1024])
def test_causal_attention_in_halves_is_causal_attention(t):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, t, 8, requires_grad=True) for _ in range(3))
    out = causal_attention(q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    g = torch.randn_like(ref)
    got = torch.autograd.grad(out, (q, k, v), g)
    for a, b in zip(got, torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def _same_attention_and_gradients(out, ref, q, k, v):
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    g = torch.randn_like(ref)
    got = torch.autograd.grad(out, (q, k, v), g)
    for a, b in zip(got, torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("t", "blocks"), [(256, 2), (300, 3), (512, 4), (33, 1)])
def test_attention_in_causal_query_blocks_is_causal_attention(t, blocks):
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, t, 8, requires_grad=True) for _ in range(3))
    _same_attention_and_gradients(_blocked_causal(q, k, v, blocks),
                                  F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


def test_compiled_attention_takes_the_blocks_and_stays_causal_attention():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 256, 8, requires_grad=True) for _ in range(3))
    compiled = torch.compile(causal_attention, dynamic=False)
    _same_attention_and_gradients(compiled(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                  q, k, v)
    graph = torch._dynamo.explain(causal_attention)(q, k, v).graphs[0]
    ops = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    assert not any("scaled_dot_product" in o for o in ops), ops      # the blocks, not the flash kernel


def test_round_trip_to_transformers_keeps_the_weights_and_the_tie():
    hf = _hf()
    back = to_hf(from_hf(hf))
    for (n, a), b in zip(hf.state_dict().items(), back.state_dict().values()):
        assert torch.equal(a, b), n
    assert back.lm_head.weight.data_ptr() == back.model.embed_tokens.weight.data_ptr()


def test_fast_steps_update_the_hf_module_like_the_hf_steps():
    batch = torch.randint(0, 300, (4, 65))
    results = {}
    w0 = _hf().model.layers[0].mlp.up_proj.weight.detach().clone()
    for impl in ("hf", "fast"):
        hf = _hf()
        t = Trainer(hf, profile("test", impl=impl, fused_adamw=impl == "fast"))
        losses = [t.step(batch, 3e-3) for _ in range(3)]
        results[impl] = (losses, hf.model.layers[0].mlp.up_proj.weight.detach().clone(), hf)
    (l_hf, w_hf, _), (l_fast, w_fast, hf_fast) = results["hf"], results["fast"]
    assert l_fast == pytest.approx(l_hf, rel=1e-3)          # the same training, rounding aside
    assert l_fast[2] < l_fast[0]
    moved = (w_fast - w0).abs()
    assert moved.max() > 1e-3                                # the HF module saw the updates
    # Adam turns a near-zero gradient's rounding into a whole step's sign: compare where the steps agree
    assert ((w_fast - w_hf).abs() <= 1e-4).float().mean() > 0.7
    assert hf_fast.lm_head.weight.data_ptr() == hf_fast.model.embed_tokens.weight.data_ptr()


def test_flops_per_token_counts_every_matmul():
    cfg = MODEL_SIZES["cpu-target"].hf_config(8192, 0)
    linear = 6 * (192 * 192 * 4 + 3 * 192 * 512) + 192 * 8192
    assert train_flops_per_token(cfg, 512) == 3 * (2 * linear + 6 * 2 * 192 * 512)
    assert isinstance(FastLlama(cfg), torch.nn.Module)
