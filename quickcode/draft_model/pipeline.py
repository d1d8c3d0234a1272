"""The model team's stages, each resumable: prepare (corpus → tokenizer → packed bins), train, distil.

Every stage skips work whose output already exists (pass force=True to redo), so an interrupted run is
continued by running the same command again.
"""
from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from quickcode.draft_model import corpus, dedup, fim, pack, tokenizer as tokmod
from quickcode.draft_model.configs import MODEL_SIZES, TrainProfile


def prepare(data_dir: Path, sources: list[str], *, heldout_fraction: float = 0.05, vocab_size: int = 8192,
            chunk_chars: int = 2000, fim_rate: float = 0.7, spm_rate: float = 0.5, passes: int = 2,
            max_docs: int | None = None, force: bool = False, seed: int = 0,
            tokenizer_from: Path | None = None, cache_dir: Path | None = None,
            decontaminate: list[Path] | None = None, humaneval: bool = True, workers: int = 1,
            fim_cut: str = "cursor", tokenizer_chars: int = 400_000_000,
            spm_middle_token: bool | None = None) -> dict:
    """`tokenizer_from`: a target's HF folder whose tokenizer (and FIM template) the data uses instead of a
    freshly trained BPE — a draft for a real target must share the target's vocabulary. `cache_dir`: where
    PyPI sdists are kept (`pypi:` sources). Training files sharing a 13-token run with HumanEval (`humaneval`)
    or with the problems of a `decontaminate` JSONL file are dropped. BPE is trained on at most
    `tokenizer_chars` characters of training text (a stable sample of whole documents). `spm_middle_token`
    (None: the tokenizer folder's template decides) is written into the data's FIM template."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if force or not (data_dir / "manifest.json").exists():
        benchmarks = {"humaneval": dedup.humaneval_texts()} if humaneval else {}
        for path in decontaminate or []:
            benchmarks[Path(path).name.split(".")[0]] = dedup.jsonl_texts(Path(path))
        train, heldout, stats = corpus.collect(sources, heldout_fraction, cache_dir=cache_dir,
                                               benchmarks=benchmarks, workers=workers)
        if max_docs:
            train, heldout = train[:max_docs], heldout[: max(2, max_docs // 10)]
        corpus.write(data_dir, train, heldout, stats)
    train = corpus.read_docs(data_dir, "train")
    heldout = corpus.read_docs(data_dir, "heldout")
    if not heldout:
        raise SystemExit("the held-out split is empty: add sources or raise --heldout-fraction")
    tok_dir = data_dir / "tokenizer"
    if tokenizer_from is not None and (tok_dir / "tokenizer.json").exists() and not force:
        tokmod.check_same_vocab(tokenizer_from, tok_dir)  # the bins were packed with another tokenizer: --force
    if force or not (tok_dir / "tokenizer.json").exists():
        if tokenizer_from is not None:
            tokmod.copy_hf(tokenizer_from, tok_dir)
        else:
            tok = tokmod.train_bpe(tokmod.sample_texts((d.text for d in train), tokenizer_chars), vocab_size)
            tokmod.save_hf(tok, tok_dir, model_max_length=max(s.max_position_embeddings for s in MODEL_SIZES.values()))
    tok = tokmod.load(tok_dir)
    if spm_middle_token is not None:
        order = json.loads((tok_dir / fim.TEMPLATE_FILE).read_text()).get("order", "spm") \
            if (tok_dir / fim.TEMPLATE_FILE).exists() else "spm"
        fim.write_template(tok_dir, order, {**fim.template_names(tok_dir), fim.SPM_MIDDLE: spm_middle_token})
    names = fim.template_names(tok_dir)
    counts = {}
    for split, docs, passes_ in (("train", train, passes), ("heldout", heldout, 1)):
        out = data_dir / f"{split}.bin"
        if force or not out.exists():
            # held-out is plain text (no FIM): its loss is the model's next-token quality
            pack.pack(tok, docs, out, chunk_chars=chunk_chars, fim_rate=fim_rate if split == "train" else 0.0,
                      spm_rate=spm_rate, passes=passes_, seed=seed, names=names, fim_cut=fim_cut)
        counts[split] = len(pack.load_bin(out))
    if force or not (data_dir / "heldout_fim.jsonl").exists():
        pack.write_fim_eval(heldout, data_dir / "heldout_fim.jsonl", n=400, seed=seed)
    manifest = json.loads((data_dir / "manifest.json").read_text())
    summary = {"train_docs": len(train), "heldout_docs": len(heldout), "train_tokens": counts["train"],
               "heldout_tokens": counts["heldout"], "vocab_size": tok.get_vocab_size(),
               "chars_per_token": round(sum(len(d.text) for d in heldout) / max(1, counts["heldout"]), 2),
               "train_chars": sum(len(d.text) for d in train), "sources": manifest.get("sources"),
               "passes": passes, "fim_rate": fim_rate, "fim_cut": fim_cut, "spm_rate": spm_rate,
               "spm_middle_token": names[fim.SPM_MIDDLE]}
    (data_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def provenance(kind: str, size: str, p: TrainProfile, result: dict, data_dir: Path, argv: list[str]) -> dict:
    manifest = json.loads((data_dir / "manifest.json").read_text())
    return {
        "kind": kind, "size": size, "profile": p.name, "command": command_line(argv),
        # the window length it learnt: the backend serves it with at most this context
        # (quickcode/backend/model_info.py)
        "trained_context_tokens": p.seq_len,
        "result": result, "data_summary": json.loads((data_dir / "summary.json").read_text()),
        "heldout_modules": manifest["heldout_modules"], "trained_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        # for the model card (quickcode/draft_model/card.py): what the kept files are licensed under, what was
        # refused
        "data_licences": manifest.get("licences"), "data_refused_licences": manifest.get("refused_licence"),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0]},
    }


def train_model(data_dir: Path, size_name: str, p: TrainProfile, run_dir: Path, export_dir: Path, *,
                steps: int | None, minutes: float | None, teacher_dir: Path | None = None,
                init_dir: Path | None = None, seed: int = 0, argv: list[str] | None = None,
                cooldown_from: Path | None = None, freeze_embeddings: bool = False) -> dict:
    import torch

    from quickcode.draft_model.train import build_model, device, export, load_model, train

    tok_dir = data_dir / "tokenizer"
    _keep_command(run_dir, argv or [])
    teacher = None
    if teacher_dir is not None:
        tokmod.check_same_vocab(teacher_dir, tok_dir)
        teacher = load_model(teacher_dir, torch.bfloat16 if device().type == "cuda" else torch.float32)
    model = load_model(init_dir) if init_dir else build_model(MODEL_SIZES[size_name], tok_dir, seed)
    if freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)   # tied: the head stays the target's too
    n_params = sum(q.numel() for q in model.parameters())
    label = f"{'distil' if teacher is not None else 'train'} {size_name} ({n_params / 1e6:.2f}M)"
    result = train(model, p, data_dir, run_dir, steps=steps, minutes=minutes, teacher=teacher, seed=seed,
                   label=label, cooldown_from=cooldown_from)
    result["params"] = n_params
    kind = "draft-distilled" if teacher is not None else ("draft" if "draft" in size_name else "target")
    prov = provenance(kind, size_name, p, result, data_dir, argv or [])
    if teacher_dir is not None:
        prov["teacher"] = str(teacher_dir)
    if init_dir is not None:
        prov["init"] = str(init_dir)
        prov["frozen_embeddings"] = freeze_embeddings
    if cooldown_from is not None:
        prov["cooldown_from"] = str(cooldown_from)
        run_command = _kept_command(Path(cooldown_from))
        if run_command:
            prov["run_command"] = run_command      # the run the branch came from: both make the model
    export(model, tok_dir, export_dir, prov)
    return result


RUN_COMMAND = "command.txt"     # a run folder's first command: a cooldown branch's export names its run


def command_line(argv: list[str]) -> str:
    return " ".join(["quickcode", *argv])


def _keep_command(run_dir: Path, argv: list[str]) -> None:
    path = Path(run_dir) / RUN_COMMAND
    if argv and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(command_line(argv) + "\n")


def _kept_command(run_dir: Path) -> str:
    path = run_dir / RUN_COMMAND
    return path.read_text().strip() if path.exists() else ""
