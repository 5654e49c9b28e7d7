"""Choose MindSpore's fast convolution path on x86 CPUs.

MindSpore's CPU kernels use oneDNN, and MindSpore hands it plain NCHW layouts. On
AVX-512 machines (the Intel Xeon some of the book's runs were recorded on; the AMD
EPYC test host has AVX2 only) oneDNN then runs its reference convolution, 40-100x
slower per convolution than the im2col + GEMM path it takes under AVX2, and the
whole training step about 8x slower (``results/budget/throughput/isa.json``; the
troubleshooting page's oneDNN section shows the log). Capping the ISA with
``ONEDNN_MAX_CPU_ISA=AVX2`` restores the fast path. oneDNN reads the variable
once, when MindSpore runs its first operator, so it must be set before that:
importing :mod:`msresnet` sets it (unless you already did), which is why the
notebooks import ``msresnet`` before they touch MindSpore.

To measure the effect yourself run ``msresnet bench``; to opt out set
``ONEDNN_MAX_CPU_ISA`` yourself (``ALL`` means "no cap").
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from pathlib import Path

ISA_VARIABLE = "ONEDNN_MAX_CPU_ISA"
ISA_VALUES = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
              "AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
              "AVX512_CORE_AMX_FP16", "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16",
              "AVX10_2_512", "AVX10_2_512_AMX_2", "ALL")
"""The values oneDNN (3.x) takes for :data:`ISA_VARIABLE` (its documentation's list of
``ONEDNN_MAX_CPU_ISA`` values); anything else it ignores, silently."""
FAST_ISA = "AVX2"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU feature flags Linux reports (empty where /proc/cpuinfo is absent)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name, for benchmark and run records."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def apply_fast_isa(environ: MutableMapping[str, str] | None = None,
                   flags: set[str] | None = None) -> str:
    """Set ``ONEDNN_MAX_CPU_ISA=AVX2`` when it helps and the user has not chosen.

    Returns a short description of what is in effect, for logs and notebooks.
    """
    env = os.environ if environ is None else environ
    if ISA_VARIABLE in env:
        return f"{ISA_VARIABLE}={env[ISA_VARIABLE]} (set by you)"
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return f"{ISA_VARIABLE} not set (not an x86 CPU)"
    flags = cpu_flags() if flags is None else flags
    if "avx512f" in flags and "avx2" in flags:
        env[ISA_VARIABLE] = FAST_ISA
        return f"{ISA_VARIABLE}={FAST_ISA} (set by msresnet: AVX-512 CPU)"
    return f"{ISA_VARIABLE} not set (no AVX-512 on this CPU)"
