"""Which oneDNN convolution a framework runs, read from oneDNN's own log.

Issue 30: the troubleshooting page said *that* an AVX-512 CPU trains slowly
unless ``ONEDNN_MAX_CPU_ISA=AVX2`` caps oneDNN; this module shows *why*. With
``ONEDNN_VERBOSE=1`` oneDNN prints one line per primitive it executes, e.g.::

    onednn_verbose,v1,primitive,exec,cpu,convolution,x64:gemm:jit,
    forward_training,src:f32::blocked:abcd::f0 wei:f32::blocked:abcd::f0
    bia:undef::undef::: dst:f32::blocked:abcd::f0,,alg:convolution_direct,
    mb64_ic64oc64_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1,7.05298

(one line in the log). The fields that matter: the implementation oneDNN chose
(``x64:gemm:jit``), the memory layout of each tensor (``abcd`` is plain NCHW;
``aBcd8b`` blocks the channels by 8; an ``a`` in the third field of a
descriptor, ``src:f32:a:blocked:...``, means the caller let oneDNN choose the
layout, format ``any``), the problem (batch, channels, sizes) and the time of
the call in milliseconds (last field).

:func:`trace` runs one 3x3 convolution (batch 64, 64 -> 64 channels, 8x8
pixels) in a *fresh* Python process, because oneDNN reads both variables once
per process; the framework is MindSpore or PyTorch (:data:`SNIPPETS`) and the
interpreter is an argument, so a separate PyTorch environment can be used.
:func:`write_record` keeps both settings' lines in a JSON record
(``results/budget/onednn/``). Nothing here imports MindSpore or PyTorch.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from msresnet.atomic import write_json
from msresnet.cpu_speed import ISA_VARIABLE, cpu_model

VERBOSE_VARIABLE = "ONEDNN_VERBOSE"
SETTINGS = ("ALL", "AVX2")
"""The two ``ONEDNN_MAX_CPU_ISA`` values compared: no cap, and the book's cap."""
CALLS = 11
"""Convolutions each process runs; the first also creates the primitive, so the
median leaves it out."""
INFO_MARKER = "MSRESNET_ONEDNN_TRACE "
TIMEOUT_SECONDS = 900

SNIPPETS = {
    "mindspore": textwrap.dedent(f"""
        import json
        import numpy as np
        import mindspore as ms
        from mindspore import nn
        conv = nn.Conv2d(64, 64, 3, pad_mode="same")
        x = ms.Tensor(np.random.default_rng(0).random((64, 64, 8, 8),
                                                     dtype=np.float32))
        print({INFO_MARKER!r} + json.dumps({{"version": ms.__version__}}),
              flush=True)
        for _ in range({CALLS}):
            conv(x).asnumpy()
    """),
    "pytorch": textwrap.dedent(f"""
        import json
        import torch
        conv = torch.nn.Conv2d(64, 64, 3, padding=1)
        conv.train()  # a training step's forward, as MindSpore's is
        x = torch.rand(64, 64, 8, 8, generator=torch.Generator().manual_seed(0))
        mkldnn = torch.backends.mkldnn
        print({INFO_MARKER!r} + json.dumps({{
            "version": torch.__version__,
            "mkldnn_available": mkldnn.is_available(),
            "mkldnn_enabled": mkldnn.enabled}}), flush=True)
        for _ in range({CALLS}):
            conv(x)
    """),
}
"""The convolution, as each framework's users write it (no layout options)."""


class VerboseLineError(ValueError):
    """A line that is not a oneDNN ``exec`` line of a CPU convolution."""


class TraceError(RuntimeError):
    """The traced process failed, or printed no convolution line."""


@dataclass(frozen=True)
class ConvolutionCall:
    """One executed convolution, as oneDNN's verbose line describes it."""

    implementation: str        # e.g. x64:gemm:jit, jit_uni_ncsp:conv+ref:any
    src: str                   # memory layouts (format tags), e.g. abcd, aBcd8b
    wei: str
    dst: str
    chosen_by_onednn: tuple[str, ...]  # tensors the caller gave as format "any"
    problem: str               # mb64_ic64oc64_ih8oh8kh3...
    milliseconds: float

    @property
    def layouts(self) -> str:
        """``src/wei/dst``, the table's column."""
        return f"{self.src}/{self.wei}/{self.dst}"


