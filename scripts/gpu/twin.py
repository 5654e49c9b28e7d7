"""The PyTorch twin of a msresnet profile: the same recipe, trained in PyTorch on a GPU.

Why: MindSpore's fast GPU recipe (``results/gpu/fast.yaml``) reached 90.16 % test
top-1 in 75 epochs where ResNet50 on CIFAR-10 usually reaches about 94 %. This
script trains the recipe again, value for value, in PyTorch, on the same GPU and
the same data: if the twin reaches about 94 %, the difference lies in the MindSpore
path; if it reaches what MindSpore reached, the recipe is the limit. It also makes
accuracy ablations cheap, since PyTorch's step is faster on the same GPU.

What is the same, read from the profile through ``msresnet.load_config`` (no value
is copied here): the network (ResNet50 v1.5 as ``msresnet.model.resnet`` builds it:
bottlenecks with the stride on the 3x3 convolution, ``same`` padding as MindSpore
pads it, the CIFAR or ImageNet stem, Xavier-uniform convolutions, normal(0.01)
classifier, BatchNorm eps 1e-4, the profile's ``bn_momentum`` converted to
PyTorch's meaning, ``zero_init_residual``), the held-out split
(``msresnet.data.splits.hold_out``), the augmentation (random 32x32 crop of the
image padded by 4 zeros, horizontal flip, then resize to ``image_size``, then the
same mean and std), batches of ``batch_size`` with the last partial one dropped and
a fresh shuffle each epoch, the per-step learning rates
(``msresnet.model.lr_schedule.lr_for_config``), SGD with ``momentum``, ``nesterov``
and ``weight_decay`` on convolution and classifier weights only (``param_groups``'
rule), MindSpore's label smoothing (``1 - s`` on the true class, ``s / 9`` on each
other), float16 compute with float32 BatchNorm and a loss scale starting at
``loss_scale`` (PyTorch's GradScaler), and checkpoint choice on the held-out
images, the test set scoring the choice once. Progressive resizing and
``ema_decay`` are not twinned (refused).

What differs: the framework and its kernels; augmentation runs on the GPU from
images held in GPU memory (the random streams differ from MindSpore's); the
choice is among every epoch's weights (MindSpore's run chooses among saved
checkpoints); channels_last memory layout (the arithmetic is the same).

Usage, on the GPU machine, from the repository root::

    python3 scripts/gpu/twin.py PROFILE DATA_DIR OUT.json [key=value ...]

``key=value`` overrides profile keys as ``msresnet train --key value`` does
(``epoch_size=75``). Twin-only keys, for ablations the MindSpore path lacks yet:
``twin.cutout=N`` (an N x N zero patch per training image), ``twin.init=kaiming``.
Writes OUT.json (settings, per-epoch history, test scores) and prints a line per
epoch.
"""

from __future__ import annotations

import copy
import json
import math
import platform
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from msresnet.config.profile import load_config, parse_overrides
from msresnet.data.cifar10 import (CIFAR10_MEAN, CIFAR10_STD, CROP_PADDING, dataset_folder,
                                   read_records)
from msresnet.data.splits import hold_out, training_records
from msresnet.model.lr_schedule import lr_for_config
from msresnet.model.architecture import (BN_EPS, CLASSIFIER_SIGMA, EXPANSION, STAGES,
                                         STEM_CHANNELS)


