"""The GPU tools of ``scripts/gpu/`` and the speed keys they time, on the CPU.

No GPU here: what can be checked without one is checked, each piece against a
deliberate mistake.

* ``sm90_fatbin.py`` rewrites a fat binary in place: a synthetic library holding one
  fat binary (an sm_80 ELF entry and a compute_86 PTX entry) gets an sm_90 ELF entry
  with the bytes a stand-in ``ptxas`` wrote, first, then the PTX; everything around
  the fat binary is unchanged; ``--disable`` hides the sm_90 entry again.
* ``choose_profile.py`` takes the fastest lever that changes speed only, never a
  batch change, and sets the epochs that fit the budget.
* ``twin.py`` (PyTorch, not installed here) reads the network's numbers from
  ``msresnet.model.architecture`` and the split, schedule and profile from msresnet,
  keeping no copy of them.
* The config keys refuse GPU-only values elsewhere; ``amp_batchnorm: float16``
  clears BatchNorm's casts and nothing else's, refuses NHWC and keeps the GPU
  backend in NCHW; a network built off a GPU is NCHW.
* ``bn_check.py``'s float64 reference is what MindSpore's CPU kernels compute.
"""

from __future__ import annotations

import ast
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "scripts" / "gpu"
MAGIC = 0xBA55ED50


def _tool(name: str):
    """A module of ``scripts/gpu/`` imported by name (the folder is no package)."""
    import importlib

    sys.path.insert(0, str(TOOLS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(TOOLS))


def _entry(kind: int, arch: int, payload: bytes) -> bytes:
    """A fat binary entry as nvcc lays it out (64-byte header, payload padded to 8)."""
    padded = payload + b"\0" * (-len(payload) % 8)
    header = bytearray(64)
    struct.pack_into("<HHIQ", header, 0, kind, 0x0101, 64, len(padded))
    struct.pack_into("<I", header, 28, arch)
    struct.pack_into("<Q", header, 40, 0x11)  # 64-bit, uncompressed
    return bytes(header) + padded


def _library(tmp_path: Path) -> tuple[Path, bytes, bytes, int]:
    ptx = b".version 7.6\n.target sm_86\n.address_size 64\n"
    body = _entry(2, 80, b"\x7fELF" + b"\x01" * 4000) + _entry(1, 86, ptx)
    fatbin = struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body
    before, after = b"HEAD" * 25, b"TAIL" * 25
    path = tmp_path / "libfake.so"
    path.write_bytes(before + fatbin + after)
    return path, before, after, len(fatbin)


def _fake_ptxas(tmp_path: Path, cubin: bytes) -> Path:
    """A ptxas that checks it was asked for sm_90 and writes ``cubin``."""
    (tmp_path / "cubin.bin").write_bytes(cubin)
    script = tmp_path / "ptxas"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in *-arch=sm_90*) ;; *) echo "not sm_90: $*" >&2; exit 1;; esac\n'
        'while [ "$1" != "-o" ]; do shift; done\n'
        f'cp {tmp_path / "cubin.bin"} "$2"\n')
    script.chmod(0o755)
    return script


def _entries(data: bytes, start: int) -> list[tuple[int, int, bytes]]:
    size = struct.unpack_from("<Q", data, start + 8)[0]
    found, p = [], start + 16
    while p < start + 16 + size:
        kind, _, header, padded = struct.unpack_from("<HHIQ", data, p)
        arch = struct.unpack_from("<I", data, p + 28)[0]
        found.append((kind, arch, data[p + header:p + header + padded]))
        p += header + padded
    return found