def _exec_index(fields: Sequence[str]) -> int | None:
    """Where the ``exec`` marker is in a oneDNN verbose line's fields (None: not
    a verbose ``exec`` line)."""
    if fields[0] != "onednn_verbose" or "exec" not in fields:
        return None
    return fields.index("exec")


def _is_cpu_convolution(fields: Sequence[str], at: int) -> bool:
    """Whether the primitive after the ``exec`` marker at ``at`` is a CPU convolution."""
    return (len(fields) > at + 2 and fields[at + 1].startswith("cpu")
            and fields[at + 2] == "convolution")


def _descriptors(field: str, line: str) -> dict[str, list[str]]:
    """``src:f32::blocked:abcd::f0 wei:...`` -> {"src": [f32, "", blocked, abcd,
    ...]}: each tensor's data type, properties, format kind and tag."""
    found = {}
    for item in field.split():
        name, *parts = item.split(":")
        found[name] = parts
    missing = [name for name in ("src", "wei", "dst")
               if len(found.get(name, [])) < 4]
    if missing:
        raise VerboseLineError(f"no layout of {', '.join(missing)} in the memory "
                               f"descriptors {field!r} of: {line}")
    return found


def parse_line(line: str) -> ConvolutionCall:
    """Read one ``onednn_verbose,...,exec,cpu,convolution,...`` line.

    The fields are located from the ``exec`` marker and from the end, so the
    line may come with or without the ``v1,primitive`` fields of oneDNN 3.x or
    a timestamp. Anything else raises :class:`VerboseLineError` naming the line:
    a silent wrong reading would turn the page's diagnosis into a guess."""
    fields = line.strip().split(",")
    at = _exec_index(fields)
    if at is None:
        raise VerboseLineError(f"not a oneDNN verbose exec line: {line!r}")
    if len(fields) < at + 8 or not _is_cpu_convolution(fields, at):
        raise VerboseLineError(f"not a CPU convolution line: {line!r}")
    memory = _descriptors(fields[at + 5], line)
    try:
        milliseconds = float(fields[-1])
    except ValueError:
        raise VerboseLineError(f"no time in milliseconds at the end of: {line!r}") \
            from None
    return ConvolutionCall(
        implementation=fields[at + 3],
        src=memory["src"][3], wei=memory["wei"][3], dst=memory["dst"][3],
        chosen_by_onednn=tuple(name for name, parts in memory.items()
                               if "a" in parts[1]),
        problem=fields[-2], milliseconds=milliseconds)


def is_convolution_line(line: str) -> bool:
    """Whether ``line`` is one :func:`parse_line` reads (others are skipped):
    the same two checks, without the error."""
    fields = line.strip().split(",")
    at = _exec_index(fields)
    return at is not None and _is_cpu_convolution(fields, at)


@dataclass(frozen=True)
class Trace:
    """One process's convolutions under one ``ONEDNN_MAX_CPU_ISA`` setting."""

    framework: str
    setting: str               # the ONEDNN_MAX_CPU_ISA value
    isa: str                   # what oneDNN says it uses, e.g. "Intel AVX2"
    onednn: str                # oneDNN's version line
    info: dict[str, Any]       # the framework's version (and PyTorch's mkldnn)
    calls: tuple[ConvolutionCall, ...]
    raw_lines: tuple[str, ...]  # every onednn_verbose line, reorders included

    @property
    def implementation(self) -> str:
        """The implementation(s) of the calls after the first."""
        names = dict.fromkeys(call.implementation for call in self.steady())
        return " | ".join(names)

    @property
    def layouts(self) -> str:
        return " | ".join(dict.fromkeys(call.layouts for call in self.steady()))

    @property
    def median_ms(self) -> float:
        return statistics.median(call.milliseconds for call in self.steady())

    def steady(self) -> tuple[ConvolutionCall, ...]:
        """The calls that reuse the primitive (all but the first, if more)."""
        return self.calls[1:] if len(self.calls) > 1 else self.calls


