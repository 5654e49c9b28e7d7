"""Time the same ResNet50 training step in PyTorch, for the levers record (issue 30).

Usage, from the repository root, with PyTorch's own Python (PyTorch is never
installed in the book's ``.venv``)::

    $TORCH_ENV/bin/python scripts/pytorch/pytorch_step.py \\
        results/budget/levers/pytorch.json

The network is written out here rather than taken from torchvision (not
installed beside this PyTorch): ResNet50 v1.5 as ``msresnet.model.resnet`` builds
it, with the ImageNet stem, bottlenecks ``[3, 4, 6, 3]`` with the stride on the
3x3 convolution, no convolution bias, 10 classes. The step is the bench's: cross
entropy, backward, Momentum 0.9 with weight decay, on one synthetic batch of 64
normal images at 32x32, 2 untimed steps then 10 timed ones; the record has the
bench's JSON shape, so chapter 10 reads it beside ``msresnet bench``'s files.
"""

import json
import os
import platform
import statistics
import sys
import time

import torch
from torch import nn

BATCH, SIZE, CLASSES, WARMUP, STEPS = 64, 32, 10, 2, 10


class Bottleneck(nn.Module):
    """One residual block: 1x1, 3x3 (stride here), 1x1, with a projection if needed."""

    def __init__(self, cin: int, width: int, cout: int, stride: int) -> None:
        super().__init__()
        self.branch = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(), nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.branch(x) + self.shortcut(x))


def resnet50() -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for blocks, width, cout, stride in ((3, 64, 256, 1), (4, 128, 512, 2),
                                        (6, 256, 1024, 2), (3, 512, 2048, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, CLASSES)]
    return nn.Sequential(*layers)


def main(out: str) -> None:
    torch.manual_seed(1)
    net = resnet50().train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(BATCH, 3, SIZE, SIZE)
    labels = torch.randint(0, CLASSES, (BATCH,))
    load_before = [round(x, 2) for x in os.getloadavg()]
    times, loss = [], float("nan")
    for _ in range(WARMUP + STEPS):
        start = time.perf_counter()
        optimizer.zero_grad()
        value = nn.functional.cross_entropy(net(images), labels)
        value.backward()
        optimizer.step()
        loss = float(value)
        times.append(time.perf_counter() - start)
    median = statistics.median(times[WARMUP:])
    # msresnet.cpu_speed.cpu_model reads the same line, but importing msresnet would
    # cap oneDNN at AVX2 on AVX-512 hosts for this PyTorch process too.
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    record = {
        "settings": {"batch_size": BATCH, "image_size": SIZE, "stem": "imagenet",
                     "num_classes": CLASSES, "steps": STEPS, "warmup": WARMUP,
                     "framework": f"PyTorch {torch.__version__}",
                     "threads": torch.get_num_threads()},
        "machine": {"cpu": cpu, "cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "pytorch": torch.__version__,
                    "load_average_before": load_before,
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "results": [{"mode": "eager", "isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "default"),
                     "ms_per_step": 1000 * median, "images_per_s": BATCH / median,
                     "first_step_s": times[0], "step_times_s": times[WARMUP:],
                     "final_loss": loss}],
    }
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"PyTorch {torch.__version__}: {1000 * median:.1f} ms/step, "
          f"{BATCH / median:.1f} images/s; wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1])
