"""Documents → FIM-transformed samples → one packed stream of token ids per split (uint16 `.bin`).

A sample is a chunk of a document (cut at line boundaries) that becomes, with probability `fim_rate`, a
PSM/SPM fill-in-the-middle sample cut where an editor's cursor is (fim.cursor_cut), else plain text; samples are
joined by <|endoftext|>. Each FIM part is
tokenized on its own, exactly as the backend tokenizes prefix and suffix, so training sees the token
boundaries inference will. `passes` re-cuts the training documents with fresh random splits.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from quickcode.backend.fim_templates import reads_markers_as_text
from quickcode.draft_model.corpus import Document
from quickcode.draft_model.fim import DEFAULT_NAMES, FimSample, cursor_cut, split_for_fim


def chunks(text: str, max_chars: int) -> list[str]:
    out, cur, size = [], [], 0
    for line in text.splitlines(keepends=True):
        if size + len(line) > max_chars and cur:
            out.append("".join(cur))
            cur, size = [], 0
        cur.append(line)
        size += len(line)
    if cur:
        out.append("".join(cur))
    return out


def fim_ids(tok: Tokenizer, s: FimSample, names: dict | None = None) -> list[int]:
    pre, suf, mid = (tok.encode(x).ids for x in (s.prefix, s.suffix, s.middle))
    return _fim_join(_templates(tok, names)[s.order], pre, suf, mid)


def _templates(tok: Tokenizer, names: dict | None) -> dict:
    """{order: the backend's FimTemplate} for the data's token names (SPM's middle token as they say)."""
    from quickcode.backend.fim_templates import FimTemplate

    return {order: FimTemplate.from_names(names or DEFAULT_NAMES, tok, order) for order in ("psm", "spm")}


def _fim_join(t, pre: list[int], suf: list[int], mid: list[int]) -> list[int]:
    """The backend's prompt layout (quickcode/backend/fim.py fim_layout, what build_prompt serves) followed by the middle
    and end-of-text."""
    from quickcode.backend.fim import fim_layout

    return [*fim_layout(t, pre, suf), *mid, t.eot_id]


def bin_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


FIM_CUTS = {"cursor": cursor_cut, "legacy": split_for_fim}
_BATCH = 2048  # texts per encode_batch: bounds the memory of the tokenizer's Encoding objects


def pack(tok: Tokenizer, docs: list[Document], out: Path, *, chunk_chars: int, fim_rate: float,
         spm_rate: float, passes: int, seed: int, names: dict | None = None, fim_cut: str = "cursor") -> int:
    """Write `out` (uint16 token ids; uint32, noted in `<out>.json`, past 65,536 tokens); return the count.
    Samples are shuffled across documents; FIM cuts are `fim_cut` (FIM_CUTS)."""
    tok = reads_markers_as_text(tok)     # a marker's name written in a file is text, as the backend reads it
    dtype = bin_dtype(tok.get_vocab_size())
    rng = random.Random(seed)
    templates = _templates(tok, names)
    eot = templates["psm"].eot_id
    cut = FIM_CUTS[fim_cut]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    total = 0
    with open(tmp, "wb") as f:
        for p in range(passes):
            pieces = [c for d in docs for c in chunks(d.text, chunk_chars)]
            rng.shuffle(pieces)
            bar = tqdm(total=len(pieces), desc=f"pack {out.name} pass {p + 1}/{passes}", unit="chunk", leave=False)
            for at in range(0, len(pieces), _BATCH):
                batch = pieces[at:at + _BATCH]
                fim = [cut(c, rng, spm_rate) if rng.random() < fim_rate else None for c in batch]
                plain = [c for c, s in zip(batch, fim) if s is None]
                samples = [s for s in fim if s is not None]
                texts = plain + [x for s in samples for x in (s.prefix, s.suffix, s.middle)]
                ids = [e.ids for e in tok.encode_batch(texts)]
                seqs = [[*x, eot] for x in ids[:len(plain)]]
                rest = ids[len(plain):]
                seqs += [_fim_join(templates[s.order], *rest[3 * k:3 * k + 3]) for k, s in enumerate(samples)]
                rng.shuffle(seqs)  # plain and FIM samples interleaved, not in runs of each kind
                arr = np.fromiter((t for q in seqs for t in q), dtype=dtype)
                arr.tofile(f)
                total += len(arr)
                bar.update(len(batch))
            bar.close()
    tmp.replace(out)
    sidecar = out.with_name(out.name + ".json")
    if dtype != np.uint16:
        sidecar.write_text(json.dumps({"dtype": dtype.name}) + "\n")
    else:
        sidecar.unlink(missing_ok=True)
    return total


def write_fim_eval(docs: list[Document], out: Path, n: int, seed: int) -> None:
    """Held-out fill-in-the-middle cases (line-aware cuts) for completion quality and acceptance."""
    rng = random.Random(seed)
    pieces = [(d.path, c) for d in docs for c in chunks(d.text, 1500) if len(c) > 200]
    rng.shuffle(pieces)
    with open(out, "w") as f:
        for path, c in pieces[:n]:
            s = split_for_fim(c, rng, spm_rate=0.0)
            f.write(json.dumps({"path": path, "prefix": s.prefix, "suffix": s.suffix, "middle": s.middle}) + "\n")


def load_bin(path: Path) -> np.ndarray:
    sidecar = Path(path).with_name(Path(path).name + ".json")
    dtype = json.loads(sidecar.read_text())["dtype"] if sidecar.exists() else "uint16"
    return np.memmap(path, dtype=dtype, mode="r")