def test_sm90_code_goes_first_in_the_fat_binarys_own_bytes(tmp_path):
    library, before, after, length = _library(tmp_path)
    cubin = b"\x7fELF-sm90-" + bytes(range(200))
    ptxas = _fake_ptxas(tmp_path, cubin)
    run = subprocess.run([sys.executable, str(TOOLS / "sm90_fatbin.py"), str(ptxas), "1",
                          str(library)], capture_output=True, text=True, check=True)
    assert "sm_90 code for 1 of 1 fat binaries" in run.stdout
    data = library.read_bytes()
    assert data.startswith(before) and data.endswith(after)  # nothing else moved
    assert len(data) == len(before) + length + len(after)
    entries = _entries(data, len(before))
    assert [(k, a) for k, a, _ in entries] == [(2, 90), (1, 86)]  # sm_80 code gone
    assert entries[0][2].rstrip(b"\0") == cubin
    assert entries[1][2].startswith(b".version 7.6")  # the driver's fallback kept

    subprocess.run([sys.executable, str(TOOLS / "sm90_fatbin.py"), "--disable", str(library)],
                   check=True, capture_output=True)
    assert [(k, a) for k, a, _ in _entries(library.read_bytes(), len(before))] == \
        [(2, 1), (1, 86)]


def test_a_failed_compile_leaves_the_fat_binary_as_it_was(tmp_path):
    library, *_ = _library(tmp_path)
    original = library.read_bytes()
    ptxas = tmp_path / "ptxas"
    ptxas.write_text("#!/bin/sh\necho 'ptxas fatal   : Unresolved extern' >&2\nexit 1\n")
    ptxas.chmod(0o755)
    run = subprocess.run([sys.executable, str(TOOLS / "sm90_fatbin.py"), str(ptxas), "1",
                          str(library)], capture_output=True, text=True, check=True)
    assert "1 failed" in run.stdout and library.read_bytes() == original


def _choose(tmp_path: Path, levers: list[dict], budget: int = 900,
            check: bool = True) -> tuple[str, str, int]:
    """choose_profile.py on a copy of gpu-fast.yaml: (what it printed, the profile after,
    its exit status). With ``check`` off, a failing run gives its stderr instead of
    raising."""
    profile = tmp_path / "gpu-fast.yaml"
    if not profile.exists():
        profile.write_text((REPO / "configs" / "gpu-fast.yaml").read_text())
    record = tmp_path / "levers.json"
    record.write_text(json.dumps(levers))
    run = subprocess.run([sys.executable, str(TOOLS / "choose_profile.py"), str(record),
                          str(profile), str(budget)], capture_output=True, text=True, check=check)
    return (run.stdout if run.returncode == 0 else run.stderr), profile.read_text(), run.returncode


def _lever(name: str, overrides: list[str], rate: float, loss: float = 2.2) -> dict:
    return {"name": name, "overrides": overrides,
            "result": {"images_per_second": rate, "eval_images_per_second": 20000.0,
                       "first_epoch_seconds": 20.0, "seconds": 3.0, "first_eval_seconds": 4.0,
                       "train_loss": loss}}


def test_the_profile_takes_the_fastest_speed_lever_and_the_epochs_that_fit(tmp_path):
    levers = [_lever("base", [], 4200.0),
              _lever("nhwc", ["data_format=NHWC"], 6000.0),
              _lever("b512", ["data_format=NHWC", "batch_size=512"], 9000.0),  # recipe change
              {"name": "gk", "overrides": ["graph_kernel=true"], "error": "no AKG"}]
    said, text, _ = _choose(tmp_path, levers)
    assert "chose lever nhwc" in said
    assert re.search(r"^data_format: NHWC$", text, re.M)
    assert re.search(r"^batch_size: 256$", text, re.M)
    assert text.startswith("# gpu-fast:")  # the comments stay
    epochs = int(re.search(r"^epoch_size: (\d+)$", text, re.M).group(1))
    epoch = 44_800 / 6000 + 5000 / 20000 + 0.5
    assert epochs * epoch + 20 <= 900 * 0.95 < (epochs + 1) * epoch + 21


def test_a_lever_whose_loss_is_not_finite_is_never_chosen(tmp_path):
    # the H100 lease's record: float16 BatchNorm 3.2x faster, and a NaN loss
    record = json.loads((REPO / "results/gpu/h100-2026-12-06-levers/levers.json").read_text())
    fast = next(lv for lv in record if lv["name"] == "bn16")
    assert fast["result"]["images_per_second"] > 3 * record[0]["result"]["images_per_second"]
    said, text, _ = _choose(tmp_path, record)
    assert "chose lever base" in said and re.search(r"^amp_batchnorm: float32$", text, re.M)
    before = text
    only_nan = [_lever("bn16", ["amp_batchnorm=float16"], 13500.0, float("nan"))]
    said, after, status = _choose(tmp_path, only_nan, check=False)
    assert status == 1 and "trained to a finite loss" in said
    assert after == before


