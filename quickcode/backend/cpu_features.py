"""Does this CPU compute bf16 natively? Read from the kernel's CPU flags; the decisions (the training step,
the served dtype) are pure functions of them.

With AVX512-BF16 or AMX-BF16 (x86) or BF16 (Arm) bf16 runs faster than fp32; without them PyTorch emulates
bf16, and both training and serving run several times slower in it than in fp32 (`quickcode bench train`,
`quickcode bench cold`). vLLM takes bf16 on every x86 CPU, hence the served dtype's `auto`
(docs/decisions.md#dtype-auto; the training step: docs/decisions.md#bf16-train-step).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The first CPU's flags ("flags" on x86, "Features" on Arm) of `cpuinfo` (default: /proc/cpuinfo)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_model(cpuinfo: str | None = None) -> str:
    """The first CPU's model name in `cpuinfo` (default: /proc/cpuinfo), or "" where it names none."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return ""


def native_bf16(flags: Iterable[str]) -> bool:
    return bool(native_bf16_flags(flags))


def native_bf16_flags(flags: Iterable[str]) -> list[str]:
    """The flags that make bf16 native here (for reports and logs)."""
    return sorted(NATIVE_BF16_FLAGS.intersection(flags))


def served_dtype(setting: str, on_cpu: bool, flags: Iterable[str]) -> str:
    """The dtype vLLM is given for the `dtype` setting: "auto" on a CPU is bfloat16 where bf16 is native and
    float32 where it would be emulated; "auto" on an accelerator is vLLM's own auto (the model's dtype); any
    other setting is taken as it is."""
    if setting != "auto" or not on_cpu:
        return setting
    return "bfloat16" if native_bf16(flags) else "float32"
