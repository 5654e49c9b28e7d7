"""Any picture to the network's input, the way the evaluation pipeline does it, without MindSpore.

The evaluation pipeline (:mod:`msresnet.data.pipeline`) feeds 32x32 CIFAR-10 records
through ``Rescale(1/255)``, ``Normalize(mean, std)`` and ``HWC2CHW``. A deployed
model meets other pictures: a phone photo, a PNG of any size, a greyscale scan.
This module brings any file Pillow reads to the same input: RGB, the largest
centred square (so the object is not stretched), a bilinear resize to the model's
size (none when it is already that size, as for CIFAR-10 itself), then the same
arithmetic as the pipeline, in float32.

RGB is reached with the arithmetic each mode needs, not with Pillow's bare
``convert("RGB")``, which clips 16-bit pixels at 255 (a 16-bit greyscale scan
becomes nearly all white) and drops alpha (transparent pixels become whatever
colour they hide, often black). :func:`to_rgb` scales 16-bit values to 8 bits,
composites transparent pixels on a stated background (white unless told
otherwise, or refuses them), refuses the two modes whose white level no file
states (32-bit integers and floats), and says which conversion it applied.

The module is MindSpore-free so that :mod:`msresnet.deploy.predict` can serve an
ONNX model with onnxruntime alone, and the book's in-browser page repeats exactly
this arithmetic in JavaScript (``web/classify/classify.js``, transparent pixels on
white included); ``tests/test_images.py`` checks it against the MindSpore pipeline
record for record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

# The normalisation's constants are CIFAR-10's facts (msresnet.data.cifar10).
from msresnet.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD, IMAGE_SHAPE

# CIFAR-10 images are stored as 32x32; a resize to this size is skipped.
NATIVE_SIZE = IMAGE_SHAPE[0]


class ImageError(ValueError):
    """A picture cannot be used; the message names the file."""


Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)

ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
# Pillow's PPM and PNG readers store 16-bit samples in mode I (a PGM's maxval
# rescaled to 65535); other readers use I for 32-bit integers of unknown scale.
SIXTEEN_BIT_IN_I_FORMATS = ("PPM", "PNG")
PLAIN_CONVERSIONS = {
    "RGB": "RGB, used as is",
    "RGBX": "RGBX, padding band dropped",
    "L": "8-bit grey, copied to R, G and B",
    "1": "1-bit, black 0 and white 255",
    "P": "palette, colours looked up",
    "CMYK": "CMYK, Pillow's formula (no colour profile)",
    "YCbCr": "YCbCr, Pillow's conversion",
    "LAB": "CIELAB, Pillow's conversion to sRGB",
    "HSV": "HSV, Pillow's conversion",
}


@dataclass(frozen=True)
class Picture:
    """A picture as RGB, and in words the steps that made it (``predict --verbose``)."""

    image: Image.Image
    steps: tuple[str, ...]

    @property
    def conversion(self) -> str:
        return "; ".join(self.steps)


def _sixteen_bit(image: Image.Image) -> Image.Image:
    """16-bit greyscale to 8 bits, ``round(v * 255 / 65535)`` (65535 / 255 is exactly 257);
    a transparent grey level (PNG's tRNS) becomes an alpha band."""
    values = np.asarray(image).astype(np.int64)
    grey = Image.fromarray(((values + 128) // 257).astype(np.uint8), "L")
    transparent = image.info.get("transparency")
    if isinstance(transparent, int):
        grey.putalpha(Image.fromarray(np.where(values == transparent, 0, 255).astype(np.uint8)))
    return grey


def _composite(image: Image.Image, background: Color | None, mode: str,
               path: Path) -> tuple[Image.Image, str]:
    """An image with alpha (or a transparent colour) as RGB, composited on ``background``;
    :class:`ImageError` when it has transparent pixels and ``background`` is None."""
    rgba = (image.convert("LA") if image.mode == "La" else image).convert("RGBA")
    alpha = np.asarray(rgba.getchannel("A"))
    if alpha.min() == 255:
        return rgba.convert("RGB"), f"{mode} with every pixel opaque, alpha dropped"
    if background is None:
        see_through = int((alpha < 255).sum())
        raise ImageError(f"{path}: {see_through} of {alpha.size} pixels are transparent "
                         f"(mode {mode}) and transparency is refused (pass a background "
                         "colour to composite them)")
    flat = Image.alpha_composite(Image.new("RGBA", rgba.size, (*background, 255)), rgba)
    return flat.convert("RGB"), f"{mode}, alpha composited on RGB {background}"


def to_rgb(image: Image.Image, background: Color | None = WHITE,
           path: str | os.PathLike[str] = "picture") -> Picture:
    """``image`` as RGB with its mode's arithmetic (see the module docstring).

    ``background`` is the colour transparent pixels are composited on (None: a picture
    with transparent pixels is refused); ``path`` names the picture in errors.
    """
    path, mode = Path(path), image.mode
    steps = []
    if mode in SIXTEEN_BIT_MODES or (mode == "I" and image.format in SIXTEEN_BIT_IN_I_FORMATS):
        image = _sixteen_bit(image)
        steps.append(f"16-bit grey ({mode}) to 8 bits: round(v * 255 / 65535)")
    elif mode in ("I", "F"):
        kind = "32-bit integer" if mode == "I" else "32-bit floating-point"
        raise ImageError(f"{path}: {kind} pixels (mode {mode}, {image.format or 'no'} format) "
                         "state no white level to scale from; save the picture with 8 or 16 "
                         "bits per channel")
    if image.mode in ALPHA_MODES or "transparency" in image.info:
        image, step = _composite(image, background, image.mode, path)
        steps.append(step)
    elif image.mode in PLAIN_CONVERSIONS:
        steps = steps or [PLAIN_CONVERSIONS[image.mode]]
        image = image.convert("RGB")
    else:
        raise ImageError(f"{path}: Pillow's mode {image.mode} has no conversion to RGB here")
    return Picture(image, tuple(steps))


def open_picture(path: str | os.PathLike[str], background: Color | None = WHITE) -> Picture:
    """The picture at ``path`` as RGB (:func:`to_rgb`), or :class:`ImageError` naming the file."""
    path = Path(path)
    if path.is_dir():
        raise ImageError(f"{path}: is a folder, not an image file")
    if not path.is_file():
        raise ImageError(f"{path}: no such image file")
    try:
        with Image.open(path) as image:
            image.load()
            return to_rgb(image, background, path)
    except ImageError:
        raise
    except (UnidentifiedImageError, OSError, ValueError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ImageError(f"{path}: not an image Pillow can read ({reason})") from None


def read_image(path: str | os.PathLike[str], background: Color | None = WHITE) -> Image.Image:
    """The picture at ``path`` as RGB (:func:`open_picture` without the conversion's words)."""
    return open_picture(path, background).image


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
    """One picture (any mode, :func:`to_rgb`) as the network's CHW float32 input of
    ``size`` x ``size``."""
    rgb = image if image.mode == "RGB" else to_rgb(image).image
    return normalize(np.asarray(fit_square(rgb, size), dtype=np.uint8))
