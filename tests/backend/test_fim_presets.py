"""FIM template presets: detected from a tokenizer's special tokens, laid out in each family's order.

Token names and layouts are the families' own (model cards / tokenizer_config.json of StarCoder, StarCoder2,
Qwen2.5-Coder, DeepSeek-Coder, CodeLlama, Codestral, CodeGemma; the table in docs/operators.md). Synthetic
tokenizers carry each family's special tokens over a word vocabulary; the real Qwen2.5 and DeepSeek
vocabularies (registry packages, tests/support/vocab.py) are detected too.
"""
from __future__ import annotations

import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from quickcode.backend import fim, fim_templates
from tests.support import vocab
from tests.conftest import REPO

WORDS = ["[UNK]", "a", "b", "c", "d", "x.py", "y.py", "main.py"]
FAMILIES = {
    "codegemma": ["<bos>", "<eos>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_separator|>"],
    "qwen2.5-coder": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>",
                      "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"],
    "deepseek-coder": ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜fim▁hole｜>", "<｜fim▁begin｜>",
                       "<｜fim▁end｜>", "<|EOT|>"],
    "codellama": ["<s>", "</s>", "▁<PRE>", "▁<MID>", "▁<SUF>", "▁<EOT>"],
    "codestral": ["<s>", "</s>", "[INST]", "[/INST]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]"],
    "starcoder2": ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<repo_name>",
                   "<file_sep>"],
    "starcoder": ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>",
                  "<gh_stars>", "<reponame>"],
}


def family_tokenizer(specials: list[str]) -> Tokenizer:
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


def ids(tok: Tokenizer, *names: str) -> list[int]:
    return [tok.token_to_id(n) for n in names]


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_detected_from_its_special_tokens(family):
    tok = family_tokenizer(FAMILIES[family])
    assert fim_templates.detect_preset(tok).name == family
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    assert t.name == family and t.eot_id in t.stop_ids


def test_no_known_fim_tokens_is_a_clear_error():
    tok = family_tokenizer(["<|endoftext|>"])
    assert fim_templates.detect_preset(tok) is None
    with pytest.raises(ValueError, match="no known FIM tokens"):
        fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    with pytest.raises(ValueError, match="unknown FIM preset"):
        fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok, preset="gpt-5")
    with pytest.raises(ValueError, match="lacks the codestral FIM tokens"):
        fim_templates.FimTemplate.load(REPO / "no-such-model-folder", family_tokenizer(FAMILIES["starcoder2"]), preset="codestral")


@pytest.mark.parametrize("family, layout", [
    ("qwen2.5-coder", ["<|fim_prefix|>", "a", "b", "<|fim_suffix|>", "c", "<|fim_middle|>"]),
    ("codegemma", ["<bos>", "<|fim_prefix|>", "a", "b", "<|fim_suffix|>", "c", "<|fim_middle|>"]),
    ("deepseek-coder", ["<｜begin▁of▁sentence｜>", "<｜fim▁begin｜>", "a", "b", "<｜fim▁hole｜>", "c", "<｜fim▁end｜>"]),
    ("codellama", ["<s>", "▁<PRE>", "a", "b", "▁<SUF>", "c", "▁<MID>"]),
    ("codestral", ["<s>", "[SUFFIX]", "c", "[PREFIX]", "a", "b"]),          # no middle token: it writes on
    ("starcoder2", ["<fim_prefix>", "a", "b", "<fim_suffix>", "c", "<fim_middle>"]),
    ("starcoder", ["<fim_prefix>", "a", "b", "<fim_suffix>", "c", "<fim_middle>"]),
])
def test_prompt_layout_per_family(family, layout):
    tok = family_tokenizer(FAMILIES[family])
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    assert fim.build_prompt(tok, t, "a b", "c", 100) == ids(tok, *layout)


