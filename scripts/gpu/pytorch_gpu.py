"""Time the book's ResNet50 training step in PyTorch on the same GPU (issue 35).

Usage, on the GPU machine, from the repository root, with a Python that has a CUDA
build of PyTorch::

    python3 scripts/gpu/pytorch_gpu.py OUT.json 32x224xImageNet 256x32xcifar ...

Each argument is BATCHxSIZExSTEM. The network is chapter 10's PyTorch twin of
``msresnet.model.resnet`` (``scripts/pytorch/pytorch_step.py``: ResNet50 v1.5,
no convolution bias, 10 classes), with the CIFAR stem (3x3 stride-1 convolution, no
max-pool) added as ``msresnet`` builds it. The step is what ``amp_level`` O2 does in
MindSpore: float16 autocast with BatchNorm in float32, a loss scale (PyTorch's
GradScaler), SGD with momentum 0.9 and weight decay, on one synthetic batch that
stays on the GPU (no data pipeline: an upper bound for a real run). Layout NCHW,
as MindSpore's, and channels_last, PyTorch's fast layout for tensor cores. 20
warm-up steps, then 100 steps timed with one synchronisation at each end.
"""

import json
import os
import platform
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pytorch"))
from pytorch_step import Bottleneck, resnet50 as imagenet_resnet50  # noqa: E402

WARMUP, STEPS, CLASSES = 20, 100, 10


def resnet50(stem: str) -> nn.Module:
    net = imagenet_resnet50()
    if stem == "cifar":  # replace the 7x7/2 convolution and the max-pool
        net[0] = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        net[3] = nn.Identity()
    assert isinstance(net[4], Bottleneck)
    return net


def time_step(batch: int, size: int, stem: str, channels_last: bool) -> dict:
    torch.manual_seed(1)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    net = resnet50(stem).cuda().to(memory_format=layout).train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
    images = torch.randn(batch, 3, size, size, device="cuda").to(memory_format=layout)
    labels = torch.randint(0, CLASSES, (batch,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.cross_entropy(net(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(STEPS):
        loss = step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / STEPS
    return {"batch_size": batch, "image_size": size, "stem": stem,
            "layout": "channels_last" if channels_last else "NCHW",
            "ms_per_step": round(1000 * seconds, 2), "images_per_s": round(batch / seconds, 1),
            "final_loss": float(loss)}


def main(out: str, shapes: list[str]) -> None:
    torch.backends.cudnn.benchmark = True  # PyTorch's usual setting for fixed shapes
    rows = []
    for shape in shapes:
        batch, size, stem = shape.split("x")
        for channels_last in (False, True):
            row = time_step(int(batch), int(size), stem.lower(), channels_last)
            rows.append(row)
            print(json.dumps(row), flush=True)
    record = {"framework": f"PyTorch {torch.__version__}", "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
              "python": platform.python_version(), "cpu_count": os.cpu_count(),
              "warmup": WARMUP, "steps": STEPS, "precision": "float16 autocast + GradScaler",
              "results": rows}
    with open(out, "w") as handle:
        json.dump(record, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
