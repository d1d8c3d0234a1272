"""A model folder whose attention head size vLLM's CPU attention has no kernel for (head_dim 16) is refused
before the engine starts, with the reason (quickcode/backend/model_info.py check_head_size, called by
quickcode/backend/vllm_engine.py when the engine starts); before, the engine processes died with no word of
why."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from quickcode.backend.model_info import check_head_size

REPO = Path(__file__).resolve().parents[2]
CPU_HEAD_SIZES = [32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512]   # vLLM 0.32 CPUAttentionBackend


def _folder(path: Path, **config) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_a_head_size_without_a_kernel_is_refused_with_the_reason(tmp_path):
    folder = _folder(tmp_path / "tiny", hidden_size=64, num_attention_heads=4)
    with pytest.raises(ValueError,
                       match=r"attention head size 16 \(hidden_size 64 / 4 heads\).*supported: 32, 64"):
        check_head_size(folder, CPU_HEAD_SIZES)
    with pytest.raises(ValueError, match="head size 48"):
        check_head_size(_folder(tmp_path / "explicit", hidden_size=192, num_attention_heads=3, head_dim=48),
                        CPU_HEAD_SIZES)


def test_supported_and_unstated_head_sizes_pass(tmp_path):
    for name in ("target", "draft", "target-int8"):   # the committed models: head size 64
        check_head_size(REPO / "models" / name, CPU_HEAD_SIZES)
    check_head_size(_folder(tmp_path / "explicit", hidden_size=64, num_attention_heads=4, head_dim=32),
                    CPU_HEAD_SIZES)
    check_head_size(tmp_path / "no-folder", CPU_HEAD_SIZES)          # nothing said: vLLM decides
    check_head_size(_folder(tmp_path / "no-heads", hidden_size=64), CPU_HEAD_SIZES)


def test_the_engine_refuses_it_before_vllm_starts(tmp_path):
    """The real start path with vLLM's own list of CPU head sizes: start() raises, says why, starts
    nothing."""
    from quickcode.backend.settings import Settings
    from quickcode.backend.vllm_engine import VllmEngine

    target = tmp_path / "target"
    shutil.copytree(REPO / "models" / "target", target)
    config = json.loads((target / "config.json").read_text())
    config["num_attention_heads"] = config["num_key_value_heads"] = config["hidden_size"] // 16
    config["head_dim"] = 16
    (target / "config.json").write_text(json.dumps(config))
    engine = VllmEngine(Settings(model=target, spec_method="off"))
    with pytest.raises(ValueError, match="attention head size 16"):
        engine.start()
    assert engine.llm is None
    assert engine.dead and "attention head size 16" in engine.error
