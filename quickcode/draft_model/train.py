"""The training loop for targets and drafts (and, with a teacher, distillation): resumable, with progress.

State lives in `<out>/ckpt.pt` (model, optimizer, step, the fixed step budget, RNG); rerunning the same
command resumes where it stopped. A long run's learning rate stays high until its last steps (cosine over the
whole budget), so a model exported mid-run is worse than one at the same step would be with the decay done; a
cooldown branch (`cooldown_from`) starts from such a run's latest checkpoint — weights, optimizer, position in
the data — and takes its learning rate linearly down to the run's minimum in a few hundred steps, in its own
folder, while the run itself goes on (warmup-stable-decay, as MiniCPM and DeepSeek's runs export mid-training).
`export` writes an HF folder (bf16 safetensors + tokenizer + FIM template) that vLLM loads.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from quickcode.draft_model import fim, tokenizer as tokmod
from quickcode.draft_model.configs import ModelSize, TrainProfile
from quickcode.draft_model.pack import load_bin


def build_model(size: ModelSize, tok_dir: Path, seed: int):
    from transformers import LlamaForCausalLM

    tok = tokmod.load(tok_dir)
    torch.manual_seed(seed)
    cfg = size.hf_config(tok.get_vocab_size(), tok.token_to_id(fim.template_names(tok_dir)["eot_token"]))
    return LlamaForCausalLM(cfg)


def load_model(model_dir: Path, dtype: torch.dtype = torch.float32):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(model_dir, dtype=dtype)


def device() -> torch.device:
    """CUDA when there is one (the gpu profile), else the CPU (the embedded default)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Windows:
    """Random (B, T+1) windows of a packed token stream; `fixed` gives the same windows every call."""

    def __init__(self, path: Path, seq_len: int, seed: int):
        self.data = load_bin(path)
        self.seq_len = seq_len
        self.rng = np.random.default_rng(seed)
        if len(self.data) <= seq_len + 1:
            raise ValueError(f"{path} holds {len(self.data)} tokens, fewer than one window of {seq_len + 1}")

    def batch(self, batch_size: int, rng: np.random.Generator | None = None) -> torch.Tensor:
        starts = (rng or self.rng).integers(0, len(self.data) - self.seq_len - 1, batch_size)
        return torch.from_numpy(np.stack([self.data[s : s + self.seq_len + 1].astype(np.int64) for s in starts]))

    def fixed(self, n: int, batch_size: int) -> list[torch.Tensor]:
        rng = np.random.default_rng(1234)
        return [self.batch(batch_size, rng) for _ in range(max(1, n // batch_size))]


def lr_at(step: int, total: int, p: TrainProfile, cooldown: dict | None = None) -> float:
    """The learning rate of `step` of `total`: linear warm-up then cosine to `min_lr_ratio` × lr; in a cooldown
    branch (`cooldown_state`), linear from the run's rate where the branch left it to the run's minimum."""
    if cooldown is not None:
        s0, lr0, lr_end = cooldown["from_step"], cooldown["lr0"], cooldown["lr_end"]
        frac = min(1.0, (step + 1 - s0) / max(1, total - s0))
        return lr0 + (lr_end - lr0) * frac
    if step < p.warmup_steps:
        return p.lr * (step + 1) / p.warmup_steps
    frac = min(1.0, (step - p.warmup_steps) / max(1, total - p.warmup_steps))
    return p.lr * (p.min_lr_ratio + (1 - p.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
            alpha: float, temperature: float) -> torch.Tensor:
    """alpha * KL(teacher || student) (per token, at temperature T, scaled by T^2) + (1-alpha) * CE."""
    v = student_logits.size(-1)
    s = student_logits.reshape(-1, v).float() / temperature
    t = teacher_logits.reshape(-1, v).float() / temperature
    kl = F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), log_target=True, reduction="batchmean")
    ce = F.cross_entropy(student_logits.reshape(-1, v).float(), targets.reshape(-1))
    return alpha * kl * temperature**2 + (1 - alpha) * ce


@torch.no_grad()
def evaluate(model, windows: list[torch.Tensor]) -> dict[str, float]:
    """Held-out next-token loss (nats), perplexity and top-1 accuracy."""
    model.eval()
    loss_sum, correct, n = 0.0, 0, 0
    dev = next(model.parameters()).device
    for w in windows:
        w = w.to(dev)
        logits = model(input_ids=w[:, :-1]).logits.float()
        y = w[:, 1:]
        loss_sum += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        correct += (logits.argmax(-1) == y).sum().item()
        n += y.numel()
    model.train()
    loss = loss_sum / n
    return {"loss": loss, "ppl": math.exp(min(loss, 50)), "top1": correct / n}


class Trainer:
    """One optimisation step of `model` under profile `p`, by the profile's implementation:
    - `hf` (the original path, kept selectable and benchmarked against): transformers' LlamaForCausalLM, the
      full (tokens × vocab) logits, cross-entropy on them, AdamW (foreach);
    - `fast`: the same parameters in `quickcode/draft_model/fastllama.py` (fused SDPA attention, the loss over
    token
      chunks without keeping the logits), the decoder body `torch.compile`d when `p.compile`, fused AdamW.
    Both update the same parameter tensors: `model` (the HF module) holds the trained weights either way."""

    def __init__(self, model, p: TrainProfile, teacher=None):
        self.model, self.p, self.teacher = model, p, teacher
        self.net = model
        if p.impl == "fast":
            from quickcode.draft_model.fastllama import FastLlama

            self.net = FastLlama(model.config)
            self.net.load_state_dict(model.state_dict())
            # share the very tensors: the HF module (checkpoints, export) sees every update
            hf_params = dict(model.named_parameters(remove_duplicate=False))
            for name, param in list(self.net.named_parameters(remove_duplicate=False)):
                mod_name, _, attr = name.rpartition(".")
                setattr(self.net.get_submodule(mod_name), attr, hf_params[name])
            if p.compile:
                self.net.compile_body()
        self.fwd = torch.compile(model) if (p.compile and p.impl == "hf") else model
        decay = [q for n, q in model.named_parameters() if q.dim() >= 2]
        no_decay = [q for n, q in model.named_parameters() if q.dim() < 2]
        fused = {"fused": True} if p.fused_adamw else {}
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": p.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=p.lr, betas=(0.9, 0.95),
                                     **fused)

    def step(self, batch: torch.Tensor, lr: float) -> float:
        p = self.p
        for g in self.opt.param_groups:
            g["lr"] = lr
        x, y = batch[:, :-1], batch[:, 1:]
        dev = batch.device
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=p.bf16):
            if p.loss_positions and p.impl == "hf":
                loss = self._sampled_loss(x, y)
            elif self.teacher is not None:
                logits = self.net(input_ids=x)
                logits = logits.logits if hasattr(logits, "logits") else logits
                with torch.no_grad():
                    t_logits = self.teacher(input_ids=x).logits
                loss = kd_loss(logits, t_logits, y, p.kd_alpha, p.kd_temperature)
            elif p.impl == "fast":
                loss = self.net.loss(x, y, p.ce_chunk_tokens)
            else:
                logits = self.fwd(input_ids=x).logits
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), p.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.item()


    def _sampled_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss on `p.loss_positions` random positions: the decoder runs on all of them, the LM head (and the
        teacher's head) only on the sampled ones; distillation when there is a teacher and kd_alpha > 0."""
        p = self.p
        h = self.model.model(input_ids=x).last_hidden_state
        idx = torch.randperm(h.size(0) * h.size(1), device=h.device)[: p.loss_positions]
        logits = self.model.lm_head(h.reshape(-1, h.size(-1))[idx])
        targets = y.reshape(-1)[idx]
        if self.teacher is None or p.kd_alpha == 0:
            return F.cross_entropy(logits.float(), targets)
        with torch.no_grad():
            ht = self.teacher.model(input_ids=x).last_hidden_state
            t_logits = self.teacher.lm_head(ht.reshape(-1, ht.size(-1))[idx])
        return kd_loss(logits, t_logits, targets, p.kd_alpha, p.kd_temperature)


def cooldown_state(state: dict, source: Path, steps: int | None) -> dict:
    """A run's checkpoint as the start of a cooldown branch of `steps` steps: the same weights, optimizer and
    data position; the schedule (recorded in the branch's checkpoint, so that it resumes the same) decays from
    the rate the run was at to the run's own minimum."""
    if steps is None or steps < 1:
        raise ValueError("a cooldown needs --steps ≥ 1")
    if state.get("cooldown") is not None:
        raise ValueError(f"{source} is itself a cooldown branch: branch from the run it came from")
    src = TrainProfile(**state["profile"])
    s0 = state["step"]
    return {**state, "total": s0 + steps, "cooldown": {"from": str(source), "from_step": s0,
                                                      "lr0": lr_at(s0, state["total"], src),
                                                      "lr_end": src.lr * src.min_lr_ratio}}


def train(model, p: TrainProfile, data_dir: Path, out_dir: Path, *, steps: int | None = None,
          minutes: float | None = None, teacher=None, seed: int = 0, label: str = "train",
          cooldown_from: Path | None = None) -> dict:
    """Train until the step budget is spent; resumes from `<out>/ckpt.pt`. Returns the final eval.
    `cooldown_from`: a run folder; with no checkpoint of its own yet, start as a cooldown branch of that run's
    latest checkpoint, `steps` steps long (`cooldown_state`)."""
    if p.threads:
        torch.set_num_threads(p.threads)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = device()
    model.to(dev)
    # a 13B teacher only fits one GPU in bf16; on the CPU its weights stay fp32 and its forward runs under the
    # step's autocast (bf16 where the profile's bf16 is on: CPUs with native bf16, cpu_features.py)
    if teacher is not None:
        teacher.to(dev, dtype=torch.bfloat16 if dev.type == "cuda" else None)
        teacher.eval()
    ckpt_path = out_dir / "ckpt.pt"
    train_w = Windows(data_dir / "train.bin", p.seq_len, seed)
    eval_w = Windows(data_dir / "heldout.bin", p.seq_len, seed).fixed(p.eval_windows, p.batch_size)
    step, total, history, elapsed_s = 0, steps, [], 0.0
    state = None
    if ckpt_path.exists():
        state = torch.load(ckpt_path, weights_only=False, map_location=dev)
    elif cooldown_from is not None:
        state = cooldown_state(torch.load(Path(cooldown_from) / "ckpt.pt", weights_only=False, map_location=dev),
                               Path(cooldown_from), steps)
        print(f"[{label}] cooldown of {cooldown_from} from step {state['step']}: lr "
              f"{state['cooldown']['lr0']:.2e} → {state['cooldown']['lr_end']:.2e} over {steps} steps")
    if state is not None:
        model.load_state_dict(state["model"])
    trainer = Trainer(model, p, teacher)
    opt = trainer.opt
    if state is not None:
        opt.load_state_dict(state["opt"])
        step, total, history, elapsed_s = state["step"], state["total"], state["history"], state["elapsed_s"]
        train_w.rng.bit_generator.state = state["rng"]
        print(f"[{label}] resuming at step {step}/{total}")
    cooldown = state.get("cooldown") if state is not None else None

    def one_step(i: int) -> float:
        return trainer.step(train_w.batch(p.batch_size).to(dev, non_blocking=True),
                            lr_at(i, total or 10**9, p, cooldown))

    if total is None:  # a time budget: measure the step rate, then fix the step count (kept on resume)
        assert minutes, "give steps or minutes"
        one_step(step)       # untimed: torch.compile compiles here (tens of seconds), the allocator warms up
        step += 1
        t0 = time.perf_counter()
        for _ in range(5):
            one_step(step)
            step += 1
        per_step = (time.perf_counter() - t0) / 5
        total = max(step + 1, int(minutes * 60 / per_step))
        print(f"[{label}] {per_step * 1000:.0f} ms/step → {total} steps for {minutes} min "
              f"({total * p.batch_size * p.seq_len / 1e6:.1f}M tokens)")

    def save():
        tmp = ckpt_path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "total": total,
                    "history": history, "elapsed_s": elapsed_s, "rng": train_w.rng.bit_generator.state,
                    "profile": asdict(p), "hf_config": model.config.to_dict(), "cooldown": cooldown}, tmp)
        os.replace(tmp, ckpt_path)

    bar = tqdm(total=total, initial=step, desc=label, unit="step", dynamic_ncols=True)
    t_last = time.perf_counter()
    ema = None
    while step < total:
        loss = one_step(step)
        ema = loss if ema is None else 0.98 * ema + 0.02 * loss
        step += 1
        bar.update(1)
        bar.set_postfix(loss=f"{ema:.3f}", lr=f"{opt.param_groups[0]['lr']:.1e}")
        if step % p.eval_every == 0 or step == total:
            now = time.perf_counter()
            elapsed_s += now - t_last
            t_last = now
            ev = evaluate(model, eval_w)
            history.append({"step": step, "train_loss": ema, **ev, "elapsed_s": round(elapsed_s, 1)})
            bar.write(f"[{label}] step {step}: train {ema:.3f}  held-out loss {ev['loss']:.3f} "
                      f"ppl {ev['ppl']:.1f} top1 {ev['top1']:.3f}")
        if step % p.ckpt_every == 0 or step == total:
            save()
    bar.close()
    final = history[-1] if history else evaluate(model, eval_w)
    (out_dir / "history.json").write_text(json.dumps(history, indent=1) + "\n")
    return {**final, "steps": total, "tokens": total * p.batch_size * p.seq_len, "elapsed_s": elapsed_s}