def test_a_levers_error_is_the_exceptions_own_line():
    levers = _tool("levers")
    stderr = ("[WARNING] ME(1): LoadAio failed\nTraceback (most recent call last):\n"
              "RuntimeError: Unsupported op [Conv2D] on GPU, format NHWC\n\n"
              "- C++ Call Stack: (For framework developers)\n"
              " (See file 'rank_0/om/analyze_fail.ir' for more details.)\n")
    assert levers.first_error(stderr, 1).startswith("RuntimeError: Unsupported op")
    assert levers.first_error("", 139) == "exit 139"


def test_the_twin_reads_the_networks_numbers_and_the_recipe_from_msresnet():
    tree = ast.parse((TOOLS / "twin.py").read_text())
    imported = {(node.module, alias.name) for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    for wanted in [("msresnet.model.architecture", "STAGES"),
                   ("msresnet.model.architecture", "BN_EPS"),
                   ("msresnet.data.splits", "hold_out"),
                   ("msresnet.model.lr_schedule", "lr_for_config"),
                   ("msresnet.config.profile", "load_config")]:
        assert wanted in imported, wanted
    numbers = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)]
    assert 1e-4 not in numbers and 0.01 not in numbers  # no copied BatchNorm eps or sigma
    from msresnet.model import architecture, resnet
    assert resnet.STAGES is architecture.STAGES and resnet.BN_EPS is architecture.BN_EPS


@pytest.mark.parametrize("key, value", [("data_format", "NHWC"),
                                        ("amp_batchnorm", "float16"),
                                        ("graph_kernel", "true")])
def test_gpu_only_speed_settings_are_refused_on_other_devices(key, value):
    from msresnet.config.profile import ConfigError, load_config, parse_overrides

    with pytest.raises(ConfigError, match=f"{key}: .*needs device_target 'GPU'"):
        load_config("cpu", parse_overrides([f"--{key}", value]))
    load_config("gpu", parse_overrides([f"--{key}", value]))


def test_float16_batchnorm_only_applies_to_o2():
    from msresnet.config.profile import ConfigError, load_config, parse_overrides

    with pytest.raises(ConfigError, match="amp_batchnorm: 'float16' changes O2 only"):
        load_config("gpu", parse_overrides(["--amp_batchnorm", "float16", "--amp_level", "O3"]))


def test_float16_batchnorm_refuses_nhwc_where_its_fused_gradients_are_wrong():
    from msresnet.config.profile import ConfigError, load_config, parse_overrides

    with pytest.raises(ConfigError, match="amp_batchnorm: 'float16' trains to NaN with "
                                          "data_format 'NHWC'"):
        load_config("gpu", parse_overrides(["--amp_batchnorm", "float16", "--amp_level", "O2",
                                            "--data_format", "NHWC"]))


def test_float16_batchnorm_keeps_the_gpu_backend_in_nchw():
    """The context that keeps MindSpore from fusing float16 BatchNorm with its ReLU:
    set for float16 BatchNorm on a GPU, and only then."""
    from msresnet.config.profile import load_config, parse_overrides
    from msresnet.training.factories import speed_context

    def context(*args: str) -> dict:
        return speed_context(load_config("gpu", parse_overrides(["--amp_level", "O2", *args])))

    assert context() == {}
    assert context("--amp_batchnorm", "float16") == {"disable_format_transform": True}
    assert context("--graph_kernel", "true") == {"enable_graph_kernel": True}
    assert speed_context(load_config("cpu")) == {}


