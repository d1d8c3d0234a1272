"""Fewer decoder layers for a latency budget: drop the layers that change their input least, then let training heal.

A 1,000-token prompt's prefill costs about the same in every layer, so the cold prompt's time falls with the
layer count. Which layers to drop: the ones whose output is most like their input, by the "block influence" of
ShortGPT (Men et al., 2024) — one minus the mean cosine similarity of a layer's input and output hidden states
over held-out tokens — measured on the model as it will be served (with its adapter). The first and last layers
are never dropped. `model adapt --drop-layers N` drops them before it trains (the adapter heals the gap) and
records the dropped indices, which `model merge` drops from the base again before folding the adapter in.
"""
from __future__ import annotations

import torch


def _causal_lm(model):
    """The Llama causal LM itself, under a peft wrapper if there is one."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoder_layers(model) -> torch.nn.ModuleList:
    """The decoder's layer list of a Llama model, a peft-wrapped one too."""
    return _causal_lm(model).model.layers


@torch.no_grad()
def layer_influence(model, windows: list[torch.Tensor]) -> list[float]:
    """Per decoder layer: 1 − the mean cosine similarity between its input and output hidden states over every
    token of `windows` (block influence; a layer near 0 changes little)."""
    layers = decoder_layers(model)
    sums = [0.0] * len(layers)
    seen: dict[int, torch.Tensor] = {}

    def pre(i):
        def hook(_module, args, kwargs):
            seen[i] = (args[0] if args else kwargs["hidden_states"]).float()
        return hook

    def post(i):
        def hook(_module, _args, output):
            out = (output[0] if isinstance(output, tuple) else output).float()
            sums[i] += float((1 - torch.nn.functional.cosine_similarity(seen.pop(i), out, dim=-1)).sum())
        return hook

    handles = [h for i, layer in enumerate(layers)
               for h in (layer.register_forward_pre_hook(pre(i), with_kwargs=True),
                         layer.register_forward_hook(post(i)))]
    count = forward_over(model, windows, handles)
    return [s / count for s in sums]


@torch.no_grad()
def forward_over(model, windows: list[torch.Tensor], handles: list) -> int:
    """Run `model` (eval) over every window's inputs, then remove the hooks `handles`; returns the token count."""
    count = 0
    model.eval()
    try:
        for batch in windows:
            model(input_ids=batch[:, :-1])
            count += batch[:, :-1].numel()
    finally:
        for h in handles:
            h.remove()
    return count


def least_influential(influence: list[float], n: int) -> list[int]:
    """The `n` layers of least influence, never the first or the last, in ascending index order."""
    if not 0 <= n <= len(influence) - 2:
        raise ValueError(f"can drop 0 to {len(influence) - 2} of {len(influence)} layers, not {n}")
    inner = sorted(range(1, len(influence) - 1), key=lambda i: influence[i])
    return sorted(inner[:n])


def drop_layers(model, drop: list[int]):
    """Remove the decoder layers `drop` (indices of the current list) in place; the rest keep their order and are
    renumbered (their KV-cache slots and the config's layer count follow). Returns `model`."""
    base = _causal_lm(model)
    layers, gone = base.model.layers, set(drop)
    if any(not 0 <= i < len(layers) for i in gone):
        raise ValueError(f"layer indices {drop} outside 0..{len(layers) - 1}")
    kept = [layer for i, layer in enumerate(layers) if i not in gone]
    for new_idx, layer in enumerate(kept):
        layer.self_attn.layer_idx = new_idx
    base.model.layers = torch.nn.ModuleList(kept)
    base.config.num_hidden_layers = len(kept)
    return model
