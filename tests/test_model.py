"""ResNet50 structure, parameter groups and compute counts (msresnet.model.resnet, msresnet.model.flops)."""

from __future__ import annotations

import msresnet  # noqa: F401  (sets the fast oneDNN path before MindSpore runs anything)

import numpy as np
import pytest

import mindspore
from mindspore import nn

from msresnet.model.flops import cell_macs, count_macs
from msresnet.model.resnet import (DEPTHS, NO_DECAY_NAMES, STAGES, count_parameters, param_groups,
                                   resnet50, stage_shapes)
from msresnet.training.checkpoints import CheckpointMismatchError, check_fits

# Exact counts of trainable scalars with 10 classes. The ImageNet-stem figure is
# torchvision's resnet50 (25,557,032 with 1000 classes) minus the 1000-way
# classifier (2,049,000) plus a 10-way one (20,490); the CIFAR stem swaps the
# 7x7x3x64 stem convolution (9,408) for a 3x3x3x64 one (1,728).
PARAMS_IMAGENET_STEM = 23_528_522
PARAMS_CIFAR_STEM = 23_520_842


@pytest.fixture(scope="module")
def nets() -> dict[str, nn.Cell]:
    mindspore.set_seed(1)
    return {stem: resnet50(num_classes=10, stem=stem) for stem in ("imagenet", "cifar")}


def test_parameter_count(nets):
    counts = {stem: count_parameters(net) for stem, net in nets.items()}
    assert counts == {"imagenet": PARAMS_IMAGENET_STEM, "cifar": PARAMS_CIFAR_STEM}
    for count in counts.values():
        assert 23_400_000 <= count <= 23_600_000
    # BatchNorm running statistics are parameters too, but not trainable ones:
    # two per BatchNorm channel, 53 BatchNorms with 26,560 channels in total.
    assert count_parameters(nets["imagenet"], trainable_only=False) == PARAMS_IMAGENET_STEM + 2 * 26_560


def test_parameter_count_follows_num_classes():
    net = resnet50(num_classes=1000)
    assert count_parameters(net) == 25_557_032  # the widely quoted ResNet50 figure


def test_readable_layer_names(nets):
    names = [p.name for p in nets["imagenet"].trainable_params()]
    assert names[:3] == ["conv1.weight", "bn1.gamma", "bn1.beta"]
    assert "layer1.0.down_sample_layer.0.weight" in names
    assert "layer4.2.conv3.weight" in names
    assert names[-2:] == ["end_point.weight", "end_point.bias"]
    # identity shortcuts carry no parameters
    assert not any(n.startswith("layer1.1.down_sample_layer") for n in names)


def test_blocks_per_stage_and_stride_on_3x3(nets):
    net = nets["imagenet"]
    for name, blocks, width, out_channels, stride in STAGES:
        layer = getattr(net, name)
        assert len(layer) == blocks
        first = layer[0]
        assert first.conv1.stride[-1] == 1 and first.conv3.stride[-1] == 1
        assert first.conv2.stride[-1] == stride           # v1.5: the 3x3 conv downsamples
        assert (first.conv1.out_channels, first.conv3.out_channels) == (width, out_channels)


def test_init_follows_models_repo(nets):
    net = nets["imagenet"]
    fc = net.end_point.weight.asnumpy()
    # TruncatedNormal(sigma=0.01): MindSpore 2.x truncates at the absolute bounds +-2,
    # so at this sigma it is a plain N(0, 0.01^2) in practice.
    assert 0.009 < fc.std() < 0.011 and abs(fc.mean()) < 0.001
    assert np.abs(fc).max() < 0.07
    assert not net.end_point.bias.asnumpy().any()
    conv = net.layer3[0].conv2.weight.asnumpy()            # 256 -> 256, 3x3
    bound = np.sqrt(6.0 / (256 * 9 + 256 * 9))             # Xavier uniform
    assert np.abs(conv).max() <= bound + 1e-6
    assert np.abs(conv).max() > 0.95 * bound
    assert np.all(net.bn1.gamma.asnumpy() == 1) and not net.bn1.beta.asnumpy().any()
    assert net.bn1.eps == pytest.approx(1e-4)                # zoo's _bn(); MindSpore default is 1e-5