class SameConv(nn.Conv2d):
    """A bias-free convolution padded as MindSpore's ``pad_mode="same"`` pads: the
    total padding split with the extra pixel at the bottom and right."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1) -> None:
        super().__init__(cin, cout, k, stride, padding=0, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, s = self.kernel_size[0], self.stride[0]
        size = x.shape[-1]
        total = max((math.ceil(size / s) - 1) * s + k - size, 0)
        if total:
            x = F.pad(x, (total // 2, total - total // 2, total // 2, total - total // 2))
        return super().forward(x)


def bn(channels: int, momentum: float) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=1.0 - momentum)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, momentum: float) -> None:
        super().__init__()
        width = cout // EXPANSION
        self.conv1, self.bn1 = SameConv(cin, width, 1), bn(width, momentum)
        self.conv2, self.bn2 = SameConv(width, width, 3, stride), bn(width, momentum)
        self.conv3, self.bn3 = SameConv(width, cout, 1), bn(cout, momentum)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(SameConv(cin, cout, 1, stride), bn(cout, momentum))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    def __init__(self, config, init: str = "xavier") -> None:
        super().__init__()
        m = config.bn_momentum
        if config.stem == "cifar":
            self.conv1, self.pool = SameConv(3, STEM_CHANNELS, 3), nn.Identity()
        else:
            self.conv1 = SameConv(3, STEM_CHANNELS, 7, 2)
            self.pool = nn.MaxPool2d(3, 2, 1)  # MindSpore's same-padded max pool, at even sizes
        self.bn1 = bn(STEM_CHANNELS, m)
        blocks, cin = [], STEM_CHANNELS
        for _name, count, _width, cout, stride in STAGES:
            for i in range(count):
                blocks.append(Bottleneck(cin, cout, stride if i == 0 else 1, m))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, config.num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                if init == "kaiming":
                    nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                else:
                    nn.init.xavier_uniform_(module.weight)
        nn.init.normal_(self.fc.weight, std=CLASSIFIER_SIGMA)
        nn.init.zeros_(self.fc.bias)
        if config.zero_init_residual:
            for block in blocks:
                nn.init.zeros_(block.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def param_groups(net: nn.Module, weight_decay: float) -> list[dict]:
    """Decay convolution and classifier weights; not BatchNorm's or biases (msresnet's rule)."""
    decay, rest = [], []
    for module in net.modules():
        for name, p in module.named_parameters(recurse=False):
            is_weight = name == "weight" and isinstance(module, (nn.Conv2d, nn.Linear))
            (decay if is_weight else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    """MindSpore's CrossEntropySmooth: 1 - s on the true class, s / (K - 1) on the others."""
    logp = F.log_softmax(logits.float(), dim=1)
    if smoothing == 0:
        return F.nll_loss(logp, labels)
    k = logits.shape[1]
    target = torch.full_like(logp, smoothing / (k - 1))
    target.scatter_(1, labels[:, None], 1.0 - smoothing)
    return -(target * logp).sum(1).mean()


