"""Process-wide changes a lever of ``scripts/gpu/levers.py`` can ask for with a
``+name`` item, for experiments that no profile key covers yet.

* ``+no_format_transform``: ``disable_format_transform`` in MindSpore's context, so
  the GPU backend keeps float16 convolutions and BatchNorm in NCHW instead of moving
  them to NHWC, where it fuses BatchNorm with the ReLU (and the residual add) after it.
* ``+relu_max``: every ``nn.ReLU`` computes ``maximum(x, 0)``, the same function
  through another operator, which the backend's BatchNorm+ReLU fusions do not match.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops


class MaximumReLU(nn.Cell):
    """ReLU as ``maximum(x, 0)``: equal values, no ``ReLU`` node to fuse."""

    def construct(self, x):
        return ops.maximum(x, ops.zeros_like(x))


def apply(patches: list[str]) -> None:
    """Apply the named patches (their names without the ``+``)."""
    unknown = set(patches) - {"no_format_transform", "relu_max"}
    if unknown:
        raise ValueError(f"unknown lever patch(es): {', '.join(sorted(unknown))}")
    if "no_format_transform" in patches:
        ms.set_context(disable_format_transform=True)
    if "relu_max" in patches:
        nn.ReLU = MaximumReLU  # msresnet.model.resnet builds nn.ReLU() at call time
