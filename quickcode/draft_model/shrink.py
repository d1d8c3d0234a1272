"""A draft scaled down from its target, the case study's way: the target's tokenizer and embeddings, fewer decoder
layers, narrower MLPs — the starting point that `model distill` then trains on the target's logits.

Which layers stay: the first and the last always (the first reads the embeddings, the last writes what the tied
head reads), and between them the most influential ones by ShortGPT's block influence (quickcode/draft_model/
prune.py), measured on held-out tokens. Which MLP neurons stay in a kept layer: the ones that contribute most to
its output — the mean magnitude of the neuron's activation (silu(gate) · up) times the norm of its column of
down_proj, the structured-pruning score of Wanda/LLM-Pruner. Attention heads stay as they are (a narrower
attention would change head_dim or the head counts, and the KV cache with them). The result is an ordinary Llama
folder vLLM serves as `spec_method = "draft"` for that target.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from quickcode.draft_model import prune

RECORD = "quickcode_shrink.json"
# what a target folder carries that the draft must carry too: the same tokenizer, FIM template and licence
CARRIED = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "quickcode_fim.json", "LICENSE")


@torch.no_grad()
def mlp_importance(model, windows: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per decoder layer, per MLP neuron: mean |silu(gate(x)) · up(x)| over the tokens of `windows`, times the
    L2 norm of the neuron's column of down_proj (how much of the layer's output it can carry)."""
    layers = prune.decoder_layers(model)
    sums = [torch.zeros(layer.mlp.down_proj.in_features) for layer in layers]

    def hook(i):
        def fn(_module, args):
            sums[i] += args[0].detach().float().abs().reshape(-1, args[0].size(-1)).sum(0)
        return fn

    handles = [layer.mlp.down_proj.register_forward_pre_hook(hook(i)) for i, layer in enumerate(layers)]
    count = prune.forward_over(model, windows, handles)
    return [s / max(1, count) * layer.mlp.down_proj.weight.float().norm(dim=0)
            for s, layer in zip(sums, layers)]


def layers_to_keep(influence: list[float], n: int) -> list[int]:
    """`n` layer indices: the first, the last and the n-2 most influential between them, in order."""
    total = len(influence)
    if not 2 <= n <= total:
        raise ValueError(f"a draft keeps 2 to {total} of the target's {total} layers, not {n}")
    inner = sorted(range(1, total - 1), key=lambda i: -influence[i])[:n - 2]
    return sorted([0, total - 1, *inner])


def narrow_mlp(layer, keep: torch.Tensor) -> None:
    """Keep only the MLP neurons `keep` (indices) of one decoder layer, in place."""
    mlp = layer.mlp
    for name in ("gate_proj", "up_proj"):
        old = getattr(mlp, name)
        new = torch.nn.Linear(old.in_features, len(keep), bias=False, dtype=old.weight.dtype)
        new.weight.copy_(old.weight[keep])
        setattr(mlp, name, new)
    old = mlp.down_proj
    new = torch.nn.Linear(len(keep), old.out_features, bias=False, dtype=old.weight.dtype)
    new.weight.copy_(old.weight[:, keep])
    mlp.down_proj = new


@torch.no_grad()
def shrink(target_dir: Path, out_dir: Path, windows: list[torch.Tensor], *, layers: int,
           intermediate: int | None = None, keep: list[int] | None = None, argv: list[str] | None = None) -> dict:
    """Write the draft of `target_dir` to `out_dir`: `layers` decoder layers (or exactly `keep`), each MLP
    narrowed to `intermediate` neurons (None: the target's width). Returns the record written beside it."""
    from quickcode.draft_model.train import load_model

    model = load_model(target_dir)
    cfg = model.config
    influence = prune.layer_influence(model, windows)
    kept = sorted(keep) if keep else layers_to_keep(influence, layers)
    width = intermediate or cfg.intermediate_size
    if not 1 <= width <= cfg.intermediate_size:
        raise ValueError(f"intermediate {width} outside 1..{cfg.intermediate_size}")
    if width < cfg.intermediate_size:
        scores = mlp_importance(model, windows)
        for i in kept:
            layer = prune.decoder_layers(model)[i]
            narrow_mlp(layer, torch.sort(torch.topk(scores[i], width).indices).values)
    prune.drop_layers(model, [i for i in range(cfg.num_hidden_layers) if i not in kept])
    model.config.intermediate_size = width
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "generation_config.json").unlink(missing_ok=True)
    for name in CARRIED:
        if (target_dir / name).exists():
            shutil.copy(target_dir / name, out_dir / name)
    record = {"command": " ".join(["quickcode", *(argv or [])]), "target": str(target_dir),
              "kept_layers": kept, "target_layers": cfg.num_hidden_layers,
              "influence": [round(x, 5) for x in influence], "intermediate_size": width,
              "params": sum(p.numel() for p in model.parameters())}
    (out_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    return record
