"""Teach the default target to propose next edits: a LoRA adapter trained on real edit sequences in the served
prompt (quickcode/draft_model/edit_examples.py), with FIM windows mixed in so that it keeps completing.

The served default is INT8 (compressed-tensors W8A8), and vLLM's CPU backend serves no LoRA on those layers, so
the adapter is folded into the FIM model before quantization (scripts/build_default_model.sh): one model, one
engine, one prefix cache answer both kinds of request. That is why completion is trained beside the edits: each
step takes one batch of edit examples (loss on the answer only: the rewritten region and its end marker) and
one window of the FIM data (loss on every token), so an edit-only adapter cannot forget how to complete. The
LM head runs only on the positions with a loss. Checkpoints in the run folder (rerun to resume).
"""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from quickcode.draft_model.adapt import RECORD as FIM_RECORD
from quickcode.draft_model.adapt import _sha256, with_adapter

RECORD = "quickcode_edit_adapt.json"


def batches(examples: list, tokens_per_batch: int, rng: random.Random) -> list[list]:
    """`examples` in batches of at most `tokens_per_batch` padded tokens (similar lengths together), shuffled."""
    order = sorted(examples, key=lambda e: len(e.prompt) + len(e.answer))
    out, cur, longest = [], [], 0
    for e in order:
        n = len(e.prompt) + len(e.answer)
        if cur and max(longest, n) * (len(cur) + 1) > tokens_per_batch:
            out.append(cur)
            cur, longest = [], 0
        cur.append(e)
        longest = max(longest, n)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def tensors(batch: list):
    """(ids, attention mask, target ids with -100 where there is no loss) of a batch, right-padded."""
    import torch

    width = max(len(e.prompt) + len(e.answer) for e in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    targets = torch.full((len(batch), width), -100, dtype=torch.long)
    for i, e in enumerate(batch):
        seq = e.prompt + e.answer
        ids[i, :len(seq)] = torch.tensor(seq)
        mask[i, :len(seq)] = 1
        # position t predicts token t+1: the answer's tokens are the targets of the positions before them
        targets[i, len(e.prompt) - 1:len(seq) - 1] = torch.tensor(e.answer)
    return ids, mask, targets


def loss_on(model, ids, mask, targets):
    """Cross-entropy where `targets` has one, the LM head run on those positions only; (loss, right, count)."""
    import torch.nn.functional as F

    h = model.base_model.model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    keep = targets.reshape(-1) != -100
    logits = model.base_model.model.lm_head(h.reshape(-1, h.size(-1))[keep]).float()
    y = targets.reshape(-1)[keep]
    return F.cross_entropy(logits, y), int((logits.argmax(-1) == y).sum()), int(y.numel())


def evaluate(model, sets: list[tuple]) -> dict:
    import torch

    model.eval()
    total, right, count = 0.0, 0, 0
    with torch.no_grad():
        for ids, mask, targets in sets:
            loss, r, n = loss_on(model, ids, mask, targets)
            total, right, count = total + float(loss) * n, right + r, count + n
    model.train()
    return {"answer_loss": round(total / max(count, 1), 4), "answer_top1": round(right / max(count, 1), 4)}


def adapt_edits(base_dir: Path, edits_dir: Path, fim_dir: Path, run_dir: Path, out_dir: Path, *, steps: int,
                rank: int = 16, alpha: float = 32.0, lr: float = 3e-4, tokens_per_batch: int = 3072,
                fim_seq_len: int = 512, seed: int = 0, threads: int = 0, bf16: bool = True,
                eval_every: int = 50, eval_batches: int = 8, shape=None, argv: list[str] | None = None,
                progress=print) -> dict:
    """Train the edit adapter of `base_dir` (the FIM model) for `steps` steps on `edits_dir` (`quickcode model
    edits`) and `fim_dir` (FIM data packed with the base's vocabulary), checkpointing in `run_dir`; write it
    to `out_dir` with its record. `shape`: how requests are shaped (edit_examples.Shape, the client's defaults).
    Returns the held-out figures before and after."""
    import torch
    from tqdm import tqdm

    from quickcode.backend.fim_templates import FimTemplate
    from quickcode.draft_model import tokenizer as tokmod
    from quickcode.draft_model.edit_examples import Shape, examples_of
    from quickcode.draft_model.edit_pairs import read
    from quickcode.draft_model.pipeline import command_line
    from quickcode.draft_model.train import Windows, load_model

    if threads:
        torch.set_num_threads(threads)
    tokmod.check_same_vocab(base_dir, fim_dir / "tokenizer")
    tok = tokmod.load(base_dir)
    bos_id = FimTemplate.load(base_dir, tok).bos_id      # as the backend prompts it
    shape = shape or Shape()
    train_ex = [e for r in read(edits_dir, "train") for e in examples_of(r, tok, bos_id, shape)]
    held_ex = [e for r in read(edits_dir, "heldout") for e in examples_of(r, tok, bos_id, shape)]
    rng = random.Random(seed)
    held_sets = [tensors(b) for b in batches(held_ex, tokens_per_batch, random.Random(1234))[:eval_batches]]
    fim_w = Windows(fim_dir / "train.bin", fim_seq_len, seed)
    fim_held = Windows(fim_dir / "heldout.bin", fim_seq_len, seed).fixed(8, 2)

    model = with_adapter(load_model(base_dir), rank, alpha)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt = run_dir / "ckpt.pt"
    step, history, elapsed_s, epoch = 0, [], 0.0, []

    def fim_eval() -> float:
        with torch.no_grad():
            ls = [float(loss_on(model, w[:, :-1], torch.ones_like(w[:, :-1]), w[:, 1:])[0]) for w in fim_held]
        return round(sum(ls) / len(ls), 4)

    if not ckpt.exists():
        before = {**evaluate(model, held_sets), "fim_loss": fim_eval()}
    else:
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        step, history, elapsed_s, before = state["step"], state["history"], state["elapsed_s"], state["before"]
        rng.setstate(state["rng"])
        fim_w.rng.bit_generator.state = state["fim_rng"]
        progress(f"[edit-adapt] resuming at step {step}/{steps}")
    progress(f"[edit-adapt] {len(train_ex)} train examples ({sum(e.changes for e in train_ex)} with an edit), "
             f"{len(held_ex)} held-out; before: {before}")
    t_last = time.perf_counter()
    bar = tqdm(total=steps, initial=step, desc="edit-adapt", unit="step", dynamic_ncols=True)
    while step < steps:
        if not epoch:
            epoch = batches(train_ex, tokens_per_batch, rng)
        ids, mask, targets = tensors(epoch.pop())
        warm = min(1.0, (step + 1) / 20)
        for g in opt.param_groups:
            g["lr"] = lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            edit_loss = loss_on(model, ids, mask, targets)[0]
            w = fim_w.batch(1)
            fim_loss = loss_on(model, w[:, :-1], torch.ones_like(w[:, :-1]), w[:, 1:])[0]
            loss = edit_loss + fim_loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        bar.update(1)
        bar.set_postfix(edit=f"{float(edit_loss):.3f}", fim=f"{float(fim_loss):.3f}")
        if step % eval_every == 0 or step == steps:
            now = time.perf_counter()
            elapsed_s += now - t_last
            t_last = now
            ev = {"step": step, **evaluate(model, held_sets), "fim_loss": fim_eval(),
                  "elapsed_s": round(elapsed_s, 1)}
            history.append(ev)
            progress(f"[edit-adapt] {ev}")
            torch.save({"model": {k: v for k, v in model.state_dict().items() if "lora_" in k},
                        "opt": opt.state_dict(), "step": step, "history": history, "elapsed_s": elapsed_s,
                        "before": before, "rng": rng.getstate(), "fim_rng": fim_w.rng.bit_generator.state},
                       ckpt.with_suffix(".tmp"))
            ckpt.with_suffix(".tmp").replace(ckpt)
    bar.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    (out_dir / "README.md").unlink(missing_ok=True)
    edits_manifest = json.loads((edits_dir / "manifest.json").read_text())
    record = {"command": command_line(argv or []), "base": str(base_dir),
              "base_adapter": json.loads((base_dir / FIM_RECORD).read_text()).get("command")
              if (base_dir / FIM_RECORD).exists() else None,
              "tokenizer_sha256": _sha256(base_dir / "tokenizer.json"), "rank": rank, "alpha": alpha,
              "lr": lr, "steps": steps, "tokens_per_batch": tokens_per_batch, "fim_seq_len": fim_seq_len,
              "train_examples": len(train_ex), "train_examples_with_edit": sum(e.changes for e in train_ex),
              "heldout_examples": len(held_ex), "edits_lock_sha256": edits_manifest["lock_sha256"],
              "train_packages": edits_manifest["train_packages"],
              "heldout_packages": edits_manifest["heldout_packages"],
              "fim_data": json.loads((fim_dir / "summary.json").read_text()),
              "elapsed_s": round(elapsed_s, 1), "heldout_before": before, "heldout_after": history[-1]}
    (out_dir / RECORD).write_text(json.dumps(record, indent=1, default=str) + "\n")
    return {"heldout_before": before, "heldout_after": history[-1], "steps": steps}
