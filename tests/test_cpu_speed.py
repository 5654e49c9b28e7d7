"""The CPU speed setting: applied only when it helps and the user has not chosen."""

import os
import subprocess
import sys

import pytest

from msresnet import cpu_speed


@pytest.fixture
def x86(monkeypatch):
    monkeypatch.setattr(cpu_speed.platform, "machine", lambda: "x86_64")


def test_sets_avx2_on_avx512_cpu(x86):
    env: dict[str, str] = {}
    note = cpu_speed.apply_fast_isa(env, flags={"avx2", "avx512f"})
    assert env == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert "set by msresnet" in note


def test_user_choice_wins(x86):
    env = {"ONEDNN_MAX_CPU_ISA": "ALL"}
    note = cpu_speed.apply_fast_isa(env, flags={"avx2", "avx512f"})
    assert env == {"ONEDNN_MAX_CPU_ISA": "ALL"}
    assert "set by you" in note


def test_left_alone_without_avx512(x86):
    env: dict[str, str] = {}
    cpu_speed.apply_fast_isa(env, flags={"avx2"})
    assert env == {}


def test_left_alone_on_arm(monkeypatch):
    monkeypatch.setattr(cpu_speed.platform, "machine", lambda: "aarch64")
    env: dict[str, str] = {}
    cpu_speed.apply_fast_isa(env, flags={"avx2", "avx512f"})
    assert env == {}


def test_cpu_flags_parses_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n\n")
    assert {"avx2", "avx512f"} <= cpu_speed.cpu_flags(info)
    assert cpu_speed.cpu_flags(tmp_path / "missing") == set()


def test_import_applies_it_before_mindspore():
    """Importing msresnet in a fresh interpreter exports the variable (on AVX-512 x86)."""
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_MAX_CPU_ISA"}
    code = "import os, msresnet; print(os.environ.get('ONEDNN_MAX_CPU_ISA'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    expected = "AVX2" if {"avx2", "avx512f"} <= cpu_speed.cpu_flags() else "None"
    if cpu_speed.platform.machine().lower() not in {"x86_64", "amd64"}:
        expected = "None"
    assert out == expected


def test_cpu_model_reads_the_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t: avx2\n")
    assert cpu_speed.cpu_model(info) == "Example CPU 9000"
    assert cpu_speed.cpu_model(tmp_path / "missing")  # falls back to something non-empty