def trace_from_output(framework: str, setting: str, stdout: str) -> Trace:
    """A :class:`Trace` from what a traced process printed."""
    raw = tuple(line for line in stdout.splitlines()
                if line.startswith("onednn_verbose,"))
    calls = tuple(parse_line(line) for line in raw if is_convolution_line(line))
    if not calls:
        raise TraceError(f"{framework}, {ISA_VARIABLE}={setting}: no oneDNN "
                         "convolution line in the output (is this framework's "
                         "oneDNN built with verbose mode?)")
    info_lines = [line[len(INFO_MARKER):] for line in stdout.splitlines()
                  if line.startswith(INFO_MARKER)]
    isa = [line.split(",isa:", 1)[1] for line in raw if ",info,cpu,isa:" in line]
    version = [line.split(",info,", 1)[1] for line in raw
               if ",info,oneDNN" in line]
    return Trace(framework, setting, isa[0] if isa else "?",
                 version[0] if version else "?",
                 json.loads(info_lines[0]) if info_lines else {}, calls, raw)


def trace(framework: str, setting: str, python: str | os.PathLike[str] | None = None
          ) -> Trace:
    """Run :data:`SNIPPETS` ``[framework]`` with ``ONEDNN_MAX_CPU_ISA=setting``
    and ``ONEDNN_VERBOSE=1`` in a new process of ``python`` (default: this
    interpreter), and read its verbose lines.

    A new process each time: oneDNN reads both variables once, when the first
    primitive is created, so they cannot be changed in a running process."""
    if framework not in SNIPPETS:
        raise ValueError(f"framework {framework!r}: one of {sorted(SNIPPETS)}")
    env = {**os.environ, ISA_VARIABLE: setting, VERBOSE_VARIABLE: "1"}
    command = [str(python or sys.executable), "-c", SNIPPETS[framework]]
    run = subprocess.run(command, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT_SECONDS)
    if run.returncode != 0:
        raise TraceError(f"{framework}, {ISA_VARIABLE}={setting}: {command[0]} "
                         f"exited with {run.returncode}:\n{run.stderr[-2000:]}")
    return trace_from_output(framework, setting, run.stdout)


def table(rows: Iterable[tuple[str, Trace]]) -> str:
    """The traces as a text table, one row each: the row's label (e.g. the
    framework), the setting (``cap``), the implementation, the src/wei/dst
    layouts and the median milliseconds of the calls after the first (``ms``).

    The columns are as wide as their widest entry, so the table stays within
    80 columns for the names oneDNN uses (a test checks the long ones)."""
    header = ("", "cap", "implementation", "src/wei/dst", "ms")
    body = [(label, t.setting, t.implementation, t.layouts, f"{t.median_ms:.1f}")
            for label, t in rows]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(5)]
    lines = []
    for row in [header, *body]:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths)]
        lines.append("  ".join([*cells, row[4].rjust(widths[4])]).rstrip())
    return "\n".join(lines)


def record(traces: Sequence[Trace], command: str, python: str,
           today: str | None = None) -> dict[str, Any]:
    """The JSON record of some traces: when, where, what ran, what oneDNN did."""
    return {
        "date": today or time.strftime("%Y-%m-%d"),
        "cpu": cpu_model(),
        "command": command,
        "python": python,
        "snippet": SNIPPETS[traces[0].framework],
        "traces": [{**{k: v for k, v in asdict(t).items()
                       if k not in ("calls", "raw_lines")},
                    "implementation": t.implementation,
                    "median_ms": round(t.median_ms, 4),
                    "calls": [{**asdict(call), "chosen_by_onednn":
                               list(call.chosen_by_onednn)} for call in t.calls],
                    "raw_lines": list(t.raw_lines)} for t in traces],
    }


def write_record(path: str | os.PathLike[str], framework: str, command: str,
                 python: str | os.PathLike[str] | None = None,
                 settings: Sequence[str] = SETTINGS) -> dict[str, Any]:
    """Trace ``framework`` under each setting and write the record to ``path``
    (``command`` is how it was made, stored in the record)."""
    python = str(python or sys.executable)
    traces = [trace(framework, setting, python) for setting in settings]
    data = record(traces, command, python)
    write_json(path, data)
    return data


def load_record(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[Trace]]:
    """A record written by :func:`write_record`: its fields, and its traces
    rebuilt from the raw lines (so a reader's parser reads them again)."""
    data = json.loads(Path(path).read_text())
    traces = [trace_from_output(t["framework"], t["setting"], "\n".join(
        [INFO_MARKER + json.dumps(t["info"]), *t["raw_lines"]]))
        for t in data["traces"]]
    return data, traces