@pytest.mark.parametrize("family, stops", [
    ("qwen2.5-coder", ["<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|im_end|>"]),
    ("deepseek-coder", ["<｜end▁of▁sentence｜>", "<|EOT|>"]),
    ("codellama", ["▁<EOT>", "</s>"]),
    ("codegemma", ["<eos>", "<|file_separator|>"]),
    ("starcoder2", ["<|endoftext|>", "<file_sep>"]),
])
def test_stop_tokens_per_family(family, stops):
    tok = family_tokenizer(FAMILIES[family])
    assert fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok).stop_ids == tuple(ids(tok, *stops))


def test_other_files_use_the_family_file_token_and_fit_the_budget():
    tok = family_tokenizer(FAMILIES["qwen2.5-coder"])
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    files = [("x.py", "a\n"), ("y.py", "b\n")]
    got = fim.build_prompt(tok, t, "c", "d", 100, files=files, path="main.py")
    assert got == ids(tok, "<|file_sep|>", "x.py", "a", "<|file_sep|>", "y.py", "b", "<|file_sep|>", "main.py",
                      "<|fim_prefix|>", "c", "<|fim_suffix|>", "d", "<|fim_middle|>")
    # over budget the last files stay: an 80-token budget leaves ~19 tokens for files
    many = [(f"{i}.py", "a b c d\n" * 3) for i in range(10)]
    got = fim.build_prompt(tok, t, "c", "d", 80, files=many, path="main.py")
    assert len(got) <= 80 and got[-5:] == ids(tok, "<|fim_prefix|>", "c", "<|fim_suffix|>", "d", "<|fim_middle|>")
    assert got.count(t.file_id) >= 2 and got[got.index(t.file_id) + 1] == tok.token_to_id("[UNK]")  # 9.py


def test_a_quickcode_fim_json_wins_over_detection_and_keeps_the_embedded_layout():
    tok = Tokenizer.from_file(str(REPO / "models" / "target" / "tokenizer.json"))
    t = fim_templates.FimTemplate.load(REPO / "models" / "target", tok)
    assert t.name == "quickcode_fim.json" and t.order == "spm" and t.file_id is None and t.bos_id is None
    assert t.stop_ids == (tok.token_to_id("<|endoftext|>"),)
    assert fim_templates.FimTemplate.load(REPO / "models" / "target", tok, preset="starcoder2").name == "starcoder2"
    assert fim_templates.detect_preset(tok).name == "starcoder2"     # the same token names as StarCoder2 (no repo token)


def test_real_vocabularies_are_detected():
    qwen = vocab.qwen25_tokenizer()
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", qwen)
    assert (t.name, t.prefix_id, t.suffix_id, t.middle_id, t.eot_id) == ("qwen2.5-coder", 151659, 151661, 151660, 151643)
    assert t.file_id == 151664 and t.repo_id == 151663 and 151662 in t.stop_ids
    ds = vocab.deepseek_tokenizer()
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", ds)
    assert t.name == "deepseek-coder" and t.bos_id == ds.token_to_id("<｜begin▁of▁sentence｜>")
    assert ds.token_to_id("<|EOT|>") in t.stop_ids


@pytest.mark.parametrize("family, prompt, want", [
    ("qwen2.5-coder", "<|fim_prefix|>a b<|fim_suffix|>c<|fim_middle|>", ("a b", "c")),    # Continue's qwenCoder
    ("starcoder2", "<fim_prefix><fim_suffix>c<fim_middle>a b", ("a b", "c")),              # StarCoder's SPM
    ("starcoder2", "<fim_prefix>a b<fim_suffix>c", ("a b", "c")),                            # no middle marker
    ("codellama", "<PRE> a b <SUF>c <MID>", ("a b", "c")),                                   # Continue's codeLlama
    ("codestral", "[SUFFIX]c[PREFIX]a b", ("a b", "c")),
    ("deepseek-coder", "<｜begin▁of▁sentence｜><｜fim▁begin｜>a<｜fim▁hole｜>c<｜fim▁end｜>", ("a", "c")),
    ("qwen2.5-coder", "x<|fim_prefix|>a<|fim_suffix|>c<|fim_middle|>", None),               # text before: raw
    ("qwen2.5-coder", "<|fim_prefix|>a<|fim_prefix|>b<|fim_suffix|>c<|fim_middle|>", None),  # a marker twice
    ("qwen2.5-coder", "<|fim_prefix|>a<|file_sep|>b<|fim_suffix|>c<|fim_middle|>", None),     # other specials
    ("qwen2.5-coder", "a b", None),
])
def test_a_prompt_in_the_models_own_template_is_split_back(family, prompt, want):
    tok = family_tokenizer(FAMILIES[family])
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    assert fim_templates.split_templated(tok, t, prompt) == want


