"""The embedded profiles: which models a bare `quickcode serve` serves, and why (a pure choice over the CPU
and the default's measured speed on it).

`default` is a pretrained code model taught fill-in-the-middle by our adapter, served INT8, built from a
pinned registry wheel by scripts/build_default_model.sh (which scripts/setup.sh and the CPU image's build run;
docs/model-card.md); `light` is the 4.2M-parameter target this project trains from scratch, for CPUs where the
default misses the typing budget. A profile fills in only the settings the operator left unset, and none when
the operator names a model (a config file such as configs/gpu-13b-int8.toml, or `--set model=...`): that model
is served with the settings' own defaults.
"""
from __future__ import annotations

from pathlib import Path

from quickcode.backend.assets import built_models_dir, models_dir

PROFILE_NAMES = ("default", "light")


def profile_settings(name: str) -> dict[str, object]:
    """The settings profile `name` gives to every one of them the operator did not set."""
    if name == "default":
        built = built_models_dir()
        return {"model": built / "smollm2-fim", "model_int8": built / "smollm2-fim-int8", "precision": "int8",
                "fim_policy": "always", "max_model_len": 2048,
                # compiled: a minute more at start, every prompt prefilled faster
                # (docs/decisions.md#cpu-profile-compiled)
                "enforce_eager": False,
                # both cores compute the model: vLLM keeps one for its scheduler by default
                # (docs/decisions.md#cpu-reserved-cores)
                "cpu_reserved_cores": 0}
    if name == "light":
        models = models_dir()
        return {"model": models / "target", "model_int8": models / "target-int8", "precision": "bf16",
                # the tiny target infills badly at line ends: FIM only mid-line (quickcode/backend/fim.py
                # `uses_fim`)
                "fim_policy": "mid_line", "max_model_len": None, "enforce_eager": True,
                "cpu_reserved_cores": None}    # vLLM's rule (both cores not measured for the tiny model)
    raise ValueError(f"no profile {name!r} (profiles: auto, {', '.join(PROFILE_NAMES)})")


def choose_profile(setting: str, native_bf16_flags: list[str], gpu: bool,
                   built: bool = True, probe: dict | None = None) -> tuple[str, str]:
    """(profile, why) for the `profile` setting. `auto` serves the default on a GPU; on a CPU, where this
    machine's probe (quickcode/backend/speed_probe.py, `probe`: its record, or None) found the default within
    the typing budget, else the light profile; not probed, where the CPU computes bf16 natively (emulated,
    the default's cold prompts take seconds: docs/decisions.md#profile-auto). Light too where the default's
    model is not built (`built`)."""
    if setting != "auto":
        return setting, f"profile = {setting!r} was set"
    if not built:
        return "light", ("auto: the default's model is not built here (scripts/setup.sh builds it into "
                         f"{built_models_dir()}; the CPU image carries it unless built with DEFAULT_MODEL=0)")
    if gpu:
        return "default", "auto: a GPU"
    if probe is not None:
        measured = (f"the default answered typing-size requests in p50 {probe['answer_p50_ms']:.0f} / p95 "
                    f"{probe['answer_p95_ms']:.0f} ms on this machine (`quickcode probe`, "
                    f"{probe.get('measured')})")
        budget = f"the typing budget of {probe['budget_p50_ms']:.0f} / {probe['budget_p95_ms']:.0f} ms"
        if probe["within_budget"]:
            return "default", f"auto: {measured}, within {budget}"
        return "light", f"auto: {measured}, over {budget} (set profile = \"default\" to serve it anyway)"
    if native_bf16_flags:
        return "default", (f"auto: this CPU computes bf16 natively ({', '.join(native_bf16_flags)}); its "
                           "speed not measured here (`quickcode probe`)")
    return "light", ("auto: this CPU would emulate bf16, where the default misses the typing budget "
                     "(set profile = \"default\" to serve it anyway)")


def default_built() -> bool:
    """The default profile's served folder is there (set-up built it)."""
    return (built_models_dir() / "smollm2-fim-int8" / "config.json").is_file()


def has_gpu() -> bool:
    """An NVIDIA device node: enough to tell a GPU machine from a CPU one without importing torch."""
    return Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()
