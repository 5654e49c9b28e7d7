"""oneDNN's verbose lines, read by ``msresnet.experiments.onednn_trace``.

The troubleshooting page's diagnosis of the slow AVX-512 path (issue 30) rests
on this parser: which implementation oneDNN ran and with which layouts. It is
checked on a line recorded on the book's hosts, on the AVX-512 reference-kernel
line the page explains, on PyTorch's blocked layouts, on lines it must refuse,
and (slow) on a real trace of MindSpore in a fresh process.
"""

from __future__ import annotations

import json
import sys

import pytest

from msresnet.experiments import onednn_trace
from msresnet.experiments.onednn_trace import (ConvolutionCall, Trace, TraceError,
                                               VerboseLineError, parse_line)
from msresnet.paths import REPO_ROOT

PROBLEM = "mb64_ic64oc64_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1"
PLAIN = ("src:f32::blocked:abcd::f0 wei:f32::blocked:abcd::f0 bia:undef::undef::: "
         "dst:f32::blocked:abcd::f0")
GEMM = ("onednn_verbose,v1,primitive,exec,cpu,convolution,x64:gemm:jit,forward_training,"
        f"{PLAIN},,alg:convolution_direct,{PROBLEM},7.05298")
REFERENCE = ("onednn_verbose,v1,primitive,exec,cpu,convolution,jit_uni_ncsp:conv+ref:any,"
             f"forward_training,{PLAIN},,alg:convolution_direct,{PROBLEM},512.3")
PYTORCH = ("onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,forward_training,"
           "src:f32:a:blocked:aBcd8b::f0 wei:f32:a:blocked:ABcd8b8a::f0 "
           "bia:f32:a:blocked:a::f0 dst:f32:a:blocked:aBcd8b::f0,attr-scratchpad:user,"
           f"alg:convolution_direct,{PROBLEM},13.6899")
REORDER = ("onednn_verbose,v1,primitive,exec,cpu,reorder,jit:blk,undef,"
           "src:f32::blocked:abcd::f0 dst:f32::blocked:aBcd8b::f0,attr-scratchpad:user,,"
           "64x64x8x8,12.145")
HEADER = ["onednn_verbose,v1,info,oneDNN v3.10.1 (commit N/A)",
          "onednn_verbose,v1,info,cpu,isa:Intel AVX2"]


def test_a_real_line_of_mindspore() -> None:
    call = parse_line(GEMM)
    assert call == ConvolutionCall(implementation="x64:gemm:jit", src="abcd", wei="abcd",
                                   dst="abcd", chosen_by_onednn=(), problem=PROBLEM,
                                   milliseconds=7.05298)
    assert call.layouts == "abcd/abcd/abcd"


def test_the_avx512_reference_kernel_line() -> None:
    call = parse_line(REFERENCE + "\n")
    assert call.implementation == "jit_uni_ncsp:conv+ref:any"
    assert "ref" in call.implementation and call.layouts == "abcd/abcd/abcd"
    assert call.milliseconds == 512.3 and not call.chosen_by_onednn


def test_pytorch_lets_onednn_choose_blocked_layouts() -> None:
    call = parse_line(PYTORCH)
    assert (call.implementation, call.layouts) == ("jit:avx2", "aBcd8b/ABcd8b8a/aBcd8b")
    assert call.chosen_by_onednn == ("src", "wei", "bia", "dst")


def test_older_and_timestamped_lines_are_read_from_the_exec_marker() -> None:
    old = GEMM.replace("onednn_verbose,v1,primitive,exec", "onednn_verbose,exec")
    stamped = GEMM.replace(",v1,", ",v1,1764662400123.5,")
    assert parse_line(old) == parse_line(stamped) == parse_line(GEMM)


@pytest.mark.parametrize(("line", "says"), [
    ("dnnl_verbose,exec,cpu,convolution", "not a oneDNN verbose exec line"),
    (HEADER[1], "not a oneDNN verbose exec line"),
    (REORDER, "not a CPU convolution line"),
    (GEMM.replace(" wei:f32::blocked:abcd::f0", ""), "no layout of wei"),
    (GEMM.replace("7.05298", "fast"), "no time in milliseconds"),
])
def test_a_bad_line_is_named_in_a_clear_error(line: str, says: str) -> None:
    with pytest.raises(VerboseLineError, match=says) as caught:
        parse_line(line)
    assert line[:20] in str(caught.value)


