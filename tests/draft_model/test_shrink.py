"""quickcode/draft_model/shrink.py on a small random Llama: the draft keeps the ends and the most influential
layers, neurons that carry nothing are the ones narrowed away, and the folder it writes loads as the same
function as the model it was cut from."""
from __future__ import annotations

import json

import pytest
import torch

from quickcode.draft_model.prune import decoder_layers
from quickcode.draft_model.shrink import RECORD, layers_to_keep, mlp_importance, narrow_mlp, shrink


def _llama(layers: int = 5):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).eval()


def _windows():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 97, (2, 17), generator=g) for _ in range(2)]


def test_layers_to_keep_takes_the_ends_and_the_most_influential():
    assert layers_to_keep([0.5, 0.1, 0.9, 0.2, 0.3, 0.4], 4) == [0, 2, 4, 5]
    assert layers_to_keep([0.5, 0.1, 0.9], 2) == [0, 2]
    with pytest.raises(ValueError):
        layers_to_keep([0.5, 0.1, 0.9], 1)


def test_dead_neurons_score_zero_and_dropping_them_changes_nothing():
    m = _llama(2)
    mlp = decoder_layers(m)[1].mlp
    with torch.no_grad():
        mlp.down_proj.weight[:, :16] = 0           # the first 16 neurons reach nothing
    scores = mlp_importance(m, _windows())
    assert torch.all(scores[1][:16] == 0) and torch.all(scores[1][16:] > 0)
    x = _windows()[0]
    with torch.no_grad():
        before = m(input_ids=x).logits
        narrow_mlp(decoder_layers(m)[1], torch.arange(16, 64))
        after = m(input_ids=x).logits
    assert decoder_layers(m)[1].mlp.gate_proj.out_features == 48
    assert torch.allclose(before, after, atol=1e-5)


def test_the_written_draft_loads_with_the_kept_layers_and_the_targets_embeddings(tmp_path):
    from transformers import LlamaForCausalLM

    target = _llama(5)
    target.save_pretrained(tmp_path / "target")
    (tmp_path / "target" / "quickcode_fim.json").write_text("{}")
    record = shrink(tmp_path / "target", tmp_path / "draft", _windows(), layers=3, intermediate=32)
    draft = LlamaForCausalLM.from_pretrained(tmp_path / "draft", dtype=torch.float32)
    assert draft.config.num_hidden_layers == 3 and draft.config.intermediate_size == 32
    assert record["kept_layers"][0] == 0 and record["kept_layers"][-1] == 4 and len(record["kept_layers"]) == 3
    assert json.loads((tmp_path / "draft" / RECORD).read_text())["kept_layers"] == record["kept_layers"]
    assert (tmp_path / "draft" / "quickcode_fim.json").exists()
    emb_t = target.get_input_embeddings().weight.to(torch.bfloat16).float()
    assert torch.equal(draft.get_input_embeddings().weight, emb_t)
    kept = record["kept_layers"][1]
    w_t = decoder_layers(target)[kept].self_attn.q_proj.weight.to(torch.bfloat16).float()
    assert torch.equal(decoder_layers(draft)[1].self_attn.q_proj.weight, w_t)
