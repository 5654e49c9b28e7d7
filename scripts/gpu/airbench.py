"""How far the data itself lets a network go: Keller Jordan's airbench on this copy.

airbench (``scripts/gpu/airbench/``, the ``legacy/`` scripts of
github.com/KellerJordan/cifar10-airbench at f1c599c, MIT licence, unmodified) is the
best-documented fast CIFAR-10 training there is: ``airbench94.py`` reaches 94.01 %
mean test accuracy over 1,000 runs and ``airbench96.py`` 96.03 % over 400, both on
the official CIFAR-10 files. Run here on the project's data (any copy in the
official binary layout), the same scripts say how many points that copy costs a
recipe that is known to reach the mark, which tells a recipe that stops short from
data that does.

airbench reads ``cifar10/train.pt`` and ``cifar10/test.pt`` (uint8 images N x 32 x
32 x 3, labels, class names) from its working folder and downloads them through
torchvision when they are missing; this script writes them from the binary batches
first, so nothing is downloaded. All 50,000 training images train and the 10,000
test images score, as in airbench's own runs.

Usage, on a machine with PyTorch, torchvision (airbench imports it) and a CUDA GPU,
from the repository root::

    python3 scripts/gpu/airbench.py DATA_DIR OUT.json airbench94:10 airbench96:2

Writes OUT.json after every run: per script, the test accuracies (with airbench's
test-time augmentation, as its published means), their mean, and seconds.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch

from msresnet.data.cifar10 import dataset_folder, read_records

HERE = Path(__file__).resolve().parent / "airbench"
SOURCE = "github.com/KellerJordan/cifar10-airbench f1c599c, legacy/"
PUBLISHED = {"airbench94": (94.01, 1000), "airbench96": (96.03, 400)}  # % mean, runs
TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]


def write_tensors(data_dir: str, folder: Path) -> dict[str, int]:
    """The binary batches as airbench's ``train.pt`` / ``test.pt``; image counts."""
    source = dataset_folder(data_dir)
    classes = (source / "batches.meta.txt").read_text().split()
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, files in (("train", TRAIN_FILES), ("test", ["test_batch.bin"])):
        parts = [read_records(source / f) for f in files]
        images = np.concatenate([p[0] for p in parts])  # N x 32 x 32 x 3, as airbench's
        labels = np.concatenate([p[1] for p in parts]).astype(np.int64)
        torch.save({"images": torch.from_numpy(images), "labels": torch.from_numpy(labels),
                    "classes": classes}, folder / f"{name}.pt")
        counts[name] = len(labels)
    return counts


def load(script: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(script, HERE / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # its __main__ block (25 runs) does not run
    return module


def main(data_dir: str, out: str, plan: list[str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="airbench-"))
    counts = write_tensors(data_dir, work / "cifar10")
    record = {"source": SOURCE, "data_dir": os.path.basename(os.path.abspath(data_dir)),
              "images": counts, "gpu": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "scripts": {}}
    for item in plan:
        script, _, runs = item.partition(":")
        mean, n = PUBLISHED[script]
        entry = record["scripts"][script] = {"published_mean": mean, "published_runs": n,
                                             "accuracies": [], "seconds": []}
        with contextlib.chdir(work):
            module = load(script)
            for run in range(int(runs or 1)):
                start = time.time()
                accuracy = float(module.main(run))
                entry["seconds"].append(round(time.time() - start, 1))
                entry["accuracies"].append(round(100 * accuracy, 2))
                entry["mean"] = round(float(np.mean(entry["accuracies"])), 3)
                Path(out).write_text(json.dumps(record, indent=1))
        print(f"{script}: mean {entry['mean']} % over {len(entry['accuracies'])} runs "
              f"(published {mean} % over {n} on the official files)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:])
