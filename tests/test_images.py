"""msresnet.data.images: any picture to the network's input, as the evaluation pipeline does it."""

from __future__ import annotations

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import numpy as np
import pytest
from PIL import Image

from msresnet.data import cifar10
from msresnet.data.images import (WHITE, ImageError, fit_square, model_input, normalize,
                                  open_picture, read_image, to_rgb)
from msresnet.paths import REPO_ROOT
from msresnet.data.pipeline import create_dataset
from prerequisites import needs_data

DATA = REPO_ROOT / "data" / cifar10.FOLDER_NAME


@needs_data
def test_model_input_is_the_evaluation_pipeline_bit_for_bit():
    count = 64
    pipeline = create_dataset(DATA, "test", count, training=False, num_samples=count)
    expected = next(pipeline.create_tuple_iterator(num_epochs=1))[0].asnumpy()
    images, _ = cifar10.read_records(DATA / "test_batch.bin", 0, count)
    ours = np.stack([model_input(Image.fromarray(image)) for image in images])
    assert ours.dtype == np.float32 and ours.shape == expected.shape
    assert np.array_equal(ours, expected)


def test_normalize_arithmetic():
    pixels = np.zeros((2, 2, 3), np.uint8)
    pixels[0, 0] = (255, 0, 128)
    out = normalize(pixels)
    assert out.shape == (3, 2, 2) and out.dtype == np.float32
    assert out[0, 0, 0] == pytest.approx((1 - 0.4914) / 0.2023, rel=1e-6)
    assert out[1, 0, 0] == pytest.approx((0 - 0.4822) / 0.1994, rel=1e-6)
    with pytest.raises(ImageError, match="HxWx3 uint8"):
        normalize(pixels.astype(np.float32))


def test_fit_square_takes_the_centre_and_resizes():
    wide = np.zeros((20, 60, 3), np.uint8)
    wide[:, 20:40] = 255  # a white centre square between black sides
    square = fit_square(Image.fromarray(wide), 10)
    assert square.size == (10, 10)
    assert np.asarray(square).min() == 255  # only the centre survives
    native = Image.fromarray(np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3))
    assert np.array_equal(np.asarray(fit_square(native, 32)), np.asarray(native))


def test_read_image_any_mode_and_size(tmp_path):
    grey = tmp_path / "grey.png"
    Image.fromarray(np.full((40, 50), 7, np.uint8)).save(grey)
    rgba = tmp_path / "alpha.png"
    Image.fromarray(np.full((12, 12, 4), 200, np.uint8)).save(rgba)
    for path in (grey, rgba):
        image = read_image(path)
        assert image.mode == "RGB"
        assert model_input(image, 24).shape == (3, 24, 24)


def test_read_image_errors_name_the_file(tmp_path):
    with pytest.raises(ImageError, match=r"missing\.png: no such image file"):
        read_image(tmp_path / "missing.png")
    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    with pytest.raises(ImageError, match=r"notes\.png: not an image Pillow can read"):
        read_image(text)
    cut = tmp_path / "cut.png"
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(cut)
    cut.write_bytes(cut.read_bytes()[:60])
    with pytest.raises(ImageError, match=r"cut\.png: not an image Pillow can read"):
        read_image(cut)


# ------------------------------------------------------------------ each mode's arithmetic

def eight_bit(values: np.ndarray) -> np.ndarray:
    """16-bit values to 8 bits with rounding: round(v * 255 / 65535)."""
    return np.rint(values.astype(np.float64) * 255 / 65535).astype(np.uint8)


