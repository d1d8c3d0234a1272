"""A CPU without AVX-512 (an AVX2 laptop's) on a machine that has it, for measuring what such users get.

Python imports `sitecustomize` in every process it starts, the engine's spawned ones too, when this folder is on
PYTHONPATH. With the environment below, torch's kernels stop at AVX2 (ATEN_CPU_CAPABILITY), oneDNN's too
(ONEDNN_MAX_CPU_ISA), vLLM loads its AVX2 kernels (torch's AVX-512 checks answer no) and quickcode reads CPU
flags without AVX-512 and AMX (quickcode/backend/cpu_features.py):

    QUICKCODE_EMULATE_AVX2=1 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \\
        PYTHONPATH=quickcode/benchmarks/emulate_avx2:. quickcode bench cold --out DIR

An emulation, not the hardware: the instruction sets are the laptop's, the cores, caches and clocks this
machine's (docs/operators.md, "Which dtype the engine computes in"). Compiled kernels go to caches of their own:
inductor's cache key does not hold ATEN_CPU_CAPABILITY, and a kernel built for one ISA, loaded by a process of
the other, corrupted the heap ("double free or corruption", NaN attention; 2026-11-29).
"""
import os

if os.environ.get("QUICKCODE_EMULATE_AVX2") == "1":
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/quickcode-emulate-avx2/inductor")
    os.environ.setdefault("VLLM_CACHE_ROOT", "/tmp/quickcode-emulate-avx2/vllm")
    import torch

    torch.cpu._is_avx512_supported = lambda: False
    torch.cpu._is_avx512_bf16_supported = lambda: False
    torch.cpu._is_amx_tile_supported = lambda: False
    try:
        import quickcode.backend.cpu_features as _cf
    except ImportError:   # a process outside the repository
        pass
    else:
        _read = _cf.cpu_flags
        _cf.cpu_flags = lambda cpuinfo=None: frozenset(
            f for f in _read(cpuinfo) if cpuinfo is not None or not f.startswith(("avx512", "amx")))
