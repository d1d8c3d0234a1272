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
                   help="'stdlib', 'site:<installed distribution>', 'pypi:<lock.tsv>' (e.g. "
                        "pypi:quickcode/draft_model/sources/pypi.tsv) or a folder with a permissive LICENSE (repeatable)")
    p.add_argument("--heldout-fraction", type=float, default=0.05)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--chunk-chars", type=int, default=2000)
    p.add_argument("--fim-rate", type=float, default=0.7)
    p.add_argument("--spm-rate", type=float, default=0.5)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--max-docs", type=int, default=None, help="cap the corpus (tiny test runs)")
    p.add_argument("--tokenizer-from", type=Path, default=None,
                   help="a target's HF folder: use its tokenizer (and FIM template) instead of training BPE")
    p.add_argument("--cache-dir", type=Path, default=Path("runs/cache"),
                   help="downloads of pypi: sources (<cache-dir>/pypi/<sdist>, verified by the lock's sha256)")
    p.add_argument("--decontaminate", type=Path, action="append", default=None,
                   help="a JSONL of evaluation problems (prompt/text/canonical_solution/code) training must not "
                        "share a 13-token run with (repeatable; HumanEval is always checked)")
    p.add_argument("--workers", type=int, default=1, help="processes scanning sources (CPU-heavy: one such job at a time)")
    p.add_argument("--fim-cut", choices=("cursor", "legacy"), default="cursor",
                   help="where FIM samples are cut: at editor cursor places, or the old half-random cuts")
    p.add_argument("--spm-middle-token", choices=("yes", "no"), default=None,
                   help="SPM samples with the middle token between prefix and middle (yes), or the middle "
                        "continuing the prefix (no; written into the data's FIM template, so the trained model "
                        "is prompted that way); default: the tokenizer folder's (yes when it does not say)")
    p.add_argument("--tokenizer-chars", type=int, default=400_000_000,
                   help="train BPE on a stable sample of at most this many characters")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=_prepare)

    ed = msub.add_parser("edits", help="edit sequences from consecutive released versions of PyPI packages: "
                                       "train/held-out JSONL and a manifest (quickcode/draft_model/edit_pairs.py)")
    ed.add_argument("--data", type=Path, default=Path("runs/edits"))
    ed.add_argument("--lock", type=Path, default=Path("quickcode/draft_model/sources/pypi-edits.tsv"),
                    help="the sdists (consecutive versions of each package) pinned by sha256")
    ed.add_argument("--cache-dir", type=Path, default=Path("runs/cache"),
                    help="downloads (<cache-dir>/pypi/<sdist>, verified by the lock's sha256)")
    ed.add_argument("--heldout-fraction", type=float, default=0.2, help="share of whole packages held out")
    ed.add_argument("--window-lines", type=int, default=8,
                    help="the next edit starts at most this many lines after the previous one ends")
    ed.set_defaults(func=_edits)

    for name, helptext in (("train", "train a target or a draft from scratch"),
                           ("distill", "train a draft on a target's logits (KL) and the data")):
        t = msub.add_parser(name, help=helptext)
        t.add_argument("--data", type=Path, default=Path("runs/data"))
        t.add_argument("--size", required=True, help="a preset of quickcode/draft_model/configs.py (cpu-target, cpu-draft, ...)")
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
        t.add_argument("--impl", choices=("hf", "fast"), default=None,
                       help="the step: transformers' Llama (the original path) or quickcode/draft_model/fastllama.py "
                            "(default on the cpu profile: fast in bf16 where the CPU has native bf16, "
                            "else hf)")
        t.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                       help="bf16 autocast, fp32 weights and optimizer (the profile's default otherwise)")
        t.add_argument("--ckpt-every", type=int, default=None, help="evaluate and checkpoint every N steps")
        t.add_argument("--warmup-steps", type=int, default=None)
        t.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                       help="torch.compile the model (the profile's default otherwise)")
        t.add_argument("--seed", type=int, default=0)
        t.add_argument("--freeze-embeddings", action="store_true",
                       help="keep the (tied) embeddings and head as --init has them: a draft made by `model shrink` "
                            "shares its target's")
        t.add_argument("--loss-positions", type=int, default=None,
                       help="the loss (and LM head) on this many random positions per batch (0: all): a small "
                            "draft's cost is mostly its head over the vocabulary")
        t.add_argument("--cooldown-from", type=Path, default=None, metavar="RUN",
                       help="a cooldown branch of RUN (a --run folder, still going or not): start from its latest "
                            "checkpoint and take the learning rate linearly down to the run's minimum over --steps "
                            "steps, in --run (the run itself is not touched); to export a usable model mid-run")
        if name == "distill":
            t.add_argument("--teacher", type=Path, required=True, help="the target's HF folder")
            t.add_argument("--kd-alpha", type=float, default=None)
        t.set_defaults(func=_train)

    a = msub.add_parser("adapt", help="teach a pretrained registry model FIM: a LoRA adapter trained on FIM data "
                                      "packed in its vocabulary (quickcode/draft_model/adapt.py)")
    a.add_argument("--base", type=Path, required=True, help="the imported model (e.g. runs/registry-smollm2)")
    a.add_argument("--data", type=Path, required=True,
                   help="data prepared with --tokenizer-from a folder holding the base's tokenizer and a FIM template")
    a.add_argument("--run", type=Path, required=True, help="checkpoint folder (resume from it)")
    a.add_argument("--export", type=Path, required=True, help="the adapter folder to write (small: commit it)")
    a.add_argument("--steps", type=int, required=True)
    a.add_argument("--rank", type=int, default=16)
    a.add_argument("--alpha", type=float, default=32.0)
    a.add_argument("--init-adapter", type=Path, default=None,
                   help="start from this adapter of the same base (its rank and alpha) instead of a fresh one")
    a.add_argument("--drop-layers", type=int, default=0,
                   help="first drop this many least influential decoder layers (quickcode/draft_model/prune.py); the "
                        "adapter heals the shallower model and merge drops the same layers")
    a.add_argument("--seq-len", type=int, default=1024)
    a.add_argument("--batch-size", type=int, default=2)
    a.add_argument("--lr", type=float, default=2e-4)
    a.add_argument("--warmup-steps", type=int, default=30)
    a.add_argument("--ckpt-every", type=int, default=100, help="evaluate and checkpoint every N steps")
    a.add_argument("--eval-windows", type=int, default=16)
    a.add_argument("--threads", type=int, default=None)
    a.add_argument("--seed", type=int, default=0)
    a.set_defaults(func=_adapt)

    ea = msub.add_parser("edit-adapt", help="teach the FIM model next edits: a LoRA adapter on real edit sequences "
                                            "(model edits) in the served prompt, FIM windows mixed in "
                                            "(quickcode/draft_model/edit_adapt.py); fold it with model merge")
    ea.add_argument("--base", type=Path, required=True, help="the FIM model folder (e.g. runs/models/smollm2-fim)")
    ea.add_argument("--edits", type=Path, default=Path("runs/edits"), help="the output of `quickcode model edits`")
    ea.add_argument("--fim-data", type=Path, required=True, help="FIM data packed with the base's vocabulary")
    ea.add_argument("--run", type=Path, required=True, help="checkpoint folder (resume from it)")
    ea.add_argument("--export", type=Path, required=True, help="the adapter folder to write (small: commit it)")
    ea.add_argument("--steps", type=int, required=True)
    ea.add_argument("--rank", type=int, default=16)
    ea.add_argument("--alpha", type=float, default=32.0)
    ea.add_argument("--lr", type=float, default=3e-4)
    ea.add_argument("--tokens-per-batch", type=int, default=3072, help="padded tokens of edit examples per step")
    ea.add_argument("--eval-every", type=int, default=50, help="evaluate and checkpoint every N steps")
    ea.add_argument("--threads", type=int, default=0)
    ea.add_argument("--seed", type=int, default=0)
    ea.set_defaults(func=_edit_adapt)

    s = msub.add_parser("shrink", help="a draft scaled down from a target: its tokenizer and embeddings, fewer "
                                       "and narrower layers (quickcode/draft_model/shrink.py); then `model distill`")
    s.add_argument("--target", type=Path, required=True, help="the target's HF folder (bf16/fp32, not INT8)")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--data", type=Path, required=True, help="prepared data in the target's vocabulary (held-out)")
    s.add_argument("--layers", type=int, required=True, help="decoder layers the draft keeps")
    s.add_argument("--keep", type=lambda v: [int(x) for x in v.split(",")], default=None,
                   help="exactly these layer indices (comma-separated) instead of choosing by influence")
    s.add_argument("--intermediate", type=int, default=None, help="MLP neurons per kept layer (default: the target's)")
    s.add_argument("--windows", type=int, default=16, help="held-out windows of 512 tokens to score layers and neurons")
    s.set_defaults(func=_shrink)

    m = msub.add_parser("merge", help="fold an adapter (model adapt) into its base: an HF folder vLLM serves")
    m.add_argument("--base", type=Path, required=True)
    m.add_argument("--adapter", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--then-adapter", type=Path, action="append", default=[],
                   help="an adapter of the merged model (model edit-adapt), folded after --adapter (repeatable)")
    m.set_defaults(func=_merge)

    v = msub.add_parser("evaluate", help="offline: held-out loss/top-1, draft acceptance per K and code pattern")
    v.add_argument("--target", type=Path, default=Path("models/target"))
    v.add_argument("--draft", type=Path, default=None, help="the draft's HF folder (must share the target's vocabulary)")
    v.add_argument("--data", type=Path, default=Path("runs/data"),
                   help="prepared data of the target (else its held-out modules are rebuilt from provenance)")
    v.add_argument("--prompts", type=int, default=40, help="held-out FIM prompts")
    v.add_argument("--max-tokens", type=int, default=32, help="completion tokens per prompt")
    v.add_argument("--out", type=Path, default=None, help="write the full result (JSON) here")
    v.set_defaults(func=_evaluate)

    q = msub.add_parser("quantize", help="W8A8 INT8 (compressed-tensors via llm-compressor, in .venv-quant)")
    q.add_argument("--src", type=Path, default=Path("models/target"))
    q.add_argument("--out", type=Path, default=Path("models/target-int8"))
    q.add_argument("--data", type=Path, default=Path("runs/data"), help="calibration (train.bin) and held-out loss")
    q.add_argument("--calib-samples", type=int, default=64)
    q.add_argument("--calib-seq-len", type=int, default=512)
    q.add_argument("--smoothquant", type=float, default=0.5, help="SmoothQuant strength; 0 turns it off")
    q.add_argument("--method", choices=("gptq", "rtn"), default="gptq", help="weight rounding")
    q.add_argument("--eval-windows", type=int, default=32)
    q.add_argument("--vllm-prompts", type=int, default=16,
                   help="greedy agreement with bf16 in vLLM on this many held-out prompts (0: skip)")
    q.add_argument("--threads", type=int, default=1,
                   help="torch threads of the worker (1 beside another busy process; all cores when alone)")
    q.set_defaults(func=_quantize)

    e = msub.add_parser("export", help="export a run's latest checkpoint as an HF folder (even mid-run)")
    e.add_argument("--data", type=Path, default=Path("runs/data"))
    e.add_argument("--run", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--kind", default="target", help="target | draft | draft-distilled (recorded in provenance)")
    e.set_defaults(func=_export)

    c = msub.add_parser("card", help="write each model folder's README.md (model card) from what the folder records")
    c.add_argument("dirs", type=Path, nargs="*", help="model folders (default: every folder of models/)")
    c.add_argument("--check", action="store_true", help="write nothing; exit 1 if a card is out of date")
    c.set_defaults(func=_card)


def _adapt(args: argparse.Namespace) -> int:
    from quickcode.backend.cpu_features import cpu_flags
    from quickcode.draft_model.adapt import adapt
    from quickcode.draft_model.configs import cpu_step, profile

    # transformers' Llama wrapped by peft (the fast step knows no adapters), bf16 autocast where it is native
    bf16 = cpu_step(cpu_flags()).get("bf16", False)
    p = profile("cpu", impl="hf", compile=False, bf16=bf16, seq_len=args.seq_len, batch_size=args.batch_size,
                lr=args.lr, warmup_steps=args.warmup_steps, eval_every=args.ckpt_every, ckpt_every=args.ckpt_every,
                eval_windows=args.eval_windows, threads=args.threads)
    result = adapt(args.base, args.data, args.run, args.export, p, steps=args.steps, rank=args.rank,
                   alpha=args.alpha, seed=args.seed, init_adapter=args.init_adapter,
                   drop_layers=args.drop_layers, argv=sys.argv[1:])
    print(json.dumps(result))
    return 0


def _edit_adapt(args: argparse.Namespace) -> int:
    from quickcode.backend.cpu_features import cpu_flags
    from quickcode.draft_model.configs import cpu_step
    from quickcode.draft_model.edit_adapt import adapt_edits

    result = adapt_edits(args.base, args.edits, args.fim_data, args.run, args.export, steps=args.steps,
                         rank=args.rank, alpha=args.alpha, lr=args.lr, tokens_per_batch=args.tokens_per_batch,
                         seed=args.seed, threads=args.threads, bf16=cpu_step(cpu_flags()).get("bf16", False),
                         eval_every=args.eval_every, argv=sys.argv[1:],
                         progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(result))
    return 0


def _shrink(args: argparse.Namespace) -> int:
    from quickcode.draft_model.shrink import shrink
    from quickcode.draft_model.train import Windows

    windows = Windows(args.data / "heldout.bin", 512, 0).fixed(args.windows, 4)
    record = shrink(args.target, args.out, windows, layers=len(args.keep) if args.keep else args.layers,
                    intermediate=args.intermediate, keep=args.keep, argv=sys.argv[1:])
    print(json.dumps({k: record[k] for k in ("kept_layers", "intermediate_size", "params")}))
    return 0


def _edits(args: argparse.Namespace) -> int:
    from quickcode.draft_model.edit_pairs import build_from_lock

    def progress(i: int, n: int, what: str) -> None:
        print(f"[edits] pair {i + 1}/{n}: {what}", file=sys.stderr, flush=True)

    print(json.dumps(build_from_lock(args.lock, args.data, args.cache_dir / "pypi",
                                     heldout_fraction=args.heldout_fraction, window_lines=args.window_lines,
                                     progress=progress)))
    return 0


def _merge(args: argparse.Namespace) -> int:
    from quickcode.draft_model.adapt import merge

    print(json.dumps({"merged": str(merge(args.base, args.adapter, args.out, tuple(args.then_adapter)))}))
    return 0


def _card(args: argparse.Namespace) -> int:
    from quickcode.backend.assets import CHECKOUT, models_dir
    from quickcode.draft_model.card import write

    dirs = args.dirs or sorted(p for p in models_dir().iterdir() if (p / "model.safetensors").is_file())
    stale = write([d.resolve() for d in dirs], CHECKOUT, check=args.check)
    for d in stale:
        print(f"{d / 'README.md'}: {'out of date' if args.check else 'written'}", file=sys.stderr)
    return 1 if args.check and stale else 0


def _export(args: argparse.Namespace) -> int:
    from quickcode.draft_model.pipeline import provenance
    from quickcode.draft_model.configs import TrainProfile
    from quickcode.draft_model.train import export, model_from_checkpoint

    model, state = model_from_checkpoint(args.run)
    p = TrainProfile(**state["profile"])
    result = {**(state["history"][-1] if state["history"] else {}), "steps_done": state["step"],
              "steps_planned": state["total"], "params": sum(q.numel() for q in model.parameters())}
    prov = provenance(args.kind, args.kind, p, result, args.data, sys.argv[1:])
    export(model, args.data / "tokenizer", args.out, prov)
    print(json.dumps(result))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from quickcode.draft_model.evaluate import EvalConfig, evaluate_pair, headline

    result = evaluate_pair(args.target, args.draft, args.data if args.data.exists() else None,
                           EvalConfig(n_prompts=args.prompts, max_new_tokens=args.max_tokens))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    for row in result.get("per_k", []):
        print(f"K={row['k']}: acceptance {row['acceptance_rate']:.3f}  alpha {row['alpha']:.3f}  "
              f"tokens/step {row['tokens_per_step']:.2f}  expected speed-up {row['expected_speedup']:.2f}x",
              file=sys.stderr)
    print(json.dumps(headline(result)))
    return 0


def _quantize(args: argparse.Namespace) -> int:
    from quickcode.draft_model.quantize import quantize

    report = quantize(args.src, args.out, args.data, calib_samples=args.calib_samples,
                      calib_seq_len=args.calib_seq_len, smoothquant=args.smoothquant or None, method=args.method,
                      eval_windows=args.eval_windows, vllm_prompts=args.vllm_prompts, threads=args.threads,
                      argv=sys.argv[1:])
    summary = {"out": str(args.out), "size_bytes": report["size_bytes"], "loss_bf16": report["heldout_bf16"]["loss"],
               "loss_int8": report["heldout_int8"]["loss"], "loss_delta": report["loss_delta"]}
    if "vllm" in report:
        summary.update({"vllm_identical": report["vllm"]["identical"],
                        "vllm_token_agreement": report["vllm"]["token_agreement"]})
    print(json.dumps(summary))
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from quickcode.draft_model.pipeline import prepare

    summary = prepare(args.data, args.source or ["stdlib"], heldout_fraction=args.heldout_fraction,
                      vocab_size=args.vocab, chunk_chars=args.chunk_chars, fim_rate=args.fim_rate,
                      spm_rate=args.spm_rate, passes=args.passes, max_docs=args.max_docs, force=args.force,
                      tokenizer_from=args.tokenizer_from, cache_dir=args.cache_dir, decontaminate=args.decontaminate,
                      workers=args.workers, fim_cut=args.fim_cut, tokenizer_chars=args.tokenizer_chars,
                      spm_middle_token=None if args.spm_middle_token is None else args.spm_middle_token == "yes")
    print(json.dumps(summary))
    return 0


def _train(args: argparse.Namespace) -> int:
    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.pipeline import train_model

    if args.steps is None and args.minutes is None:
        raise SystemExit("give --steps or --minutes")
    if args.cooldown_from is not None and (args.steps is None or args.init is not None):
        raise SystemExit("--cooldown-from takes --steps (the cooldown's length) and no --init")
    auto = {}
    if args.profile == "cpu" and args.impl is None and getattr(args, "teacher", None) is None:
        from quickcode.backend.cpu_features import cpu_flags, native_bf16_flags
        from quickcode.draft_model.configs import cpu_step

        flags = cpu_flags()
        auto = cpu_step(flags)
        print(f"[train] native bf16: {', '.join(native_bf16_flags(flags)) or 'no'} → "
              f"step {auto or 'hf, fp32'} (--impl hf for the original step)", file=sys.stderr)
    explicit = {"impl": args.impl, "compile": args.compile, "bf16": args.bf16}
    p = profile(args.profile, **{**auto, **{k: v for k, v in explicit.items() if v is not None}},
                seq_len=args.seq_len, batch_size=args.batch_size, lr=args.lr,
                threads=args.threads, kd_alpha=getattr(args, "kd_alpha", None), loss_positions=args.loss_positions,
                eval_every=args.ckpt_every, ckpt_every=args.ckpt_every, warmup_steps=args.warmup_steps)
    result = train_model(args.data, args.size, p, args.run, args.export, steps=args.steps, minutes=args.minutes,
                         teacher_dir=getattr(args, "teacher", None), init_dir=args.init, seed=args.seed,
                         argv=sys.argv[1:], cooldown_from=args.cooldown_from,
                         freeze_embeddings=args.freeze_embeddings)
    print(json.dumps(result))
    return 0
