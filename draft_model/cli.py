"""`quickcode model ...`: the model team's commands (each resumable; rerun to continue)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    model = sub.add_parser("model", help="train, distil, evaluate, quantize and export models")
    msub = model.add_subparsers(dest="model_cmd", required=True)

    p = msub.add_parser("prepare", help="corpus → tokenizer → packed FIM token bins")
    p.add_argument("--data", type=Path, default=Path("runs/data"))
    p.add_argument("--source", action="append", default=None,
                   help="'stdlib' or a folder of code with a permissive LICENSE (repeatable)")
    p.add_argument("--heldout-fraction", type=float, default=0.05)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--chunk-chars", type=int, default=2000)
    p.add_argument("--fim-rate", type=float, default=0.7)
    p.add_argument("--spm-rate", type=float, default=0.5)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--max-docs", type=int, default=None, help="cap the corpus (tiny test runs)")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=_prepare)

    for name, helptext in (("train", "train a target or a draft from scratch"),
                           ("distill", "train a draft on a target's logits (KL) and the data")):
        t = msub.add_parser(name, help=helptext)
        t.add_argument("--data", type=Path, default=Path("runs/data"))
        t.add_argument("--size", required=True, help="a preset of draft_model/configs.py (cpu-target, cpu-draft, ...)")
        t.add_argument("--profile", default="cpu", help="test | cpu | gpu")
        t.add_argument("--steps", type=int, default=None)
        t.add_argument("--minutes", type=float, default=None, help="time budget (fixes the step count)")
        t.add_argument("--run", type=Path, required=True, help="checkpoint folder (resume from it)")
        t.add_argument("--export", type=Path, required=True, help="HF folder to write")
        t.add_argument("--init", type=Path, default=None, help="start from this HF folder")
        t.add_argument("--seq-len", type=int, default=None)
        t.add_argument("--batch-size", type=int, default=None)
        t.add_argument("--lr", type=float, default=None)
        t.add_argument("--threads", type=int, default=None)
        t.add_argument("--seed", type=int, default=0)
        if name == "distill":
            t.add_argument("--teacher", type=Path, required=True, help="the target's HF folder")
            t.add_argument("--kd-alpha", type=float, default=None)
        t.set_defaults(func=_train)

    e = msub.add_parser("export", help="export a run's latest checkpoint as an HF folder (even mid-run)")
    e.add_argument("--data", type=Path, default=Path("runs/data"))
    e.add_argument("--run", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--kind", default="target", help="target | draft | draft-distilled (recorded in provenance)")
    e.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from draft_model.pipeline import provenance
    from draft_model.configs import TrainProfile
    from draft_model.train import export, model_from_checkpoint

    model, state = model_from_checkpoint(args.run)
    p = TrainProfile(**state["profile"])
    result = {**(state["history"][-1] if state["history"] else {}), "steps_done": state["step"],
              "steps_planned": state["total"], "params": sum(q.numel() for q in model.parameters())}
    prov = provenance(args.kind, args.kind, p, result, args.data, sys.argv[1:])
    export(model, args.data / "tokenizer", args.out, prov)
    print(json.dumps(result))
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from draft_model.pipeline import prepare

    summary = prepare(args.data, args.source or ["stdlib"], heldout_fraction=args.heldout_fraction,
                      vocab_size=args.vocab, chunk_chars=args.chunk_chars, fim_rate=args.fim_rate,
                      spm_rate=args.spm_rate, passes=args.passes, max_docs=args.max_docs, force=args.force)
    print(json.dumps(summary))
    return 0


def _train(args: argparse.Namespace) -> int:
    from draft_model.configs import profile
    from draft_model.pipeline import train_model

    if args.steps is None and args.minutes is None:
        raise SystemExit("give --steps or --minutes")
    p = profile(args.profile, seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                threads=args.threads, kd_alpha=getattr(args, "kd_alpha", None))
    result = train_model(args.data, args.size, p, args.run, args.export, steps=args.steps, minutes=args.minutes,
                         teacher_dir=getattr(args, "teacher", None), init_dir=args.init, seed=args.seed,
                         argv=sys.argv[1:])
    print(json.dumps(result))
    return 0
