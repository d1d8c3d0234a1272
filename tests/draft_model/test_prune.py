"""quickcode/draft_model/prune.py on a small random Llama: the influence finds an inert layer, dropping layers
gives the forward pass without them, the first and last layers are never chosen."""
from __future__ import annotations

import pytest
import torch

from quickcode.draft_model.prune import decoder_layers, drop_layers, layer_influence, least_influential


def _llama(layers: int = 5):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def _silence(layer) -> None:
    """A layer that adds nothing to the residual stream: its output is its input."""
    with torch.no_grad():
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()


def _windows():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 97, (2, 17), generator=g) for _ in range(2)]


def test_an_inert_layer_has_no_influence_and_is_the_one_dropped():
    m = _llama()
    _silence(decoder_layers(m)[2])
    influence = layer_influence(m, _windows())
    assert len(influence) == 5
    assert influence[2] < 1e-6 and min(influence[:2] + influence[3:]) > 1e-3
    assert least_influential(influence, 1) == [2]
    assert not any(h for layer in decoder_layers(m) for h in (layer._forward_hooks, layer._forward_pre_hooks))


def test_dropping_layers_is_the_forward_pass_without_them():
    m = _llama()
    x = _windows()[0]
    with torch.no_grad():
        h = m.model.embed_tokens(x)
        pos = torch.arange(x.shape[1])[None]
        rot = m.model.rotary_emb(h, pos)
        for i, layer in enumerate(m.model.layers):
            if i not in (1, 3):
                out = layer(h, position_embeddings=rot, position_ids=pos, attention_mask=None)
                h = out[0] if isinstance(out, tuple) else out
        # no mask above: compare the last position only, which sees every token under either mask
        want = m.lm_head(m.model.norm(h))[:, -1]
        drop_layers(m, [1, 3])
        got = m(input_ids=x).logits[:, -1]
    assert m.config.num_hidden_layers == 3 and len(m.model.layers) == 3
    assert [layer.self_attn.layer_idx for layer in m.model.layers] == [0, 1, 2]
    assert torch.allclose(got, want, atol=1e-5)
    # generation with a KV cache works on the renumbered layers
    assert m.generate(x[:1, :5], max_new_tokens=3, do_sample=False).shape == (1, 8)


def test_least_influential_keeps_the_ends_and_checks_the_count():
    influence = [0.0, 0.5, 0.1, 0.3, 0.0]          # the ends are the least influential here: still kept
    assert least_influential(influence, 2) == [2, 3]
    assert least_influential(influence, 0) == []
    with pytest.raises(ValueError):
        least_influential(influence, 4)
    with pytest.raises(ValueError):
        drop_layers(_llama(3), [3])
