"""bf16 only where the CPU computes it natively (AVX512-BF16 / AMX-BF16 / Arm BF16): `quickcode model train`'s
step on the cpu profile (the fast path in bf16 autocast, else the original fp32 step) and the dtype the backend
serves (`dtype = "auto"`)."""
from __future__ import annotations

from quickcode.backend.cpu_features import cpu_flags, native_bf16, served_dtype
from quickcode.draft_model.configs import cpu_step, profile

X86_AVX512_BF16 = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni
"""
X86_AVX512_ONLY = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512vl avx512dq\n"
X86_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_flags_are_read_from_cpuinfo():
    assert "avx512_bf16" in cpu_flags(X86_AVX512_BF16)
    assert cpu_flags(ARM_BF16) >= {"asimd", "bf16"}
    assert cpu_flags("no flags line\n") == frozenset()


def test_native_bf16_needs_a_bf16_instruction_set_not_just_avx512():
    assert native_bf16(cpu_flags(X86_AVX512_BF16))
    assert native_bf16(cpu_flags(ARM_BF16))
    assert native_bf16({"amx_bf16", "amx_tile"})
    assert not native_bf16(cpu_flags(X86_AVX512_ONLY))       # AVX512 emulates bf16: no gain
    assert not native_bf16(cpu_flags(X86_AVX2))


def test_the_cpu_step_is_fast_bf16_only_where_bf16_is_native():
    native = profile("cpu", **cpu_step(cpu_flags(X86_AVX512_BF16)))
    assert (native.impl, native.bf16, native.fused_adamw) == ("fast", True, True)
    for emulated in (X86_AVX512_ONLY, X86_AVX2):
        assert profile("cpu", **cpu_step(cpu_flags(emulated))) == profile("cpu")
    assert (profile("cpu").impl, profile("cpu").bf16) == ("hf", False)


def test_the_served_dtype_is_bf16_only_where_bf16_is_native():
    """vLLM takes bf16 on every x86 CPU; where it is emulated a cold 1,000-token prompt took 385 ms against
    100 ms in fp32 (docs/operators.md), so "auto" serves fp32 there."""
    assert served_dtype("auto", True, cpu_flags(X86_AVX512_BF16)) == "bfloat16"
    assert served_dtype("auto", True, cpu_flags(ARM_BF16)) == "bfloat16"
    for emulated in (X86_AVX512_ONLY, X86_AVX2, "no flags line\n"):
        assert served_dtype("auto", True, cpu_flags(emulated)) == "float32"
    assert served_dtype("auto", False, cpu_flags(X86_AVX2)) == "auto"          # a GPU: the model's own dtype
    for explicit in ("bfloat16", "float32", "float16"):                         # an operator's choice stands
        assert served_dtype(explicit, True, cpu_flags(X86_AVX2)) == explicit
        assert served_dtype(explicit, True, cpu_flags(X86_AVX512_BF16)) == explicit
