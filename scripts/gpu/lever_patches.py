"""Process-wide changes a lever of ``scripts/gpu/levers.py`` can ask for with a
``+name`` item, for experiments that no profile key covers yet.

* ``+relu_max``: every ``nn.ReLU`` computes ``maximum(x, 0)``, the same function
  through another operator, which the backend's BatchNorm+ReLU fusions do not match.

The records of 2026-12-06 (``results/gpu/h100-2026-12-06-fusion/levers_fix.json``)
also name ``+no_format_transform``, MindSpore's ``disable_format_transform``. It is
no patch any more: ``msresnet.training.factories.speed_context`` sets it for every
``amp_batchnorm: float16`` run, so ``amp_batchnorm=float16`` alone is that lever now.
"""

from __future__ import annotations

from mindspore import nn, ops


class MaximumReLU(nn.Cell):
    """ReLU as ``maximum(x, 0)``: equal values, no ``ReLU`` node to fuse."""

    def construct(self, x):
        return ops.maximum(x, ops.zeros_like(x))


def apply(patches: list[str]) -> None:
    """Apply the named patches (their names without the ``+``)."""
    unknown = set(patches) - {"relu_max"}
    if unknown:
        raise ValueError(f"unknown lever patch(es): {', '.join(sorted(unknown))}")
    if "relu_max" in patches:
        nn.ReLU = MaximumReLU  # msresnet.model.resnet builds nn.ReLU() at call time