@pytest.mark.parametrize("depth,torchvision", [(101, 44_549_160), (152, 60_192_808)])
def test_the_deeper_siblings_have_torchvisions_parameter_counts(depth, torchvision):
    assert count_parameters(resnet50(num_classes=1000, depth=depth)) == torchvision


def test_a_shallow_sibling_is_resnet50_with_the_later_blocks_of_each_stage_left_out(nets):
    mindspore.set_seed(1)
    small = resnet50(num_classes=10, depth=14)
    assert [len(getattr(small, name)) for name, *_ in STAGES] == list(DEPTHS[14]) == [1] * 4
    assert [blocks for _, blocks, *_ in STAGES] == list(DEPTHS[50])
    names = {p.name for p in small.get_parameters()}
    every = {p.name for p in nets["imagenet"].get_parameters()}
    assert names < every  # a strict subset, the same names for the blocks it has
    left_out = every - names
    assert all(n.split(".")[0].startswith("layer") and n.split(".")[1] != "0" for n in left_out)
    assert small(mindspore.Tensor(np.zeros((2, 3, 32, 32), np.float32))).shape == (2, 10)


def test_a_checkpoint_of_one_depth_fits_no_other(nets):
    mindspore.set_seed(1)
    small = resnet50(num_classes=10, depth=14)
    deep = {p.name: p for p in nets["imagenet"].get_parameters()}
    with pytest.raises(CheckpointMismatchError, match=r"of layers the network lacks "
                       r"\(another depth\?\): layer1\.1\.conv1\.weight"):
        check_fits(small, {**deep, "moments.conv1.weight": deep["conv1.weight"]})
    with pytest.raises(CheckpointMismatchError, match=r"missing \d+ parameter\(s\): layer1\.1\."):
        check_fits(nets["imagenet"], {p.name: p for p in small.get_parameters()})
    check_fits(small, {p.name: p for p in small.get_parameters()}
               | {"moments.layer1.0.conv1.weight": deep["conv1.weight"]})  # optimizer state


def test_invalid_depth_names_value():
    with pytest.raises(ValueError, match="depth must be one of 14, 26, 50, 101, 152; got 34"):
        resnet50(depth=34)


def test_invalid_stem_names_value():
    with pytest.raises(ValueError, match="'resnet'"):
        resnet50(stem="resnet")


def test_invalid_num_classes_names_value():
    with pytest.raises(ValueError, match="num_classes.*0"):
        resnet50(num_classes=0)


@pytest.mark.parametrize("stem,size", [("imagenet", 32), ("cifar", 32), ("imagenet", 224)])
def test_output_shape(nets, stem, size):
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    net = nets[stem]
    net.set_train(False)
    x = mindspore.Tensor(np.random.default_rng(0).standard_normal((2, 3, size, size), np.float32))
    out = net(x)
    assert out.shape == (2, 10)
    assert np.isfinite(out.asnumpy()).all()


def test_stage_shapes(nets):
    assert stage_shapes(nets["imagenet"], 32) == {
        "input": (1, 3, 32, 32), "conv1": (1, 64, 16, 16), "maxpool": (1, 64, 8, 8),
        "layer1": (1, 256, 8, 8), "layer2": (1, 512, 4, 4), "layer3": (1, 1024, 2, 2),
        "layer4": (1, 2048, 1, 1), "end_point": (1, 10)}
    assert stage_shapes(nets["cifar"], 32) == {
        "input": (1, 3, 32, 32), "conv1": (1, 64, 32, 32), "maxpool": (1, 64, 32, 32),
        "layer1": (1, 256, 32, 32), "layer2": (1, 512, 16, 16), "layer3": (1, 1024, 8, 8),
        "layer4": (1, 2048, 4, 4), "end_point": (1, 10)}
    shapes = stage_shapes(nets["imagenet"], 224, batch_size=2)
    assert [shapes[k][2] for k in ("conv1", "maxpool", "layer1", "layer2", "layer3", "layer4")] == \
        [112, 56, 56, 28, 14, 7]
    assert shapes["end_point"] == (2, 10)


def test_stage_shapes_restores_graph_mode(nets):
    mindspore.set_context(mode=mindspore.GRAPH_MODE)
    try:
        stage_shapes(nets["cifar"], 32)
        assert mindspore.get_context("mode") == mindspore.GRAPH_MODE
    finally:
        mindspore.set_context(mode=mindspore.PYNATIVE_MODE)