def test_sixteen_bit_greyscale_is_scaled_not_clipped(tmp_path):
    """A 16-bit PNG, TIFF or PGM keeps its greys (Pillow's convert("RGB") clipped every
    value above 255 to white: 99.5 % of a full-range gradient)."""
    values = np.linspace(0, 65535, 48 * 40).round().astype(np.uint16).reshape(48, 40)
    Image.fromarray(values).save(tmp_path / "grey16.png")
    Image.fromarray(values).save(tmp_path / "grey16.tif")
    header = f"P5 {values.shape[1]} {values.shape[0]} 65535\n".encode()
    (tmp_path / "grey16.pgm").write_bytes(header + values.astype(">u2").tobytes())
    for name, mode in (("grey16.png", "I;16"), ("grey16.tif", "I;16"), ("grey16.pgm", "I")):
        picture = open_picture(tmp_path / name)
        pixels = np.asarray(picture.image)
        assert picture.image.mode == "RGB"
        assert np.array_equal(pixels[..., 0], eight_bit(values)), name
        assert np.array_equal(pixels[..., 0], pixels[..., 2])
        assert picture.steps == (f"16-bit grey ({mode}) to 8 bits: round(v * 255 / 65535)",)
        assert (pixels == 255).mean() < 0.01, name


def test_transparent_pixels_are_composited_on_the_background(tmp_path):
    """Alpha is composited on white by default, on any stated colour, or refused; the
    pixels behind full transparency (black here) never show."""
    rgba = np.zeros((8, 8, 4), np.uint8)
    rgba[..., :3] = (200, 100, 0)
    rgba[:4, :, 3] = 255      # top half opaque
    rgba[4:6, :, 3] = 128     # then half transparent
    file = tmp_path / "alpha.png"
    Image.fromarray(rgba).save(file)
    for background in (WHITE, (0, 0, 255)):
        picture = open_picture(file, background)
        alpha = rgba[..., 3:].astype(np.float64) / 255
        expected = rgba[..., :3] * alpha + np.array(background) * (1 - alpha)
        pixels = np.asarray(picture.image).astype(np.float64)
        assert np.abs(pixels - expected).max() <= 1, background
        assert pixels[7, 0].tolist() == list(background)  # fully transparent: the background
        assert f"RGBA, alpha composited on RGB {background}" in picture.conversion
    with pytest.raises(ImageError, match=r"alpha\.png: 32 of 64 pixels are transparent "
                                         r"\(mode RGBA\) and transparency is refused"):
        open_picture(file, None)
    opaque = tmp_path / "opaque.png"
    Image.fromarray(rgba[:4]).save(opaque)  # an alpha band with nothing transparent
    assert "every pixel opaque" in open_picture(opaque, None).conversion
    # an RGBA image given to model_input directly is composited the same way
    assert np.array_equal(model_input(Image.fromarray(rgba), 8),
                          model_input(open_picture(file).image, 8))


def test_a_transparent_palette_colour_is_composited(tmp_path):
    palette = Image.new("P", (4, 1))
    palette.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    palette.putpixel((2, 0), 1)
    file = tmp_path / "indexed.png"
    palette.save(file, transparency=0)  # colour 0 (black) is transparent
    picture = open_picture(file)
    assert np.asarray(picture.image)[0].tolist() == [[255] * 3, [255] * 3, [255, 0, 0], [255] * 3]
    assert picture.conversion.startswith("P, alpha composited")
    palette.save(tmp_path / "plain.png")
    assert open_picture(tmp_path / "plain.png").conversion == "palette, colours looked up"


def test_every_pillow_mode_becomes_rgb_or_is_refused_with_a_reason():
    """Every mode Pillow has: RGB with a stated conversion, or (32-bit I and F, whose
    white level no file states) one line that says why."""
    refused = {}
    for mode in Image.MODES:
        try:
            picture = to_rgb(Image.new(mode, (3, 2)), path="x.tif")
        except ImageError as err:
            refused[mode] = str(err)
            continue
        assert picture.image.mode == "RGB" and picture.image.size == (3, 2), mode
        assert picture.conversion, mode
    assert sorted(refused) == ["F", "I"]
    assert refused["F"].startswith("x.tif: 32-bit floating-point pixels (mode F")
    assert "state no white level" in refused["I"]


def test_a_folder_is_named_as_a_folder(tmp_path):
    (tmp_path / "pics").mkdir()
    with pytest.raises(ImageError, match=r"pics: is a folder, not an image file"):
        read_image(tmp_path / "pics")
