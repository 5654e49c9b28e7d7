"""Any picture to the network's input, the way the evaluation pipeline does it, without MindSpore.

The evaluation pipeline (:mod:`msresnet.data.pipeline`) feeds 32x32 CIFAR-10 records
through ``Rescale(1/255)``, ``Normalize(mean, std)`` and ``HWC2CHW``. A deployed
model meets other pictures: a phone photo, a PNG of any size, a greyscale scan.
This module brings any file Pillow reads to the same input: RGB, the largest
centred square (so the object is not stretched), a bilinear resize to the model's
size (none when it is already that size, as for CIFAR-10 itself), then the same
arithmetic as the pipeline, in float32. It is MindSpore-free so that
:mod:`msresnet.deploy.predict` can serve an ONNX model with onnxruntime alone, and the
book's in-browser page repeats exactly this arithmetic in JavaScript
(``_static/classify/classify.js``); ``tests/test_images.py`` checks it against the
MindSpore pipeline record for record.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

# Per-channel mean and std used by the MindSpore models repo (and many CIFAR-10
# codebases). The means are the true per-channel pixel means of the training set;
# the stds are smaller than the true per-pixel stds (~0.247, 0.243, 0.261), see
# chapter 1 for the computation. We keep them so results compare with the repo.
CIFAR10_MEAN: tuple[float, float, float] = (0.4914, 0.4822, 0.4465)
CIFAR10_STD: tuple[float, float, float] = (0.2023, 0.1994, 0.2010)

# CIFAR-10 images are stored as 32x32; a resize to this size is skipped.
NATIVE_SIZE = 32


class ImageError(ValueError):
    """A picture cannot be used; the message names the file."""


def read_image(path: str | os.PathLike[str]) -> Image.Image:
    """The picture at ``path`` as RGB, or :class:`ImageError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"{path}: no such image file")
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ImageError(f"{path}: not an image Pillow can read ({reason})") from None


def fit_square(image: Image.Image, size: int) -> Image.Image:
    """The largest centred square of ``image``, resized (bilinear) to ``size`` x ``size``."""
    width, height = image.size
    side = min(width, height)
    if (width, height) != (side, side):
        left, top = (width - side) // 2, (height - side) // 2
        image = image.crop((left, top, left + side, top + side))
    if side != size:
        image = image.resize((size, size), Image.Resampling.BILINEAR)
    return image


def normalize(pixels: np.ndarray) -> np.ndarray:
    """HWC uint8 RGB pixels to CHW float32, as Rescale(1/255), Normalize, HWC2CHW do."""
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ImageError(f"expected HxWx3 uint8 pixels, got {pixels.dtype} {pixels.shape}")
    scaled = pixels.astype(np.float32) * np.float32(1.0 / 255.0)
    mean = np.asarray(CIFAR10_MEAN, np.float32)
    std = np.asarray(CIFAR10_STD, np.float32)
    return ((scaled - mean) / std).transpose(2, 0, 1).copy()


def model_input(image: Image.Image, size: int = NATIVE_SIZE) -> np.ndarray:
    """One picture as the network's CHW float32 input of ``size`` x ``size``."""
    return normalize(np.asarray(fit_square(image.convert("RGB"), size), dtype=np.uint8))
