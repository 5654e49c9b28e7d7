"""The GPU page's paste-able block ("One GPU", book/gpu-ascend.md) against what was measured and what the wheel holds.

No GPU is needed. The block is the recipe measured on the H200 (``results/gpu/``),
with CUDA and cuDNN from PyPI's ``nvidia-*-cu11`` wheels. Checked here:

* it is valid bash (``bash -n``) and no line is wider than 80 columns;
* every library folder it puts on ``LD_LIBRARY_PATH`` (``nvidia/<name>/lib``) comes
  from a wheel it pins, and every pinned wheel's folder is there;
* the pinned versions are the libraries the H200 ran with: each wheel's major
  version is the soname the loader found there (``machine.txt``: ``libcudnn.so.8.9.6``,
  ``libcublas.so.11``, ``libcurand.so.10``, ...), and the links the block makes are
  the ones that run had;
* the stand-in ``nvcc`` says the CUDA version of a GPU plugin the installed
  MindSpore ships (``lib/plugin/libmindspore_gpu.so.11.6``);
* the page's list of GPU generations is what the installed wheel's kernels carry:
  the machine code (sm_XX) and PTX (compute_XX) of every fat binary in
  ``plugin/gpu/libcuda_ops.so.11``, and of the NCCL beside the 11.6 plugin, read
  with ``scripts/gpu/fatbin.py``'s reader (the pinned MindSpore only: another
  version's wheel carries other kernels).
"""

from __future__ import annotations

import collections
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "book" / "gpu-ascend.md"
MACHINE = REPO / "results" / "gpu" / "h200-2026-12-04" / "machine.txt"

WHEEL_SONAME = {
    "cudnn": "libcudnn.so", "cublas": "libcublas.so", "cuda_runtime": "libcudart.so",
    "cuda_nvrtc": "libnvrtc-builtins.so", "curand": "libcurand.so",
    "cusolver": "libcusolver.so", "cufft": "libcufft.so", "cusparse": "libcusparse.so",
}
"""Each wheel's folder under nvidia/ and the library whose version machine.txt shows."""


def section_text(label: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"({label})=")
    end = text.find("\n(", start + 1)
    return text[start:end if end > 0 else None]


def first_block(label: str) -> str:
    match = re.search(r"```bash\n(.*?)```", section_text(label), re.S)
    assert match, f"no bash block under ({label})="
    return match.group(1)


BLOCK = first_block("gpu-ascend-one-gpu")


def pins(block: str) -> dict[str, str]:
    """nvidia wheel folder name -> pinned version."""
    return {name.replace("-", "_"): version
            for name, version in re.findall(r"nvidia-([a-z-]+)-cu11==([\d.]+)", block)}


def library_folders(block: str) -> list[str]:
    match = re.search(r"^for lib in ([\w ]+)$", block, re.M)
    assert match, "no 'for lib in ...' line"
    return match.group(1).split()


def test_the_block_is_bash_that_fits_80_columns() -> None:
    result = subprocess.run(["bash", "-n"], input=BLOCK, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    wide = [line for line in BLOCK.splitlines() if len(line) > 80]
    assert not wide, wide


def test_every_pinned_wheel_is_on_the_library_path() -> None:
    assert sorted(pins(BLOCK)) == sorted(library_folders(BLOCK)) == sorted(WHEEL_SONAME)


def measured_libraries() -> list[str]:
    return MACHINE.read_text().splitlines()


def test_the_pins_are_the_libraries_the_h200_ran() -> None:
    libraries = measured_libraries()
    for folder, version in pins(BLOCK).items():
        soname = WHEEL_SONAME[folder]
        found = [line for line in libraries if line.startswith(soname + ".")]
        assert found, f"{soname}: not in {MACHINE.name}"
        numbers = {line.removeprefix(soname + ".") for line in found}
        if folder == "cudnn":  # its full version is in a file name there
            assert ".".join(version.split(".")[:3]) in numbers, (version, numbers)
        elif folder == "cuda_nvrtc":  # libnvrtc-builtins.so.11.8: major.minor
            assert ".".join(version.split(".")[:2]) in numbers, (version, numbers)
        else:  # the soname's major version
            assert version.split(".")[0] in {n.split(".")[0] for n in numbers}, (version, numbers)
    for link in re.findall(r"ln -sf \S+ \"\$NV/\w+/lib/(\S+)\"", BLOCK):
        assert link in libraries or link in {"libcudart.so"}, link


def test_the_stand_in_nvcc_names_a_shipped_plugin() -> None:
    said = re.search(r"release (\d+\.\d+), V", BLOCK)
    assert said
    import mindspore

    plugins = Path(mindspore.__file__).parent / "lib" / "plugin"
    assert (plugins / f"libmindspore_gpu.so.{said[1]}").exists(), sorted(
        p.name for p in plugins.glob("libmindspore_gpu.so.*"))
    assert f"libcudart.so.{said[1]}." in BLOCK


def kernel_targets(library: Path) -> dict[str, set[int]]:
    """{"sm": {60, ...}, "compute": {...}}: the machine code and PTX targets found in the
    fat binaries embedded in ``library`` (an entry of kind 2 is machine code, 1 PTX)."""
    sys.path.insert(0, str(REPO / "scripts" / "gpu"))
    try:
        import fatbin
    finally:
        sys.path.pop(0)
    found: dict[str, set[int]] = collections.defaultdict(set)
    image, handle = fatbin.mapped(library)
    with handle:
        binaries = fatbin.fat_binaries(image)
        assert binaries, library
        for offset, size in binaries:
            for entry in fatbin.entries(image, offset, size):
                found[{1: "compute", 2: "sm"}[entry.kind]].add(entry.arch)
    return dict(found)


def page_targets(text: str, kind: str) -> set[int]:
    return {int(n) for n in re.findall(rf"\b{kind}_(\d+)", text)}


PINNED = re.search(r"^mindspore==(\S+)$", (REPO / "requirements.txt").read_text(), re.M)[1]


@pytest.mark.skipif(importlib.metadata.version("mindspore") != PINNED,
                    reason="the page describes the pinned MindSpore's wheel")
def test_the_page_lists_the_kernels_the_wheel_carries() -> None:
    import mindspore

    plugins = Path(mindspore.__file__).parent / "lib" / "plugin"
    text = " ".join(section_text("gpu-ascend-one-gpu").split())
    kernels = re.search(r"MindSpore \S+ CUDA kernels .*?PTX for ([^.]*)\.", text)
    assert kernels, "no sentence naming the kernels' targets"
    ops = kernel_targets(plugins / "gpu" / "libcuda_ops.so.11")
    assert page_targets(kernels.group(0), "sm") == ops["sm"], (kernels.group(0), ops)
    assert page_targets(kernels.group(0), "compute") == ops["compute"], (kernels.group(0), ops)
    nccl_text = re.search(r"The NCCL of the 11\.6 plugin .*?only", text)
    assert nccl_text
    nccl = kernel_targets(plugins / "gpu11.6" / "libnccl.so.2")
    assert page_targets(nccl_text.group(0), "sm") == nccl["sm"], nccl
    assert page_targets(nccl_text.group(0), "compute") == nccl["compute"], nccl
    # the generations the page says run the machine code: majors of the cubins
    assert max(ops["sm"]) // 10 == 8 and "Ampere and Ada (8.x)" in text
    assert max(ops["compute"]) == 86 and "compile the compute_86" in text