def test_a_trace_keeps_every_line_and_reads_the_convolutions() -> None:
    stdout = "\n".join([*HEADER, onednn_trace.INFO_MARKER + '{"version": "2.10.0"}',
                        "a warning of the framework", GEMM.replace("7.05298", "55.5"),
                        REORDER, GEMM, GEMM.replace("7.05298", "6.5")])
    trace = onednn_trace.trace_from_output("mindspore", "AVX2", stdout)
    assert (trace.isa, trace.onednn) == ("Intel AVX2", "oneDNN v3.10.1 (commit N/A)")
    assert trace.info == {"version": "2.10.0"} and len(trace.raw_lines) == 6
    assert len(trace.calls) == 3 and trace.implementation == "x64:gemm:jit"
    assert trace.median_ms == pytest.approx((7.05298 + 6.5) / 2)  # the first is left out
    with pytest.raises(TraceError, match="no oneDNN convolution line"):
        onednn_trace.trace_from_output("mindspore", "ALL", "\n".join([*HEADER, REORDER]))


def _trace(line: str, setting: str, framework: str = "mindspore") -> Trace:
    return onednn_trace.trace_from_output(framework, setting, "\n".join([line, line]))


def test_the_table_fits_80_columns_with_the_long_names() -> None:
    avx512 = (PYTORCH.replace("jit:avx2", "brg_conv_fwd:avx512_core")
              .replace("aBcd8b", "aBcd16b").replace("ABcd8b8a", "ABcd16b16a"))
    text = onednn_trace.table([("MindSpore", _trace(REFERENCE, "ALL")),
                               ("MindSpore", _trace(GEMM, "AVX2")),
                               ("PyTorch", _trace(avx512, "ALL", "pytorch")),
                               ("PyTorch", _trace(PYTORCH, "AVX2", "pytorch"))])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    assert lines[0].split() == ["cap", "implementation", "src/wei/dst", "ms"]
    assert lines[1].split() == ["MindSpore", "ALL", "jit_uni_ncsp:conv+ref:any",
                                "abcd/abcd/abcd", "512.3"]
    assert lines[3].split()[2:4] == ["brg_conv_fwd:avx512_core", "aBcd16b/ABcd16b16a/aBcd16b"]


def test_a_record_is_read_back_as_it_was_written(tmp_path, monkeypatch) -> None:
    traces = {"ALL": _trace(GEMM, "ALL"), "AVX2": _trace(REFERENCE, "AVX2")}
    monkeypatch.setattr(onednn_trace, "trace", lambda framework, setting, python: traces[setting])
    path = tmp_path / "mindspore.json"
    data = onednn_trace.write_record(path, "mindspore", "the command", python="py")
    assert json.loads(path.read_text()) == data
    assert {"date", "cpu", "command", "python", "snippet", "traces"} <= set(data)
    assert data["traces"][1]["implementation"] == "jit_uni_ncsp:conv+ref:any"
    assert data["traces"][0]["calls"][0]["src"] == "abcd"
    again, rebuilt = onednn_trace.load_record(path)
    assert again == data and rebuilt == list(traces.values())


def test_an_unknown_framework_or_a_failing_process_is_an_error(monkeypatch) -> None:
    with pytest.raises(ValueError, match="framework 'jax'"):
        onednn_trace.trace("jax", "AVX2")
    monkeypatch.setitem(onednn_trace.SNIPPETS, "pytorch",
                        "import sys; sys.exit('No module named torch')")
    with pytest.raises(TraceError, match="exited with 1:\nNo module named torch"):
        onednn_trace.trace("pytorch", "AVX2", python=sys.executable)


def test_the_committed_records_say_what_the_page_claims() -> None:
    """``results/budget/onednn``: MindSpore's plain layouts, PyTorch's blocked ones."""
    folder = REPO_ROOT / "results" / "budget" / "onednn"
    _, mindspore = onednn_trace.load_record(folder / "mindspore.json")
    data, pytorch = onednn_trace.load_record(folder / "pytorch.json")
    assert [t.setting for t in mindspore] == [t.setting for t in pytorch] == ["ALL", "AVX2"]
    for trace in mindspore:
        assert {call.layouts for call in trace.calls} == {"abcd/abcd/abcd"}
        assert all(not call.chosen_by_onednn for call in trace.calls)
    for trace in pytorch:
        assert all("abcd" not in call.layouts.split("/") for call in trace.calls)
        assert all("src" in call.chosen_by_onednn for call in trace.calls)
    assert data["traces"][0]["info"]["version"].startswith("2.13.0")


@pytest.mark.slow
def test_a_real_trace_of_mindspore_in_a_fresh_process() -> None:
    trace = onednn_trace.trace("mindspore", "AVX2")
    assert len(trace.calls) == onednn_trace.CALLS and trace.setting == "AVX2"
    assert {call.problem for call in trace.calls} == {PROBLEM}
    assert trace.layouts == "abcd/abcd/abcd" and trace.median_ms > 0
    assert trace.isa != "?" and trace.info["version"].startswith("2.")
