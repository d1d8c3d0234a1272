"""`bench typing`: the client settings each arm types with (`quickcode/benchmarks/typing.py` `client_settings`)."""
from __future__ import annotations

from quickcode.benchmarks.typing import ARMS, client_settings


def test_an_arm_named_only_by_its_backend_types_with_ours_client():
    ours = {"suggestion_unit": "word"}
    got = client_settings(ours, {}, {"light": ("profile=light",)})
    assert got["light"] == ours and got["ours"] == ours and got["naive"] == ARMS["naive"]


def test_an_extra_arm_is_its_settings_over_its_namesakes_or_ours():
    ours = {"suggestion_unit": "word", "predictor": True}
    got = client_settings(ours, {"line": {"suggestion_unit": "line"}, "naive": {"debounce_ms": 5}},
                          {"line": ("profile=light",)})
    assert got["line"] == {"suggestion_unit": "line", "predictor": True}
    assert got["naive"] == {**ARMS["naive"], "debounce_ms": 5}
