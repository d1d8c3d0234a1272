"""Which embedded profile a bare `quickcode serve` serves, and why: a pure choice over the CPU's flags."""
import pytest

from quickcode.backend.profiles import choose_profile, profile_settings


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
