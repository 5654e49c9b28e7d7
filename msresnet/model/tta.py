"""Horizontal-flip test-time augmentation (TTA): score an image and its mirror.

Training flips images at random (:mod:`msresnet.data.pipeline`), so the network has
learnt that a mirrored CIFAR-10 image shows the same class; averaging its logits
for both views at evaluation removes some of the left/right noise of a single view,
at twice the evaluation cost. Whether it pays for the book's budgeted recipe is
measured in ``results/budget/ablation`` (chapter 10), not assumed.
"""

from __future__ import annotations

from mindspore import nn, ops


class FlipAverage(nn.Cell):
    """``(net(x) + net(flip(x))) / 2`` on NCHW batches (flip: the width axis).

    Built with ``auto_prefix=False``, so the parameters keep the wrapped network's
    names and a checkpoint loads into either (as ``nn.WithLossCell`` does).
    Averaging logits rather than probabilities keeps the output a logit, which the
    loss metric expects; the argmax of the two rarely differs.
    """

    def __init__(self, net: nn.Cell) -> None:
        super().__init__(auto_prefix=False)
        self.net = net

    def construct(self, x):
        return (self.net(x) + self.net(ops.flip(x, (3,)))) / 2
