"""Count the multiply-accumulates (MACs) a network spends per image.

Quoted FLOP figures hide their assumptions (input size, stem, whether a
multiply-add is one operation or two). Here they are computed from the network
itself: one PyNative forward pass with a hook on every leaf cell records the
real input and output shapes, and each convolution and dense layer contributes

* ``Conv2d``: ``H_out * W_out * C_out * (C_in / groups) * k_h * k_w`` MACs,
* ``Dense``: ``in_features * out_features`` MACs,
* ``BatchNorm2d`` (only with ``include_batchnorm=True``): one MAC per output
  element (at inference it is a per-channel scale and shift).

ReLU, the residual additions and pooling are not counted: they are element-wise
and together well under 1 % of ResNet50's work. One MAC is one multiply and one
add, so "FLOPs" in the 2-ops-per-MAC sense are twice these numbers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

import mindspore
from mindspore import nn


@dataclass(frozen=True)
class CellRecord:
    """One leaf (or watched) cell as it ran: its name in the network and its tensor shapes."""

    name: str
    kind: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    macs: int


@dataclass
class MacReport:
    """MACs per image, in total and broken down by layer type and by top-level stage."""

    image_size: int
    total: int
    by_kind: dict[str, int] = field(default_factory=dict)
    by_stage: dict[str, int] = field(default_factory=dict)
    records: list[CellRecord] = field(default_factory=list)


@contextlib.contextmanager
def pynative_mode() -> Iterator[None]:
    """Run the body in PyNative mode (hooks need it), then restore the previous mode."""
    previous = mindspore.get_context("mode")
    if previous != mindspore.PYNATIVE_MODE:
        mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    try:
        yield
    finally:
        if previous != mindspore.PYNATIVE_MODE:
            mindspore.set_context(mode=previous)


def cell_macs(cell: nn.Cell, output_shape: tuple[int, ...], include_batchnorm: bool = False) -> int:
    """MACs of one cell for ONE image, given its output shape (batch first)."""
    if isinstance(cell, nn.Conv2d):
        _, c_out, h_out, w_out = output_shape
        k_h, k_w = cell.kernel_size
        return h_out * w_out * c_out * (cell.in_channels // cell.group) * k_h * k_w
    if isinstance(cell, nn.Dense):
        return int(cell.in_channels) * int(cell.out_channels)
    if include_batchnorm and isinstance(cell, nn.BatchNorm2d):
        return int(np.prod(output_shape[1:]))
    return 0


def _shape(value) -> tuple[int, ...]:
    if isinstance(value, (tuple, list)):
        value = value[0]
    return tuple(int(d) for d in value.shape)


def trace_cells(net: nn.Cell, image_size: int, batch_size: int = 1, channels: int = 3,
                include_batchnorm: bool = False, watch: tuple[str, ...] | None = None
                ) -> list[CellRecord]:
    """Run ``net`` once on zeros in PyNative mode and record every leaf cell it calls.

    ``watch`` adds non-leaf cells by name (default: the network's direct
    children, e.g. ``layer1``), so stage outputs are recorded too. Records come
    in execution order. The network is put in inference mode for the pass and
    its training flag is restored afterwards (BatchNorm statistics are untouched).
    """
    cells = dict(net.cells_and_names())
    if watch is None:
        watch = tuple(name for name, _ in net.name_cells().items())
    records: list[CellRecord] = []
    handles = []

    def make_hook(name: str):
        def hook(cell, inputs, output):
            out_shape = _shape(output)
            records.append(CellRecord(
                name=name, kind=type(cell).__name__,
                input_shape=_shape(inputs[0]) if inputs else (),
                output_shape=out_shape,
                macs=cell_macs(cell, out_shape, include_batchnorm)))
        return hook

    for name, cell in cells.items():
        if not name:
            continue
        is_leaf = not cell.name_cells()
        if is_leaf or name in watch:
            handles.append(cell.register_forward_hook(make_hook(name)))
    was_training = net.training
    try:
        net.set_train(False)
        x = mindspore.Tensor(np.zeros((batch_size, channels, image_size, image_size), np.float32))
        with pynative_mode():
            net(x)
    finally:
        for handle in handles:
            handle.remove()
        net.set_train(was_training)
    return records


def count_macs(net: nn.Cell, image_size: int, include_batchnorm: bool = False) -> MacReport:
    """MACs per image of ``net`` at ``image_size`` x ``image_size``, from a traced forward pass."""
    leaf = [r for r in trace_cells(net, image_size, include_batchnorm=include_batchnorm) if r.macs]
    report = MacReport(image_size=image_size, total=sum(r.macs for r in leaf), records=leaf)
    for r in leaf:
        report.by_kind[r.kind] = report.by_kind.get(r.kind, 0) + r.macs
        stage = r.name.split(".", 1)[0]
        report.by_stage[stage] = report.by_stage.get(stage, 0) + r.macs
    return report
