"""ResNet50 v1.5 for CIFAR-10, built the way MindSpore's model zoo builds it.

The reference is ``official/cv/ResNet/src/resnet.py`` in
https://github.com/mindspore-ai/models (``resnet50()``: ``ResidualBlock`` with
``[3, 4, 6, 3]`` blocks) together with ``src/util.py`` (``init_weight`` and
``init_group_params``), which ``train.py`` applies to the network. We follow it in:

* architecture: bottleneck blocks with the stride on the 3x3 convolution (the
  "v1.5" variant), a 1x1 convolution + BatchNorm projection shortcut where the
  shape changes, ``pad_mode="same"`` convolutions without bias, global average
  pooling, one ``Dense`` classifier called ``end_point``;
* initialisation as the CIFAR-10 and ImageNet configs select it
  (``conv_init: XavierUniform``, ``dense_init: TruncatedNormal``): Xavier-uniform
  convolution weights, ``TruncatedNormal()`` (sigma 0.01) classifier weights, zero
  classifier bias, BatchNorm ``gamma=1, beta=0, eps=1e-4, momentum=0.9``, except
  the last BatchNorm of each residual branch, which starts at ``gamma=0``
  (``_bn_last``: each block starts as the identity) as in MindSpore 1.x's
  ``model_zoo/official/cv/resnet`` that the seed recipe used; the models repo today
  (``official/cv/ResNet/src/resnet.py`` at commit e60768e) keeps ``gamma=1`` there
  except for the THOR optimizer and ResNet152, so ``zero_init_residual=False``
  (the config key of the same name) builds that version. (In
  MindSpore 2.x ``TruncatedNormal`` cuts at the absolute bounds ``a=-2, b=2``, not
  at 2 sigma, so with sigma 0.01 it is a plain normal in practice; we keep the
  zoo's call as it is);
* parameter names (``conv1``, ``bn1``, ``layer1`` .. ``layer4``, ``conv1..3`` /
  ``bn1..3`` inside a block, ``down_sample_layer``, ``end_point``), so checkpoints
  read naturally and line up with the zoo's;
* weight-decay groups (:func:`param_groups`): no decay for parameters whose
  name contains ``beta``, ``gamma`` or ``bias``.

Where we differ:

* the zoo first fills weights with NumPy Kaiming draws and then overwrites them
  (``init_weight``); we pass MindSpore initializers to the layers directly, so
  the weights depend only on ``mindspore.set_seed`` and not on NumPy's global
  random state;
* ``stem="cifar"`` is ours: a 3x3 stride-1 convolution and no max-pool, the
  usual CIFAR adaptation, so 32x32 images keep 32x32 feature maps in ``layer1``
  (the zoo's CIFAR-10 config instead resizes images to 224x224 and keeps the
  ImageNet stem, which is ``stem="imagenet"`` here);
* :func:`param_groups` matches the last component of each parameter name
  (``end_point.bias``) rather than any substring, which is the same split for
  this network but cannot catch an unrelated name that merely contains "beta".
"""

from __future__ import annotations

from collections.abc import Iterable

import mindspore
from mindspore import Parameter, nn, ops
from mindspore.common.initializer import TruncatedNormal, XavierUniform, initializer

from msresnet.data.cifar10 import NUM_CLASSES
# The network's numbers live in a MindSpore-free module, shared with the PyTorch twin.
from msresnet.model.architecture import (  # noqa: F401 - STEMS, STAGES ... re-exported
    BN_EPS, BN_MOMENTUM, CLASSIFIER_SIGMA, DATA_FORMATS, DEPTHS, EXPANSION, NO_DECAY_NAMES,
    STAGES, STEM_CHANNELS, STEMS)


class ConvNHWC(nn.Cell):
    """``nn.Conv2d`` for NHWC activations whose weight keeps NCHW's layout and name.

    MindSpore's own ``nn.Conv2d(data_format="NHWC")`` stores its weight as
    (out, kh, kw, in), so a checkpoint trained in NHWC would not load into the NCHW
    network that a CPU, an export or a sweep builds. This cell stores (out, in, kh,
    kw), drawn by the same initializer from the same seed, and hands the convolution
    a transposed view each step (23.5 M values, small beside the activations).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int,
                 stride: int = 1) -> None:
        super().__init__()
        shape = (out_channels, in_channels, kernel_size, kernel_size)
        self.weight = Parameter(initializer(XavierUniform(), shape, mindspore.float32),
                                name="weight")
        self.conv = ops.Conv2D(out_channels, kernel_size, pad_mode="same", stride=stride,
                               data_format="NHWC")

    def construct(self, x):
        # Mixed precision casts a cell's parameters where a primitive takes them
        # directly; this one reaches Conv2D through a transpose, so cast it here.
        weight = ops.cast(self.weight, x.dtype)
        return self.conv(x, ops.transpose(weight, (0, 2, 3, 1)))


def _conv(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
          data_format: str = "NCHW") -> nn.Cell:
    """Bias-free ``same``-padded convolution with Xavier-uniform weights (zoo's conv_init)."""
    if data_format == "NHWC":
        return ConvNHWC(in_channels, out_channels, kernel_size, stride)
    return nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                     pad_mode="same", has_bias=False, weight_init=XavierUniform())