def test_client_prompt_plain_templated_or_raw():
    tok = family_tokenizer(FAMILIES["qwen2.5-coder"])
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    assert fim_templates.client_prompt(tok, t, "a b", "c") == ("a b", "c", None)
    assert fim_templates.client_prompt(tok, t, "<|fim_prefix|>a<|fim_suffix|>c<|fim_middle|>", None) == ("a", "c", None)
    raw = "<|file_sep|>x.py\na<|fim_prefix|>a<|fim_suffix|>c<|fim_middle|>"
    assert fim_templates.client_prompt(tok, t, raw, None)[2] == tok.encode(raw).ids
    # a request with a suffix gave its prompt as text, markers and all
    assert fim_templates.client_prompt(tok, t, raw, "") == (raw, "", None)
    assert fim_templates.templated_ids(fim_templates.reads_markers_as_text(tok), t, raw) == fim_templates.templated_ids(
        family_tokenizer(FAMILIES["qwen2.5-coder"]), t, raw) == family_tokenizer(FAMILIES["qwen2.5-coder"]).encode(raw).ids
    assert fim_templates.drop_special_stops(tok, ["<|fim_pad|>", "\n\n", "<|endoftext|>"]) == ["\n\n"]


def test_deepseeks_fim_tokens_are_understood_though_its_tokenizer_marks_them_not_special():
    """DeepSeek's tokenizer.json has `"special": false` on `<｜fim▁begin｜>`… (a Continue deepseek prompt was
    taken as text: caught on vLLM by tests/backend/test_byo_model.py)."""
    ds = vocab.deepseek_tokenizer()
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", ds)
    prompt = "<｜fim▁begin｜>def f(x):\n    return<｜fim▁hole｜>\n<｜fim▁end｜>"
    assert fim_templates.client_prompt(ds, t, prompt, None) == ("def f(x):\n    return", "\n", None)
    assert fim_templates.drop_special_stops(ds, ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "//"], t) == ["//"]


@pytest.mark.parametrize("load", [vocab.deepseek_tokenizer, vocab.qwen25_tokenizer])
def test_a_file_that_spells_the_markers_cannot_rewrite_its_prompt(load):
    """The served tokenizer (`reads_markers_as_text`, as quickcode/backend/engine.py loads it) reads a marker
    written in the user's text as text, also where the prompt is encoded by the tokenizer itself (DeepSeek: no
    fast path, and its FIM tokens not flagged special): the prompt holds the template's markers once each."""
    tok = fim_templates.reads_markers_as_text(load())
    t = fim_templates.FimTemplate.load(REPO / "no-such-model-folder", tok)
    marks = [t.prefix_id, t.suffix_id, t.middle_id]
    names = " ".join(tok.id_to_token(i) for i in marks)
    ids = fim.build_prompt(tok, t, f"x = 1\n# {names}\ny = ", f"\n# {names}\nz = 3\n", 512)
    assert [ids.count(i) for i in marks] == [1, 1, 1]
    assert tok.decode(ids[ids.index(t.suffix_id) + 1:ids.index(t.middle_id)]) == f"\n# {names}\nz = 3\n"