def model_from_checkpoint(run_dir: Path):
    """The model of a run's latest checkpoint (to export a run that is still going, or was cut short)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    state = torch.load(run_dir / "ckpt.pt", weights_only=False)
    model = LlamaForCausalLM(LlamaConfig.from_dict(state["hf_config"]))
    model.load_state_dict(state["model"])
    return model, state


def export(model, tok_dir: Path, out_dir: Path, provenance: dict, fim_order: str = "spm") -> Path:
    """An HF folder vLLM loads: bf16 safetensors, tokenizer, FIM template, training provenance."""
    write_weights(model, tok_dir, out_dir)
    fim.write_template(out_dir, fim_order, fim.template_names(tok_dir))
    (out_dir / "quickcode_train.json").write_text(json.dumps(provenance, indent=1, default=str) + "\n")
    return out_dir


def write_weights(model, tok_dir: Path, out_dir: Path) -> None:
    """The weights (bf16 safetensors; the model stays fp32) and `tok_dir`'s tokenizer files, without
    generation_config.json: the part of an HF folder every export shares."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    model.to(torch.float32)
    for name in tokmod.HF_TOKENIZER_FILES:
        if (tok_dir / name).exists():  # a target's own tokenizer folder may lack special_tokens_map.json
            shutil.copy(tok_dir / name, out_dir / name)
    gen = out_dir / "generation_config.json"
    if gen.exists():
        gen.unlink()  # vLLM would take its defaults as sampling defaults; the backend sets its own
