"""msresnet.data.images: any picture to the network's input, as the evaluation pipeline does it."""

from __future__ import annotations

import msresnet  # noqa: F401  (CPU speed setting before MindSpore)
import numpy as np
import pytest
from PIL import Image

from msresnet.data import cifar10
from msresnet.data.images import ImageError, fit_square, model_input, normalize, read_image
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