def _bn(channels: int, momentum: float = BN_MOMENTUM, data_format: str = "NCHW",
        gamma: str = "ones") -> nn.BatchNorm2d:
    kwargs = {"data_format": data_format} if data_format != "NCHW" else {}
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=momentum, gamma_init=gamma,
                          beta_init="zeros", moving_mean_init="zeros", moving_var_init="ones",
                          **kwargs)


def _bn_last(channels: int, momentum: float = BN_MOMENTUM,
             data_format: str = "NCHW") -> nn.BatchNorm2d:
    """The last BatchNorm of a residual branch starts at ``gamma=0`` (zoo's ``_bn_last``).

    Every block then starts as the identity, so the residual stream does not grow
    with depth at initialisation; without it ResNet50 at lr 0.05-0.1 blows up in
    the first steps (loss 2.4 -> 10 -> 25 measured here), which is the "zero-init
    residual" of Goyal et al. (2017).
    """
    return _bn(channels, momentum, data_format, gamma="zeros")


def _fc(in_channels: int, out_channels: int) -> nn.Dense:
    """Classifier with ``TruncatedNormal(sigma=0.01)`` weights and zero bias (zoo's dense_init)."""
    return nn.Dense(in_channels, out_channels, weight_init=TruncatedNormal(sigma=CLASSIFIER_SIGMA),
                    bias_init="zeros", has_bias=True)


