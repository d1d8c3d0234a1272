"""quickcode/draft_model/registry_model.py's pure parts: GGUF block dequantizing (llama.cpp's gguf package) on hand-built
blocks, the Q/K row order against llama.cpp's permutation, and reading a small GGUF file written here byte by
byte."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from quickcode.draft_model import registry_model as rm


def _half(x: float) -> bytes:
    return np.float16(x).tobytes()


def _q4_1_block(d: float, m: float, q: list[int]) -> bytes:
    """ggml's block_q4_1: fp16 d, fp16 m, 16 bytes; element j in byte j's low nibble, j+16 in its high."""
    assert len(q) == 32 and all(0 <= v < 16 for v in q)
    return _half(d) + _half(m) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))


def test_q4_1_block_dequantizes_to_q_times_d_plus_m():
    q1 = list(range(16)) + list(range(15, -1, -1))
    q2 = [(7 * j) % 16 for j in range(32)]
    raw = np.frombuffer(_q4_1_block(0.5, -1.0, q1) + _q4_1_block(0.25, 2.0, q2), np.uint8)
    got = rm.dequantize(raw, rm.Q4_1)
    want = np.array([v * 0.5 - 1.0 for v in q1] + [v * 0.25 + 2.0 for v in q2], np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_q4_0_and_q8_0_blocks():
    q = [(5 * j + 3) % 16 for j in range(32)]
    raw = np.frombuffer(_half(2.0) + bytes(q[j] | (q[j + 16] << 4) for j in range(16)), np.uint8)
    np.testing.assert_array_equal(rm.dequantize(raw, rm.Q4_0), (np.array(q, np.float32) - 8) * 2)
    ints = np.arange(-16, 16, dtype=np.int8)
    raw = np.frombuffer(_half(0.125) + ints.tobytes(), np.uint8)
    np.testing.assert_array_equal(rm.dequantize(raw, rm.Q8_0), ints.astype(np.float32) * 0.125)


def test_float_types_and_an_unknown_type():
    x = np.array([1.5, -2.25, 3.0], np.float32)
    np.testing.assert_array_equal(rm.dequantize(np.frombuffer(x.tobytes(), np.uint8), rm.F32), x)
    np.testing.assert_array_equal(rm.dequantize(np.frombuffer(x.astype(np.float16).tobytes(), np.uint8),
                                                rm.F16), x)
    bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)      # these values are exact in bf16
    np.testing.assert_array_equal(rm.dequantize(np.frombuffer(bf16.tobytes(), np.uint8), rm.BF16), x)
    with pytest.raises(ValueError, match="not supported"):
        rm.dequantize(np.zeros(144, np.uint8), 12)          # Q4_K


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py `LlamaModel.permute` (HF rotate-half rows → llama.cpp interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.mark.parametrize("n_head, head_dim, cols", [(9, 64, 576), (3, 64, 576), (2, 8, 5)])
def test_unpermute_inverts_llama_cpp_permute(n_head, head_dim, cols):
    w = np.random.default_rng(n_head).standard_normal((n_head * head_dim, cols)).astype(np.float32)
    gguf = llama_cpp_permute(w, n_head)
    assert not np.array_equal(gguf, w)
    np.testing.assert_array_equal(rm.unpermute_qk(gguf, n_head), w)


def test_unpermute_pairs_rows_the_way_rotary_halves_pair():
    """In llama.cpp's layout a head's rows 2i, 2i+1 are a rotary pair; in HF's they are rows i, i + d/2."""
    n_head, d = 2, 8
    gguf = np.arange(n_head * d, dtype=np.float32)[:, None]          # row r holds r
    hf = rm.unpermute_qk(gguf, n_head)[:, 0]
    for h in range(n_head):
        for i in range(d // 2):
            assert (hf[h * d + i], hf[h * d + i + d // 2]) == (h * d + 2 * i, h * d + 2 * i + 1)


def _gguf_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def test_read_gguf_metadata_tensor_infos_and_aligned_data(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)                  # torch shape (2, 3): GGUF dims [3, 2]
    kv = (_gguf_string("general.architecture") + struct.pack("<I", 8) + _gguf_string("llama")
          + _gguf_string("llama.block_count") + struct.pack("<II", 4, 30)
          + _gguf_string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2)
          + _gguf_string("<|endoftext|>") + _gguf_string("Ġa"))
    info = _gguf_string("output_norm.weight") + struct.pack("<IQQIQ", 2, 3, 2, rm.F32, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 3) + kv + info
    pad = b"\0" * (-len(head) % 32)                                   # general.alignment: its default
    path = tmp_path / "m.gguf"
    path.write_bytes(head + pad + w.tobytes())
    g = rm.read_gguf(path)
    assert g.metadata == {"general.architecture": "llama", "llama.block_count": 30,
                          "tokenizer.ggml.tokens": ["<|endoftext|>", "Ġa"]}
    assert [(t.name, t.tensor_type, t.shape.tolist(), t.data_offset) for t in g.tensors] == [
        ("output_norm.weight", rm.F32, [3, 2], len(head) + len(pad))]
    got = rm.values(g.tensors[0])
    assert got.shape == (2, 3) and got.dtype == np.float32
    np.testing.assert_array_equal(got, w)


def test_tensor_names_map_to_transformers_llama():
    assert rm.hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert rm.hf_name("blk.17.attn_k.weight") == "model.layers.17.self_attn.k_proj.weight"
    assert rm.hf_name("blk.0.ffn_norm.weight") == "model.layers.0.post_attention_layernorm.weight"
    with pytest.raises(ValueError, match="unexpected GGUF tensor"):
        rm.hf_name("blk.0.attn_qkv.weight")


def _vocab(extra: list[str]) -> dict:
    """GGUF tokenizer metadata of a tiny byte-level vocabulary: control tokens, then normal ones and merges."""
    control = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *extra]
    normal = ["a", "b", "1", "2", "Ġ", "ab", "12", "Ġab"]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
            "tokenizer.ggml.tokens": control + normal,
            "tokenizer.ggml.token_type": [3] * len(control) + [1] * len(normal),
            "tokenizer.ggml.merges": ["a b", "1 2", "Ġ ab"],
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}


def test_tokenizer_from_gguf_metadata_splits_digits_and_keeps_control_tokens_whole():
    md = _vocab(["<x>", "<y>", "<z>"])
    tok = rm.tokenizer(md)
    ids = tok.encode("ab ab12<|endoftext|>").ids
    assert [md["tokenizer.ggml.tokens"][i] for i in ids] == ["ab", "Ġab", "1", "2", "<|endoftext|>"]
    assert tok.decode(ids, skip_special_tokens=False) == "ab ab12<|endoftext|>"


def test_placeholder_fim_only_for_a_vocabulary_without_fim_tokens():
    md = _vocab(["<x>", "<y>", "<z>"])
    fim = rm.placeholder_fim(md, rm.tokenizer(md))
    assert {k: fim[k] for k in ("prefix_token", "suffix_token", "middle_token", "eot_token")} == {
        "prefix_token": "<x>", "suffix_token": "<y>", "middle_token": "<z>", "eot_token": "<|endoftext|>"}
    assert fim["prefix_only"] is True      # the backend then never sends those placeholders (quickcode/backend/fim.py)
    starcoder = _vocab(["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<file_sep>"])
    assert rm.placeholder_fim(starcoder, rm.tokenizer(starcoder)) is None
    with pytest.raises(ValueError, match="too few spare control tokens"):
        md = _vocab(["<x>"])
        rm.placeholder_fim(md, rm.tokenizer(md))
