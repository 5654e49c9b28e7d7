"""ResNet50's shape as numbers (and its siblings' block counts), without MindSpore:
what :mod:`msresnet.model.resnet` builds and what a twin of the network in another
framework must build too.

``scripts/gpu/twin.py`` (the PyTorch twin of a profile) reads these instead of
keeping its own copy, so the two networks cannot drift apart.
"""

from __future__ import annotations

STEMS = ("imagenet", "cifar")
"""Valid values of ``stem``: ImageNet's 7x7/2 conv + 3x3/2 max-pool, or CIFAR's 3x3/1 conv."""
DATA_FORMATS = ("NCHW", "NHWC")
"""Activation layouts: NCHW everywhere, NHWC on MindSpore's GPU back end."""

# (name, bottleneck blocks, width of the 3x3 conv, output channels, stride of the first block)
STAGES: tuple[tuple[str, int, int, int, int], ...] = (
    ("layer1", 3, 64, 256, 1),
    ("layer2", 4, 128, 512, 2),
    ("layer3", 6, 256, 1024, 2),
    ("layer4", 3, 512, 2048, 2),
)
DEPTHS: dict[int, tuple[int, ...]] = {
    14: (1, 1, 1, 1), 26: (2, 2, 2, 2), 50: tuple(blocks for _, blocks, *_ in STAGES),
    101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
"""Bottleneck blocks per stage of each depth (3 layers a block, plus the stem's convolution
and the classifier). 50 is the book's network (the counts in :data:`STAGES`); 101 and 152
are the deeper ones of the same family; 14 and 26 keep every stage, shape and parameter
kind with one or two blocks a stage, so a test of the mechanics (resume, sweeps, jobs)
compiles and trains in a fraction of ResNet50's time."""
EXPANSION = 4
"""A bottleneck's output has 4x the channels of its 3x3 convolution."""
STEM_CHANNELS = 64
"""Channels out of the stem's convolution."""

NO_DECAY_NAMES = frozenset({"beta", "gamma", "bias"})
"""Parameter leaf names kept out of weight decay (BatchNorm shift/scale, biases)."""

BN_EPS = 1e-4        # models repo _bn(): eps=1e-4 (MindSpore's default is 1e-5)
BN_MOMENTUM = 0.9    # MindSpore convention: running = 0.9 * running + 0.1 * batch
CLASSIFIER_SIGMA = 0.01
"""Standard deviation of the classifier's initial weights (zoo's ``TruncatedNormal()``)."""