class Bottleneck(nn.Cell):
    """1x1 reduce -> 3x3 (carries the stride) -> 1x1 expand x4, and the shortcut.

    The shortcut is the identity when shape is unchanged, else a strided 1x1
    convolution + BatchNorm (``down_sample_layer``), as in the zoo's
    ``ResidualBlock``.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1,
                 zero_init_residual: bool = True,
                 bn_momentum: float = BN_MOMENTUM,
                 data_format: str = "NCHW") -> None:
        super().__init__()
        width, f = out_channels // EXPANSION, data_format
        self.conv1 = _conv(in_channels, width, 1, data_format=f)
        self.bn1 = _bn(width, bn_momentum, f)
        self.conv2 = _conv(width, width, 3, stride=stride, data_format=f)
        self.bn2 = _bn(width, bn_momentum, f)
        self.conv3 = _conv(width, out_channels, 1, data_format=f)
        last = _bn_last if zero_init_residual else _bn
        self.bn3 = last(out_channels, bn_momentum, f)
        self.relu = nn.ReLU()
        self.down_sample = stride != 1 or in_channels != out_channels
        if self.down_sample:
            self.down_sample_layer = nn.SequentialCell([
                _conv(in_channels, out_channels, 1, stride, data_format=f),
                _bn(out_channels, bn_momentum, f)])
        else:
            self.down_sample_layer = nn.Identity()

    def construct(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.down_sample_layer(x))


class ResNet50(nn.Cell):
    """ResNet50 v1.5: stem, four bottleneck stages ``[3, 4, 6, 3]``, average pool, ``end_point``.

    Another ``depth`` (a key of :data:`DEPTHS`) changes only the blocks per stage.
    """

    def __init__(self, num_classes: int = NUM_CLASSES, stem: str = "imagenet",
                 zero_init_residual: bool = True, bn_momentum: float = BN_MOMENTUM,
                 data_format: str = "NCHW", depth: int = 50) -> None:
        super().__init__()
        if depth not in DEPTHS:
            raise ValueError(f"depth must be one of {', '.join(map(str, DEPTHS))}; got {depth!r}")
        if data_format not in DATA_FORMATS:
            raise ValueError(f"data_format must be one of {DATA_FORMATS}; got {data_format!r}")
        self.nhwc = data_format == "NHWC"
        f = data_format
        if stem not in STEMS:
            raise ValueError(f"stem must be one of {', '.join(map(repr, STEMS))}; got {stem!r}")
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"num_classes must be a positive integer; got {num_classes!r}")
        self.stem = stem
        self.num_classes = num_classes
        if stem == "imagenet":
            self.conv1 = _conv(3, STEM_CHANNELS, 7, stride=2, data_format=f)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="same",
                                        **({"data_format": f} if self.nhwc else {}))
        else:
            self.conv1 = _conv(3, STEM_CHANNELS, 3, stride=1, data_format=f)
            self.maxpool = nn.Identity()
        self.bn1 = _bn(STEM_CHANNELS, bn_momentum, f)
        self.relu = nn.ReLU()
        in_channels = STEM_CHANNELS
        for (name, _, _width, out_channels, stride), blocks in zip(STAGES, DEPTHS[depth]):
            layer = [Bottleneck(in_channels, out_channels, stride, zero_init_residual,
                                bn_momentum, f)]
            layer += [Bottleneck(out_channels, out_channels, 1, zero_init_residual, bn_momentum,
                                 f) for _ in range(blocks - 1)]
            setattr(self, name, nn.SequentialCell(layer))
            in_channels = out_channels
        self.flatten = nn.Flatten()
        self.end_point = _fc(in_channels, num_classes)

    def construct(self, x):
        if self.nhwc:  # the pipeline hands NCHW batches; one transpose of the input
            x = ops.transpose(x, (0, 2, 3, 1))
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = ops.mean(x, (1, 2) if self.nhwc else (2, 3), keep_dims=True)
        return self.end_point(self.flatten(x))


def resnet50(num_classes: int = NUM_CLASSES, stem: str = "imagenet",
             zero_init_residual: bool = True, bn_momentum: float = BN_MOMENTUM,
             data_format: str = "NCHW", depth: int = 50) -> nn.Cell:
    """Build ResNet50 v1.5; ``stem`` is ``"imagenet"`` (for 224x224 input) or ``"cifar"`` (32x32).

    ``zero_init_residual``: the last BatchNorm of each residual branch starts at
    ``gamma=0`` (MindSpore 1.x model_zoo, the seed's) or, if False, at 1 (the models
    repo's ResNet50 with Momentum today). Only the initial values differ: the
    parameters, their names and a checkpoint's layout are the same. ``bn_momentum``
    is every BatchNorm's ``momentum`` in MindSpore's meaning (``running = m * running
    + (1 - m) * batch``; PyTorch's ``momentum`` is ``1 - m``); it changes only how
    fast the moving statistics follow the batches, not the layout either.
    ``data_format`` ``"NHWC"`` (GPU only) runs convolutions and BatchNorm channels-last;
    the parameters, their names and shapes are NCHW's (:class:`ConvNHWC`), so the
    checkpoints of both load into either. ``depth`` (a key of :data:`DEPTHS`) builds a
    sibling with other block counts per stage, the same names for the blocks it has.
    Raises ``ValueError`` naming the bad value for an unknown stem, format or depth.
    """
    return ResNet50(num_classes=num_classes, stem=stem, zero_init_residual=zero_init_residual,
                    bn_momentum=bn_momentum, data_format=data_format, depth=depth)


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def param_groups(net: nn.Cell, weight_decay: float) -> list[dict]:
    """Optimizer groups: decay conv/dense weights, not BatchNorm ``gamma``/``beta`` or biases.

    Decaying BatchNorm scale/shift and biases only pulls them towards zero without
    regularising anything (BatchNorm makes the following layer scale-invariant),
    so the zoo's ``init_group_params`` leaves them out. The last entry,
    ``order_params``, tells the optimizer to keep the network's parameter order,
    so optimizer state and checkpoints list parameters in the same order as the net.
    """
    params = list(net.trainable_params())
    decay = [p for p in params if _leaf(p.name) not in NO_DECAY_NAMES]
    no_decay = [p for p in params if _leaf(p.name) in NO_DECAY_NAMES]
    return [{"params": decay, "weight_decay": float(weight_decay)},
            {"params": no_decay, "weight_decay": 0.0},
            {"order_params": params}]


def count_parameters(net: nn.Cell, trainable_only: bool = True) -> int:
    """Number of scalars in the network's parameters.

    By default only trainable ones (what "23.5 M parameters" means); BatchNorm's
    running mean and variance are buffers the optimizer never touches, counted
    only with ``trainable_only=False``.
    """
    params: Iterable[mindspore.Parameter] = (
        net.trainable_params() if trainable_only else net.get_parameters())
    total = 0
    for p in params:
        size = 1
        for dim in p.shape:
            size *= int(dim)
        total += size
    return total


def stage_shapes(net: nn.Cell, image_size: int, batch_size: int = 1) -> dict[str, tuple[int, ...]]:
    """Output shape of the stem, each stage and the classifier for one forward pass.

    Runs the network once in PyNative mode on zeros (see
    :func:`msresnet.model.flops.trace_cells`), so the shapes are MindSpore's, not ours.
    Keys: ``input``, ``conv1``, ``maxpool``, ``layer1`` .. ``layer4``, ``end_point``.
    """
    from msresnet.model.flops import trace_cells

    records = trace_cells(net, image_size, batch_size=batch_size)
    wanted = ("conv1", "maxpool", "layer1", "layer2", "layer3", "layer4", "end_point")
    shapes: dict[str, tuple[int, ...]] = {"input": (batch_size, 3, image_size, image_size)}
    for record in records:
        if record.name in wanted:
            shapes[record.name] = record.output_shape
    return shapes
