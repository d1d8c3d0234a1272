"""Fill-in-the-middle vocabulary and the sample transform used for training.

The special tokens and the template file written next to every exported model are the contract with the
backend (backend/fim.py reads `quickcode_fim.json`; it never imports this module).

Orders (token ids are concatenated from separately tokenized parts, exactly as the backend builds prompts):
  PSM: <fim_prefix> P <fim_suffix> S <fim_middle> M <|endoftext|>
  SPM: <fim_suffix> S <fim_prefix> P <fim_middle> M <|endoftext|>
SPM keeps the (stable) suffix ahead of the (growing) prefix, so a keystroke leaves almost the whole prompt in
vLLM's prefix cache; PSM is the classic order. The embedded default is trained on both.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

EOT = "<|endoftext|>"
FIM_PREFIX = "<fim_prefix>"
FIM_SUFFIX = "<fim_suffix>"
FIM_MIDDLE = "<fim_middle>"
FIM_PAD = "<fim_pad>"
FILE_SEP = "<file_sep>"
SPECIAL_TOKENS = [EOT, FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX, FIM_PAD, FILE_SEP]
TEMPLATE_FILE = "quickcode_fim.json"


@dataclass(frozen=True)
class FimSample:
    prefix: str
    suffix: str
    middle: str
    order: str  # "psm" | "spm"


def split_for_fim(text: str, rng: random.Random, spm_rate: float) -> FimSample:
    """Cut a document into prefix / middle / suffix the way completions are asked for.

    Half the cuts are line-aware (cursor inside a line, the middle runs to the end of that line or of a few
    lines: what an editor asks for), the rest are uniform character spans (robustness to odd cursors).
    """
    n = len(text)
    order = "spm" if rng.random() < spm_rate else "psm"
    if n < 8:
        return FimSample("", "", text, order)
    if rng.random() < 0.5:
        a, b = sorted(rng.randrange(n + 1) for _ in range(2))
    else:
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines))
        start = sum(len(x) for x in lines[:i])
        line = lines[i].rstrip("\n")
        a = start + (rng.randrange(len(line) + 1) if line else 0)
        j = min(len(lines), i + 1 + (0 if rng.random() < 0.6 else rng.randrange(1, 6)))
        b = sum(len(x) for x in lines[:j])
        if j == i + 1 and text[b - 1 : b] == "\n" and rng.random() < 0.5:
            b -= 1  # single-line fill: the middle stops before the newline, which starts the suffix
        b = max(a, b)
    if rng.random() < 0.1:
        b = n  # nothing after the cursor: end-of-file completion
    return FimSample(text[:a], text[b:], text[a:b], order)


DEFAULT_NAMES = {"prefix_token": FIM_PREFIX, "suffix_token": FIM_SUFFIX, "middle_token": FIM_MIDDLE,
                 "eot_token": EOT, "file_sep_token": FILE_SEP}


def template_names(folder: Path | None) -> dict:
    """The FIM token names of a model or tokenizer folder: its quickcode_fim.json (a real target's tokenizer
    brings its own, e.g. CodeLlama's), else ours."""
    f = Path(folder) / TEMPLATE_FILE if folder is not None else None
    spec = json.loads(f.read_text()) if f is not None and f.exists() else {}
    return {k: spec.get(k, v) for k, v in DEFAULT_NAMES.items()}


def write_template(model_dir: Path, order: str = "spm", names: dict | None = None) -> None:
    """The file the backend reads to build prompts for this model."""
    (model_dir / TEMPLATE_FILE).write_text(json.dumps({**(names or DEFAULT_NAMES), "order": order}, indent=2) + "\n")
