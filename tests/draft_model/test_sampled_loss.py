"""The loss on sampled positions (`loss_positions`, quickcode/draft_model/train.py): on all positions it is the
ordinary loss, with a teacher it distils, and frozen embeddings stay as they were after a step."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from quickcode.draft_model.configs import profile
from quickcode.draft_model.train import Trainer, kd_loss


def _llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg)


def _batch():
    return torch.randint(0, 97, (2, 17), generator=torch.Generator().manual_seed(1))


def test_sampling_every_position_is_the_plain_cross_entropy():
    m = _llama()
    x, y = _batch()[:, :-1], _batch()[:, 1:]
    tr = Trainer(m, profile("test", loss_positions=x.numel(), kd_alpha=0.0))
    full = F.cross_entropy(m(input_ids=x).logits.reshape(-1, 97), y.reshape(-1))
    assert torch.allclose(tr._sampled_loss(x, y), full, atol=1e-5)


def test_with_a_teacher_the_sampled_loss_distils_and_is_zero_against_itself():
    m = _llama()
    x, y = _batch()[:, :-1], _batch()[:, 1:]
    tr = Trainer(m, profile("test", loss_positions=x.numel(), kd_alpha=1.0), teacher=_llama())
    logits, t_logits = m(input_ids=x).logits, tr.teacher(input_ids=x).logits
    assert torch.allclose(tr._sampled_loss(x, y), kd_loss(logits, t_logits, y, 1.0, 1.0), atol=1e-4)
    self_tr = Trainer(m, profile("test", loss_positions=8, kd_alpha=1.0), teacher=m)
    assert abs(self_tr._sampled_loss(x, y).item()) < 1e-5


def test_a_step_on_sampled_positions_moves_the_layers_not_frozen_embeddings():
    m = _llama()
    m.get_input_embeddings().weight.requires_grad_(False)
    emb = m.get_input_embeddings().weight.detach().clone()
    q = m.model.layers[0].self_attn.q_proj.weight.detach().clone()
    Trainer(m, profile("test", loss_positions=5, kd_alpha=0.0)).step(_batch(), 1e-2)
    assert torch.equal(m.get_input_embeddings().weight, emb)
    assert not torch.equal(m.model.layers[0].self_attn.q_proj.weight, q)