@pytest.mark.parametrize("pattern", ["bn", "bn_relu", "bn_add_relu"])
def test_the_batchnorm_checks_reference_is_mindsporess_own_result_on_the_cpu(pattern):
    """scripts/gpu/bn_check.py judges the GPU's kernels by its float64 reference; the
    CPU's float32 kernels agree with it to float32's precision, in each pattern."""
    import msresnet  # noqa: F401
    import mindspore as ms

    bn_check = _tool("bn_check")
    ms.set_context(mode=ms.GRAPH_MODE)
    result = bn_check.run_case("NCHW", "float32", (8, 4, 5, 5), 3.0, pattern)
    for name in ("y", "dx", "dgamma", "dbeta"):
        assert result[name]["finite"] and result[name]["rel_err"] < 1e-5, (name, result)
    x, dy = bn_check.inputs((8, 4, 5, 5), 3.0)
    _, wrong, _, _ = bn_check.reference(x, dy, pattern="bn")  # the ReLU's mask matters
    _, right, _, _ = bn_check.reference(x, dy, pattern="bn_relu")
    assert abs(wrong - right).max() > 0.1 * abs(right).max()


def test_relu_as_maximum_is_relu():
    import numpy as np

    import msresnet  # noqa: F401
    import mindspore as ms
    from mindspore import nn

    lever_patches = _tool("lever_patches")
    x = ms.Tensor(np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 2, 2))
    assert (lever_patches.MaximumReLU()(x).asnumpy() == nn.ReLU()(x).asnumpy()).all()
    with pytest.raises(ValueError, match="unknown lever patch"):
        lever_patches.apply(["fast"])


def test_float16_batchnorm_clears_the_casts_of_batchnorm_alone():
    import msresnet  # noqa: F401  (the CPU setting before MindSpore)
    from mindspore import nn

    from msresnet.model.resnet import resnet50
    from msresnet.training.factories import float16_with_batchnorm_inputs

    net = resnet50(stem="cifar")
    wrapped = float16_with_batchnorm_inputs(net)
    cells = [cell for _, cell in wrapped.cells_and_names()]
    norms = [c for c in cells if isinstance(c, nn.BatchNorm2d)]
    convs = [c for c in cells if isinstance(c, nn.Conv2d)]
    assert len(norms) == 53 and len(convs) == 53
    assert all(not c.get_flags()["fp16"] and not c.get_flags()["fp32"] for c in norms)
    assert all(c.get_flags()["fp16"] for c in convs)
    names = [p.name for p in wrapped.get_parameters()]
    assert names == [p.name for p in net.get_parameters()] and names[0] == "conv1.weight"


def test_a_network_built_off_a_gpu_is_nchw_whatever_the_config_says():
    import msresnet  # noqa: F401
    import mindspore as ms

    from msresnet.config.profile import load_config, parse_overrides
    from msresnet.training.factories import data_format

    assert ms.get_context("device_target") == "CPU"  # the test machines have no GPU
    config = load_config("gpu", parse_overrides(["--data_format", "NHWC"]))
    assert data_format(config) == "NCHW"


AIRBENCH_F1C599C = {  # sha256 of the files at github.com/KellerJordan/cifar10-airbench f1c599c
    "airbench94.py": "0b155e0ff0e696bc01ae136654ddae88a24cd053cd2b4313d44548c29ed6c91d",
    "airbench96.py": "fef298f48d9b629a6454b9c5e84cca95ccfa7fc6450057cc4131811d2ed49c88",
    "LICENSE": "418c56bc42284062ac536f12496a0e1d9c8edb68bcde8da29675bd48492ce022"}


def test_the_vendored_airbench_is_the_published_one_unmodified():
    """The data's ceiling on the GPU page rests on airbench's published means, which hold
    for its scripts as published: legacy/airbench94.py and airbench96.py at f1c599c."""
    import hashlib

    folder = TOOLS / "airbench"
    for name, digest in AIRBENCH_F1C599C.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    source = (TOOLS / "airbench.py").read_text()
    assert 'PUBLISHED = {"airbench94": (94.01, 1000), "airbench96": (96.03, 400)}' in source
    for name, (mean, runs) in (("airbench94", (94.01, 1000)), ("airbench96", (96.03, 400))):
        header = (folder / f"{name}.py").read_text()[:400]
        assert f"Evidence: {mean} average accuracy in n={runs} runs." in header, name
