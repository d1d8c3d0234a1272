"""Which embedded profile a bare `quickcode serve` serves, and why: a pure choice over the CPU and the default's
measured speed on it (quickcode/backend/speed_probe.py)."""
import json
from datetime import datetime, timezone

import pytest

from quickcode.backend.profiles import choose_profile, profile_settings
from quickcode.backend.settings import Settings
from quickcode.backend.speed_probe import (STEP_CHARS, build_stamp, make_record, this_machine, typing_requests,
                                           valid_record, within_budget)


def test_auto_serves_the_default_where_bf16_is_native_or_on_a_gpu_and_light_where_it_is_emulated():
    assert choose_profile("auto", ["avx512_bf16"], gpu=False)[0] == "default"
    assert choose_profile("auto", [], gpu=True)[0] == "default"
    name, why = choose_profile("auto", [], gpu=False)
    assert name == "light" and "emulate bf16" in why and 'profile = "default"' in why


def test_a_profile_the_operator_names_is_served_whatever_the_cpu():
    assert choose_profile("default", [], gpu=False) == ("default", "profile = 'default' was set")
    assert choose_profile("light", ["avx512_bf16"], gpu=True)[0] == "light"


def test_each_profile_names_its_target_and_an_unknown_one_is_refused():
    default, light = profile_settings("default"), profile_settings("light")
    assert default["precision"] == "int8" and default["model_int8"].name == "smollm2-fim-int8"
    assert light["precision"] == "bf16" and light["model"].name == "target"
    assert set(default) == set(light)   # every profile fills the same settings: none leaks from another
    # the default's model computes on every core; the light one leaves vLLM its scheduler's core
    assert default["cpu_reserved_cores"] == 0 and light["cpu_reserved_cores"] is None
    with pytest.raises(ValueError, match="no profile"):
        profile_settings("huge")


def test_auto_serves_light_where_the_defaults_model_is_not_built_and_says_how_to_build_it():
    name, why = choose_profile("auto", ["avx512_bf16"], gpu=True, built=False)
    assert name == "light" and "not built" in why and "scripts/setup.sh" in why
    assert choose_profile("default", [], gpu=False, built=False)[0] == "default"   # named: served (or refused)


def _record(p50_ms: float, p95_ms: float, machine=None, build="9:1") -> dict:
    machine = machine or {"cpu": "AMD EPYC", "cores": 2, "bf16": ["avx512_bf16"]}
    return make_record([p50_ms] * 11 + [p95_ms] * 2, machine, build, datetime(2026, 12, 2, tzinfo=timezone.utc))


def test_auto_serves_the_default_on_a_cpu_only_where_its_probe_found_it_within_the_typing_budget():
    fast, slow = _record(60, 150), _record(140, 240)
    assert fast["within_budget"] and not slow["within_budget"]
    name, why = choose_profile("auto", ["avx512_bf16"], gpu=False, probe=fast)
    assert name == "default" and "p50 60 / p95 150 ms" in why and "within the typing budget of 100 / 200" in why
    name, why = choose_profile("auto", ["avx512_bf16"], gpu=False, probe=slow)     # native bf16, too slow here
    assert name == "light" and "p50 140 / p95 240 ms" in why and 'profile = "default"' in why
    assert choose_profile("auto", [], gpu=False, probe=fast)[0] == "default"       # measured beats the flags
    assert choose_profile("auto", [], gpu=True, probe=slow)[0] == "default"        # a GPU is not probed
    assert choose_profile("default", [], gpu=False, probe=slow)[0] == "default"    # named: served
    assert "quickcode probe" in choose_profile("auto", ["avx512_bf16"], gpu=False)[1]  # not probed: says how


def test_the_budget_holds_both_percentiles():
    assert within_budget(100, 200) and not within_budget(101, 150) and not within_budget(90, 201)


def test_a_probe_record_counts_only_for_the_machine_and_the_build_it_measured():
    r = _record(60, 150)
    assert valid_record(r, r["machine"], "9:1") is r
    assert valid_record(r, {**r["machine"], "cores": 4}, "9:1") is None      # another machine (an image moved)
    assert valid_record(r, r["machine"], "9:2") is None                      # the default rebuilt
    assert valid_record(r, r["machine"], "") is None and valid_record(None, r["machine"], "9:1") is None
    assert valid_record({**r, "answer_p95_ms": "fast"}, r["machine"], "9:1") is None


def test_settings_follow_the_record_probed_here(tmp_path, monkeypatch):
    target = tmp_path / "smollm2-fim-int8"
    target.mkdir()
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"w" * 9)
    monkeypatch.setenv("QUICKCODE_BUILT_MODELS_DIR", str(tmp_path))
    for p50_ms, served in ((60, "default"), (140, "light")):
        r = _record(p50_ms, 150, this_machine(), build_stamp(target))
        (tmp_path / "speed-probe.json").write_text(json.dumps(r))
        s = Settings(profile="auto")
        assert (s.profile_served, "quickcode probe" in s.profile_why) == (served, True), s.profile_why
    (tmp_path / "speed-probe.json").write_text("not json")                  # unreadable: as if not probed
    assert "p50" not in Settings(profile="auto").profile_why


def test_typing_size_requests_advance_the_cursor_under_one_suffix():
    cases = typing_requests(5)
    assert len(cases) == 5 and len({suffix for _, suffix in cases}) == 1
    assert [len(b) - len(a) for (a, _), (b, _) in zip(cases, cases[1:])] == [STEP_CHARS] * 4
    assert all(cases[i + 1][0].startswith(cases[i][0]) for i in range(4))


def test_the_cpu_model_is_read_from_cpuinfo():
    from quickcode.backend.cpu_features import cpu_model

    assert cpu_model("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t: avx2\n") == "AMD EPYC"
    assert cpu_model("Features\t: fp asimd\n") == ""        # Arm's cpuinfo may name no model
