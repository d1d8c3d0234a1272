"""Byte-level BPE with the FIM and end-of-text tokens, saved as an HF tokenizer folder vLLM can load.

For real models the draft always takes the target's tokenizer: `check_same_vocab` refuses a pair whose
vocabularies differ (speculative decoding compares token ids, so a mismatch silently accepts nothing).
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from quickcode.draft_model.fim import EOT, SPECIAL_TOKENS, TEMPLATE_FILE, template_names

HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class VocabMismatch(ValueError):
    """The draft and the target do not share one vocabulary."""


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=True,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def sample_texts(texts: Iterable[str], max_chars: int) -> Iterable[str]:
    """A stable sample of whole texts of about `max_chars` in all: each kept with probability max_chars / total,
    decided by its content's hash (the same texts give the same sample on any machine)."""
    texts = list(texts)
    total = sum(map(len, texts))
    if total <= max_chars:
        return texts
    bar = int(max_chars / total * 2**32)
    return [t for t in texts if int(hashlib.sha1(t.encode()).hexdigest()[:8], 16) < bar]


def save_hf(tok: Tokenizer, out_dir: Path, model_max_length: int) -> None:
    """tokenizer.json + tokenizer_config.json: what `AutoTokenizer.from_pretrained` (and vLLM) read."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOT, "bos_token": None, "unk_token": None, "pad_token": EOT,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t != EOT],
        "model_max_length": model_max_length, "clean_up_tokenization_spaces": False,
        "add_bos_token": False, "add_eos_token": False,
    }, indent=2) + "\n")
    (out_dir / "special_tokens_map.json").write_text(json.dumps({
        "eos_token": EOT, "pad_token": EOT,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t != EOT],
    }, indent=2) + "\n")


def copy_hf(target_dir: Path, out_dir: Path) -> dict:
    """Take a target's existing HF tokenizer (and its FIM template) instead of training BPE: what a real
    target's draft must do. Refuses a tokenizer without the FIM tokens its template names."""
    target_dir = Path(target_dir)
    if not (target_dir / "tokenizer.json").exists():
        raise SystemExit(f"{target_dir} has no tokenizer.json (a fast HF tokenizer is needed)")
    names = template_names(target_dir)
    tok = load(target_dir)
    missing = [v for k, v in names.items() if k.endswith("_token") and isinstance(v, str)
               and k != "file_sep_token" and tok.token_to_id(v) is None]
    if missing:
        raise SystemExit(f"{target_dir}'s tokenizer lacks the FIM tokens {missing}: write its names into "
                         f"{target_dir / TEMPLATE_FILE} (prefix_token, suffix_token, middle_token, eot_token)")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (*HF_TOKENIZER_FILES, TEMPLATE_FILE):
        if (target_dir / name).exists():
            shutil.copy(target_dir / name, out_dir / name)
    source = {"source": str(target_dir.resolve()), "vocab_size": tok.get_vocab_size(),
              "tokenizer_sha256": hashlib.sha256((target_dir / "tokenizer.json").read_bytes()).hexdigest()}
    (out_dir / "tokenizer_source.json").write_text(json.dumps(source, indent=1) + "\n")
    return source


def load(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path / "tokenizer.json" if path.is_dir() else path))


def check_same_vocab(target_dir: Path, draft_dir: Path) -> None:
    a, b = load(target_dir).get_vocab(), load(draft_dir).get_vocab()
    if a != b:
        only_t = len(set(a) - set(b))
        only_d = len(set(b) - set(a))
        raise VocabMismatch(
            f"draft {draft_dir} does not use the target's tokenizer ({len(a)} vs {len(b)} tokens, "
            f"{only_t} only in the target, {only_d} only in the draft): retrain the draft on the target's tokenizer"
        )