def test_param_groups_split(nets):
    net = nets["imagenet"]
    groups = param_groups(net, 1e-4)
    decay, no_decay, order = groups
    assert decay["weight_decay"] == pytest.approx(1e-4) and no_decay["weight_decay"] == 0.0
    assert [p.name for p in order["order_params"]] == [p.name for p in net.trainable_params()]
    decay_names = [p.name for p in decay["params"]]
    no_decay_names = [p.name for p in no_decay["params"]]
    everything = [p.name for p in net.trainable_params()]
    assert sorted(decay_names + no_decay_names) == sorted(everything)   # each exactly once
    assert not set(decay_names) & set(no_decay_names)
    weights = {name for name, cell in net.cells_and_names() if isinstance(cell, (nn.Conv2d, nn.Dense))}
    batchnorms = {name for name, cell in net.cells_and_names() if isinstance(cell, nn.BatchNorm2d)}
    assert set(decay_names) == {f"{w}.weight" for w in weights}
    assert set(no_decay_names) == {f"{b}.{leaf}" for b in batchnorms for leaf in ("gamma", "beta")} | \
        {"end_point.bias"}
    assert len(decay_names) == 54 and len(no_decay_names) == 2 * 53 + 1
    assert all(n.rsplit(".", 1)[-1] in NO_DECAY_NAMES for n in no_decay_names)


def test_param_groups_work_with_momentum(nets):
    optimizer = nn.Momentum(param_groups(nets["cifar"], 5e-4), learning_rate=0.1, momentum=0.9)
    assert len(optimizer.parameters) == len(nets["cifar"].trainable_params())


def test_cell_macs_formula():
    conv = nn.Conv2d(16, 32, 3, stride=2)
    assert cell_macs(conv, (1, 32, 8, 8)) == 8 * 8 * 32 * 16 * 9
    assert cell_macs(nn.Dense(2048, 10), (1, 10)) == 20_480
    assert cell_macs(nn.BatchNorm2d(32), (1, 32, 8, 8)) == 0
    assert cell_macs(nn.BatchNorm2d(32), (1, 32, 8, 8), include_batchnorm=True) == 2048


def test_macs_match_known_resnet50_figure():
    # ResNet50 at 224x224 with 1000 classes: 4.09 G multiply-accumulates (torchvision
    # lists "4.09 GFLOPS", fvcore/ptflops count the same 4,089,184,256).
    report = count_macs(resnet50(num_classes=1000), 224)
    assert report.total == 4_089_184_256
    assert report.by_kind["Dense"] == 2048 * 1000


def test_macs_per_stem_and_size(nets):
    imagenet_224 = count_macs(nets["imagenet"], 224)
    imagenet_32 = count_macs(nets["imagenet"], 32)
    cifar_32 = count_macs(nets["cifar"], 32)
    # 10 classes: the same as above minus 2048 * 990 classifier MACs
    assert imagenet_224.total == 4_089_184_256 - 2048 * 990
    assert imagenet_32.total == 83_431_424
    assert cifar_32.total == 1_297_829_888
    assert 15 < cifar_32.total / imagenet_32.total < 17   # the CIFAR stem keeps 4x wider maps
    assert sum(imagenet_224.by_stage.values()) == imagenet_224.total
    assert set(imagenet_224.by_stage) == {"conv1", "layer1", "layer2", "layer3", "layer4", "end_point"}


def test_zero_init_residual_sets_only_the_last_batchnorm_of_each_branch():
    zoo = resnet50(num_classes=10)  # the default: MindSpore 1.x model_zoo
    today = resnet50(num_classes=10, zero_init_residual=False)  # models repo, Momentum
    for net, gamma in ((zoo, 0.0), (today, 1.0)):
        for layer in (net.layer1, net.layer2, net.layer3, net.layer4):
            for block in layer:
                assert np.all(block.bn3.gamma.asnumpy() == gamma)
                assert np.all(block.bn2.gamma.asnumpy() == 1.0)
    names = [(p.name, p.shape) for p in zoo.get_parameters()]
    assert names == [(p.name, p.shape) for p in today.get_parameters()]
