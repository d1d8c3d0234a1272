"""Teach a pretrained model from a registry wheel to fill in the middle: a LoRA adapter trained on our FIM data.

SmolLM2-135M (quickcode/draft_model/registry_model.py) knows code but has no fill-in-the-middle tokens, so the
backend serves it with the plain prefix and it never sees the text below the cursor. `adapt` trains a low-rank
adapter (peft LoRA on every linear layer of the decoder; embeddings and the tied LM head stay as they are) on
data packed in the model's own vocabulary with three of its control tokens in the FIM roles (the data's
quickcode_fim.json), so the model learns the SPM layout our targets use (`<suffix>S<prefix>P` → the middle
continues the prefix). The adapter is small enough to commit (`models/smollm2-fim`); `merge` folds it into the
imported weights, which `scripts/setup.sh smollm2` does on a fresh machine, so the served folder is an
ordinary Llama folder. With `drop_layers` the adapter also heals a shallower model: the least influential
decoder layers of the model (with its starting adapter) are dropped before training
(quickcode/draft_model/prune.py) and the record names them, so that `merge` drops the same layers from the
base.

The training loop is `quickcode.draft_model.train.train` (its checkpoints, resume, evaluation and schedule) on
the adapter-wrapped model: only the adapter's parameters have gradients, so only they move.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from quickcode.draft_model import fim
from quickcode.draft_model import tokenizer as tokmod
from quickcode.draft_model.configs import TrainProfile

# every projection of the decoder (attention and MLP): the adapter's reach
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
RECORD = "quickcode_adapt.json"
BASE_RECORDS = ("quickcode_import.json", "LICENSE")   # what a registry import carries about where it came from


def with_adapter(model, rank: int, alpha: float):
    """`model` wrapped with a fresh LoRA adapter of `rank` on LORA_TARGETS (the adapter starts as a no-op)."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(LORA_TARGETS), bias="none",
                     task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)


def adapt(base_dir: Path, data_dir: Path, run_dir: Path, out_dir: Path, p: TrainProfile, *, steps: int,
          rank: int = 16, alpha: float = 32.0, seed: int = 0, init_adapter: Path | None = None,
          drop_layers: int = 0, argv: list[str] | None = None) -> dict:
    """Train an adapter for `base_dir` on `data_dir` (packed with the base's vocabulary) for `steps` steps,
    checkpointing in `run_dir` (rerun to resume), and write it to `out_dir` with the data's FIM template and a
    record of how it was made. `init_adapter`: start from that adapter (its rank) instead of a fresh one;
    `drop_layers`: first drop that many least influential layers (kept in `run_dir` for the resume).
    Returns the held-out figures of the starting model, of it pruned, and of the adapted model."""
    import torch

    from quickcode.draft_model.pipeline import command_line
    from quickcode.draft_model.train import Windows, evaluate, load_model, train

    tok_dir = data_dir / "tokenizer"
    _check_fim_data(base_dir, tok_dir)
    if p.threads:
        torch.set_num_threads(p.threads)
    model = load_model(base_dir)
    eval_w = Windows(data_dir / "heldout.bin", p.seq_len, seed).fixed(p.eval_windows, p.batch_size)
    # a fresh adapter starts as a no-op: `before` is then the base's figure
    model = with_adapter(model, rank, alpha) if init_adapter is None else _from_adapter(model, base_dir, init_adapter)
    rank, alpha = model.peft_config["default"].r, model.peft_config["default"].lora_alpha
    before = evaluate(model, eval_w)
    pruned = _prune(model, eval_w, run_dir, drop_layers) if drop_layers else None
    trainable = sum(q.numel() for q in model.parameters() if q.requires_grad)
    label = f"adapt {base_dir.name} (LoRA r={rank}, {trainable / 1e6:.2f}M trainable)"
    result = train(model, p, data_dir, run_dir, steps=steps, seed=seed, label=label)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)                  # adapter_config.json + adapter_model.safetensors
    (out_dir / "README.md").unlink(missing_ok=True)   # peft's empty card template: ours is written by hand
    spec = tok_dir / fim.TEMPLATE_FILE
    if spec.exists():       # the template the data was packed with is the one to prompt with
        shutil.copy(spec, out_dir / fim.TEMPLATE_FILE)
    else:
        fim.write_template(out_dir, "spm", fim.template_names(tok_dir))
    record = {"command": command_line(argv or []), "base": str(base_dir), "base_import": _base_import(base_dir),
              "tokenizer_sha256": _sha256(base_dir / "tokenizer.json"), "rank": rank, "alpha": alpha,
              "targets": list(LORA_TARGETS), "trainable_params": trainable, "profile": p.name,
              "seq_len": p.seq_len, "batch_size": p.batch_size, "lr": p.lr, "steps": result["steps"],
              "tokens": result["tokens"], "elapsed_s": round(result["elapsed_s"], 1),
              "data_summary": json.loads((data_dir / "summary.json").read_text()),
              # the modules it never trained on (the same stable hash as every data of ours): evaluations pick
              # their held-out code from these
              "heldout_modules": json.loads((data_dir / "manifest.json").read_text())["heldout_modules"],
              "init_adapter": None if init_adapter is None else {
                  "path": str(init_adapter), "steps": json.loads((init_adapter / RECORD).read_text())["steps"]},
              **(pruned or {}),
              "heldout_before": before,
              "heldout_after": {k: result[k] for k in ("loss", "ppl", "top1")}}
    (out_dir / RECORD).write_text(json.dumps(record, indent=1, default=str) + "\n")
    after_pruning = {"heldout_pruned": pruned["heldout_pruned"]} if pruned else {}
    return {"heldout_before": before, **after_pruning, **result, "trainable_params": trainable}


