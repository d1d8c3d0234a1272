"""`quickcode bench tokenizer`: which vocabulary for the embedded models — characters per token on held-out code
against the embedding's cost.

Byte-level BPE (the pipeline's own, `quickcode/draft_model/tokenizer.py`) is trained on a stable sample of a
prepared corpus's training documents at each vocabulary size, then measured on the held-out documents and on
the files the typing benchmark types (held out of training). Baseline: the committed target's tokenizer, same
texts, same run. Cost: a tied embedding is V × d parameters, and the output layer 2·V·d FLOPs per token;
divided by characters per token, the forward FLOPs per character of code for the model sizes of
quickcode/draft_model/configs.py say what a larger vocabulary buys. Every tokenizer must keep the backend's
fast path (tiktoken over its merges, exact by segment).
"""
from __future__ import annotations

import argparse
import json
import sysconfig
import time
from pathlib import Path

from quickcode.benchmarks.report import Report, md_table

REPO = Path(__file__).resolve().parents[2]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=Path("runs/data-v2"), help="a prepared corpus (`model prepare`)")
    p.add_argument("--vocab", type=int, nargs="+", default=[4096, 8192, 16384])
    p.add_argument("--train-chars", type=int, default=100_000_000, help="BPE training sample (characters)")
    p.add_argument("--eval-chars", type=int, default=20_000_000, help="held-out text measured (characters)")
    p.add_argument("--baseline", type=Path, default=REPO / "models" / "target")
    p.add_argument("--sizes", nargs="+", default=["cpu-draft", "cpu-target"],
                   help="model presets whose FLOPs per character are shown")
    p.add_argument("--out", type=Path, default=Path("runs/tokenizers"), help="where the trained tokenizers go")


def _nonembedding_params(size) -> int:
    d, ff, L = size.hidden_size, size.intermediate_size, size.num_layers
    kv = d * size.num_kv_heads // size.num_heads
    return L * (2 * d * d + 2 * d * kv + 3 * d * ff + 2 * d) + d


def _measure(tok, texts: list[str]) -> tuple[int, int, float]:
    t = time.perf_counter()
    n_tokens = sum(len(e.ids) for e in tok.encode_batch(texts))
    return sum(map(len, texts)), n_tokens, time.perf_counter() - t


def run(args: argparse.Namespace) -> dict:
    import random

    from quickcode.backend.segments import FastBPE, segment_cache
    from quickcode.benchmarks.typing import DEFAULT_FILES
    from quickcode.draft_model import tokenizer as tokmod
    from quickcode.draft_model.configs import MODEL_SIZES
    from quickcode.draft_model.corpus import read_docs

    train = [d.text for d in read_docs(args.data, "train")]
    heldout = [d.text for d in read_docs(args.data, "heldout")]
    random.Random(0).shuffle(heldout)
    eval_texts, total = [], 0
    for t in heldout:
        if total >= args.eval_chars:
            break
        eval_texts.append(t)
        total += len(t)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    typed = [(stdlib / f).read_text() for f in DEFAULT_FILES if (stdlib / f).is_file()]
    sample = tokmod.sample_texts(train, args.train_chars)
    print(f"tokenizer: {len(sample):,} training documents ({sum(map(len, sample)) / 1e6:.0f}M chars), "
          f"{len(eval_texts):,} held-out ({total / 1e6:.1f}M chars)", flush=True)

    rows = []
    candidates = [("committed target", tokmod.load(args.baseline), None)]
    for v in args.vocab:
        t0 = time.perf_counter()
        tok = tokmod.train_bpe(sample, v)
        out = args.out / f"bpe-{v}"
        tokmod.save_hf(tok, out, model_max_length=max(s.max_position_embeddings for s in MODEL_SIZES.values()))
        candidates.append((f"BPE {v}", tokmod.load(out), time.perf_counter() - t0))
    for name, tok, train_s in candidates:
        chars, tokens, enc_s = _measure(tok, eval_texts)
        tchars, ttokens, _ = _measure(tok, typed)
        vocab = tok.get_vocab()
        ws_tokens = sum(1 for t in vocab if t and set(t) <= {"Ġ", "Ċ", "ĉ"} and len(t) > 1)
        fast = FastBPE.for_tokenizer(tok)
        cache = segment_cache(tok)
        row = {"tokenizer": name, "vocab": tok.get_vocab_size(), "chars_per_token": chars / tokens,
               "typed_chars_per_token": tchars / ttokens, "whitespace_tokens": ws_tokens,
               "fast_path": bool(fast is not None and cache is not None and cache.fast),
               "train_s": train_s, "encode_mb_per_s": chars / 1e6 / enc_s}
        for size_name in args.sizes:
            size = MODEL_SIZES[size_name]
            emb = row["vocab"] * size.hidden_size
            body = _nonembedding_params(size)
            row[f"{size_name}_params_M"] = (emb + body) / 1e6
            row[f"{size_name}_embedding_share"] = emb / (emb + body)
            row[f"{size_name}_kflop_per_char"] = 2 * (emb + body) / row["chars_per_token"] / 1e3
        rows.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    return _report(args, rows, len(eval_texts), total)


def _report(args, rows: list[dict], n_docs: int, n_chars: int) -> dict:
    report = Report("tokenizer", "Tokenizer: characters per token vs embedding cost")
    report.add(f"""
Byte-level BPE trained on a stable sample of `{args.data}`'s training documents (≤ {args.train_chars / 1e6:.0f}M
characters), measured on {n_docs:,} held-out documents ({n_chars / 1e6:.1f}M characters; modules never in
training) and on the stdlib files `quickcode bench typing` types (held out too). Forward FLOPs
per character = 2 × parameters (embedding tied to the output layer, which costs 2·V·d per token) ÷ characters
per token: what one character of completed code costs the model.""")
    headers = ["tokenizer", "vocab", "chars/token held-out", "chars/token typed files", "whitespace-run tokens",
               "backend fast path"]
    for s in args.sizes:
        headers += [f"{s} params (M)", f"{s} embedding share", f"{s} kFLOP/char"]
    table = []
    for r in rows:
        line = [r["tokenizer"], r["vocab"], r["chars_per_token"], r["typed_chars_per_token"], r["whitespace_tokens"],
                "yes" if r["fast_path"] else "NO"]
        for s in args.sizes:
            line += [r[f"{s}_params_M"], r[f"{s}_embedding_share"], r[f"{s}_kflop_per_char"]]
        table.append(line)
    report.add(md_table(headers, table))
    base = rows[0]
    headline = {"baseline_chars_per_token": round(base["chars_per_token"], 3)}
    for r in rows[1:]:
        v = r["vocab"]
        headline[f"bpe{v}_chars_per_token"] = round(r["chars_per_token"], 3)
        headline[f"bpe{v}_typed_chars_per_token"] = round(r["typed_chars_per_token"], 3)
        for s in args.sizes:
            headline[f"bpe{v}_{s}_kflop_per_char"] = round(r[f"{s}_kflop_per_char"], 1)
        headline[f"bpe{v}_fast_path"] = r["fast_path"]
    return report.finish(headline)
