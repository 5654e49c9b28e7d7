"""The book's two training losses, both written to stay finite in graph mode on the CPU.

:class:`SparseCrossEntropy` is the default; :class:`CrossEntropySmooth` is the models
repository's label-smoothed loss (``label_smoothing > 0`` in the config). Both
average over the batch here rather than in the kernel; see
:class:`SparseCrossEntropy` for why.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops


class SparseCrossEntropy(nn.LossBase):
    """Mean sparse cross-entropy, averaged here rather than by the kernel.

    In graph mode on the CPU, MindSpore 2.10's
    ``SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")`` returns ``inf``
    once a logit leads the others by about 88 (float32 ``exp`` overflow), while
    ``reduction="none"`` stays exact; see the troubleshooting page.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="none")

    def construct(self, logits, label):
        return self.ce(logits, label).mean()


class CrossEntropySmooth(nn.LossBase):
    """Cross-entropy against smoothed one-hot labels (the models repo's
    ``src/CrossEntropySmooth.py``): the true class gets ``1 - smoothing``, every other
    class ``smoothing / (num_classes - 1)``."""

    def __init__(self, num_classes: int, smoothing: float, reduction: str = "mean") -> None:
        super().__init__()
        self.num_classes = num_classes
        self.on_value = ms.Tensor(1.0 - smoothing, ms.float32)
        self.off_value = ms.Tensor(smoothing / (num_classes - 1), ms.float32)
        self.ce = nn.SoftmaxCrossEntropyWithLogits(reduction="none")

    def construct(self, logits, label):
        target = ops.one_hot(label, self.num_classes, self.on_value, self.off_value)
        return self.ce(logits, target).mean()