def merge(base_dir: Path, adapter_dir: Path, out_dir: Path, then: tuple[Path, ...] = ()) -> Path:
    """The base with the adapter folded into its weights: an ordinary bf16 Llama folder vLLM serves, with the
    adapter's FIM template (so the backend prompts it with the suffix) and both records. `then`: adapters
    trained on that merged model (the next-edit adapter, quickcode/draft_model/edit_adapt.py), folded after it
    in order, their records kept beside. Refuses an adapter trained on another tokenizer."""
    from peft import PeftModel

    from quickcode.draft_model.prune import drop_layers
    from quickcode.draft_model.train import load_model, write_weights

    tok_sha = _sha256(base_dir / "tokenizer.json")
    records = {adapter_dir: adapter_dir / RECORD, **{a: _record_of(a) for a in then}}
    for folder, rec in records.items():
        if json.loads(rec.read_text())["tokenizer_sha256"] != tok_sha:
            raise SystemExit(f"{folder} was trained on another tokenizer than {base_dir}'s")
    record = json.loads((adapter_dir / RECORD).read_text())
    base = drop_layers(load_model(base_dir), record.get("dropped_layers", []))
    model = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    for extra in then:
        model = PeftModel.from_pretrained(model, extra).merge_and_unload()
    write_weights(model, base_dir, out_dir)
    for name in BASE_RECORDS:
        if (base_dir / name).exists():
            shutil.copy(base_dir / name, out_dir / name)
    shutil.copy(adapter_dir / fim.TEMPLATE_FILE, out_dir / fim.TEMPLATE_FILE)
    for rec in records.values():
        shutil.copy(rec, out_dir / rec.name)
    return out_dir


def _record_of(adapter_dir: Path) -> Path:
    """An adapter folder's record of how it was made (quickcode_*adapt.json)."""
    found = sorted(adapter_dir.glob("quickcode_*adapt.json"))
    if not found:
        raise SystemExit(f"{adapter_dir} has no quickcode_*adapt.json record: not an adapter of ours")
    return found[0]


def _from_adapter(model, base_dir: Path, adapter_dir: Path):
    """`model` wrapped with the trainable adapter of `adapter_dir` (one trained on this base, unpruned)."""
    from peft import PeftModel

    record = json.loads((adapter_dir / RECORD).read_text())
    if record["tokenizer_sha256"] != _sha256(base_dir / "tokenizer.json"):
        raise SystemExit(f"{adapter_dir} was trained on another tokenizer than {base_dir}'s")
    if record.get("dropped_layers"):
        raise SystemExit(f"{adapter_dir} was trained without layers {record['dropped_layers']}: start from an "
                         f"adapter of the base with all its layers")
    return PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)


def _prune(model, eval_w, run_dir: Path, n: int) -> dict:
    """Drop the `n` least influential layers of `model`; the choice is kept in `run_dir`, so a resume drops the
    same ones. Returns the record's pruning fields: influence per layer, the dropped layers, held-out after."""
    from quickcode.draft_model.prune import drop_layers, layer_influence, least_influential
    from quickcode.draft_model.train import evaluate

    choice = run_dir / "quickcode_prune.json"
    if choice.exists():
        rec = json.loads(choice.read_text())
        if len(rec["dropped_layers"]) != n:
            raise SystemExit(f"{run_dir} dropped {len(rec['dropped_layers'])} layers, not {n}: another run's folder")
        drop_layers(model, rec["dropped_layers"])
        return rec
    influence = layer_influence(model, eval_w)
    rec = {"layers_before": len(influence), "influence": [round(x, 4) for x in influence],
           "dropped_layers": least_influential(influence, n)}
    drop_layers(model, rec["dropped_layers"])
    rec["heldout_pruned"] = evaluate(model, eval_w)
    run_dir.mkdir(parents=True, exist_ok=True)
    choice.write_text(json.dumps(rec, indent=1) + "\n")
    return rec


def _check_fim_data(base_dir: Path, tok_dir: Path) -> None:
    """The data was packed in the base's vocabulary, with FIM tokens the vocabulary has (not a prefix-only
    placeholder template): else the adapter would learn a layout the served prompts do not use."""
    tokmod.check_same_vocab(base_dir, tok_dir)
    spec = tok_dir / fim.TEMPLATE_FILE
    tok = tokmod.load(tok_dir)
    missing = [v for k, v in fim.template_names(tok_dir).items() if k in ("prefix_token", "suffix_token", "eot_token")
               and tok.token_to_id(v) is None]
    if missing or (spec.exists() and json.loads(spec.read_text()).get("prefix_only")):
        raise SystemExit(f"{tok_dir} has no FIM template: prepare the data with --tokenizer-from a folder whose "
                         f"{fim.TEMPLATE_FILE} names the FIM tokens")


def _base_import(base_dir: Path) -> dict | None:
    f = base_dir / "quickcode_import.json"
    return json.loads(f.read_text()) if f.exists() else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