class Images:
    """CIFAR-10 records held on the GPU as uint8 (N, 3, 32, 32) with their labels."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray, device: str) -> None:
        self.labels = torch.from_numpy(labels.astype(np.int64)).to(device)
        self.pixels = torch.from_numpy(np.ascontiguousarray(pixels)).to(device)
        self.mean = torch.tensor(CIFAR10_MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(CIFAR10_STD, device=device).view(1, 3, 1, 1)

    @classmethod
    def records(cls, records: np.ndarray, device: str) -> "Images":
        """From raw training records (label byte, then the CHW pixels)."""
        return cls(records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0], device)

    def batch(self, index: torch.Tensor, size: int, augment: bool, cutout: int,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.pixels[index]
        n = x.shape[0]
        if augment:
            pad = CROP_PADDING
            padded = F.pad(x, (pad, pad, pad, pad))
            dy = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
            dx = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=generator)
            ar = torch.arange(32, device=x.device)
            rows = (dy[:, None] + ar)[:, None, :, None].expand(n, 3, 32, 32 + 2 * pad)
            cols = (dx[:, None] + ar)[:, None, None, :].expand(n, 3, 32, 32)
            x = padded.gather(2, rows).gather(3, cols)
            flip = torch.rand(n, device=x.device, generator=generator) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
        x = x.float() / 255.0
        if size != 32:
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        if augment and cutout:
            cy = torch.randint(0, size, (n,), device=x.device, generator=generator)
            cx = torch.randint(0, size, (n,), device=x.device, generator=generator)
            ar = torch.arange(size, device=x.device)
            inside_y = (ar[None] - cy[:, None]).abs() <= cutout // 2
            inside_x = (ar[None] - cx[:, None]).abs() <= cutout // 2
            hole = inside_y[:, :, None] & inside_x[:, None, :]
            x = x.masked_fill(hole[:, None], 0.0)  # black before normalising, as padding
        x = (x - self.mean) / self.std
        return x.contiguous(memory_format=torch.channels_last), self.labels[index]


def autocast(device: torch.device):
    """float16 compute on the GPU (BatchNorm stays float32, as under MindSpore's O2);
    float32 on the CPU, where the tests run it."""
    return torch.autocast("cuda", dtype=torch.float16, enabled=device.type == "cuda")


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def evaluate(net: nn.Module, images: Images, size: int, batch: int = 1000) -> dict:
    net.eval()
    correct = top5 = 0
    loss = 0.0
    n = images.labels.shape[0]
    for start in range(0, n, batch):
        index = torch.arange(start, min(start + batch, n), device=images.labels.device)
        x, y = images.batch(index, size, False, 0, None)
        with autocast(x.device):
            logits = net(x)
        loss += float(F.cross_entropy(logits.float(), y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
        top5 += int((logits.topk(5, 1).indices == y[:, None]).any(1).sum())
    net.train()
    return {"top1": correct / n, "top5": top5 / n, "loss": loss / n}


def main(argv: list[str]) -> None:
    profile, data_dir, out = argv[:3]
    twin = {"cutout": 0, "init": "xavier"}
    for item in argv[3:]:
        key, _, value = item.partition("=")
        if key.startswith("twin."):
            twin[key[5:]] = type(twin[key[5:]])(value)
    plain = [f"--{item}" for item in argv[3:] if not item.startswith("twin.")]
    config = load_config(profile, parse_overrides(plain))  # key=value, as --key=value
    if config.progressive_size is not None or config.ema_decay:
        raise SystemExit("twin.py: progressive resizing and ema_decay are not twinned")
    torch.manual_seed(config.seed)
    torch.backends.cudnn.benchmark = True
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: the tests' smoke run
    folder = dataset_folder(data_dir)
    train_idx, valid_idx = hold_out(folder, config.valid_split, config.seed) if config.valid_split \
        else (np.arange(50_000), None)
    train = Images.records(training_records(folder, train_idx), device)
    valid = (Images.records(training_records(folder, valid_idx), device)
             if valid_idx is not None else None)
    pixels, labels = read_records(folder / "test_batch.bin")  # HWC, as matplotlib shows
    test = Images(pixels.transpose(0, 3, 1, 2), labels, device)
    if config.eval_samples:  # the first N of each, as msresnet evaluates
        for images in (valid, test):
            if images is not None:
                images.labels = images.labels[:config.eval_samples]
                images.pixels = images.pixels[:config.eval_samples]
    steps = (config.train_samples or len(train_idx)) // config.batch_size
    lrs = lr_for_config(config, steps)
    net = ResNet50(config, twin["init"]).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(param_groups(net, config.weight_decay), lr=float(lrs[0]),
                                momentum=config.momentum, nesterov=config.nesterov)
    scaler = torch.amp.GradScaler(device, init_scale=config.loss_scale,
                                  enabled=device == "cuda")
    generator = torch.Generator(device=device)
    generator.manual_seed(config.seed)
    history, best, step, started = [], None, 0, time.time()
    for epoch in range(1, config.epoch_size + 1):
        sync(device)
        t0 = time.time()
        order = torch.randperm(len(train_idx), device=device, generator=generator)
        total = torch.zeros((), device=device)
        for i in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = float(lrs[step])
            x, y = train.batch(order[i * config.batch_size:(i + 1) * config.batch_size],
                               config.image_size, True, twin["cutout"], generator)
            with autocast(x.device):
                loss = smoothed_loss(net(x), y, config.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            total += loss.detach()
            step += 1
        sync(device)
        seconds = time.time() - t0
        judged = net
        scores = evaluate(judged, valid or test, config.image_size)
        record = {"epoch": epoch, "lr": float(lrs[step - 1]), "train_loss": float(total) / steps,
                  "val_top1": scores["top1"], "val_loss": scores["loss"],
                  "train_seconds": round(seconds, 3),
                  "images_per_second": round(steps * config.batch_size / seconds, 1)}
        history.append(record)
        if best is None or scores["top1"] >= best[0]:
            best = (scores["top1"], epoch, copy.deepcopy(judged.state_dict()))
        print(json.dumps(record), flush=True)
    last = evaluate(judged, test, config.image_size)
    judged.load_state_dict(best[2])
    chosen = evaluate(judged, test, config.image_size)
    result = {
        "profile": profile, "overrides": argv[3:], "config": config.to_dict(), "twin": twin,
        "framework": f"PyTorch {torch.__version__}", "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name() if device == "cuda" else "none",
        "python": platform.python_version(), "train_images": len(train_idx),
        "steps_per_epoch": steps, "seconds": round(time.time() - started, 1),
        "chosen_epoch": best[1], "chosen_val_top1": best[0],
        "test_chosen": chosen, "test_last": last, "history": history,
    }
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)
    print(f"twin {profile} {' '.join(argv[3:])}: test top-1 {chosen['top1']:.4f} (epoch "
          f"{best[1]}), last {last['top1']:.4f}, {result['seconds']} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
