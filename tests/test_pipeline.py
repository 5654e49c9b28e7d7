"""Tests of msresnet.data.pipeline on the real CIFAR-10 files (a few seconds in all).

Every test reads at most a few hundred images through MindSpore, so the whole
file runs in seconds; they are skipped (with the reason) only when the dataset
folder has not been prepared (``make data``), and fail then under ``CI=true``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest

import msresnet  # noqa: F401  (first: CPU speed setting before MindSpore)
from msresnet.data import cifar10, pipeline, splits
from msresnet.paths import DATA_ROOT
from msresnet.data.pipeline import (CIFAR10_MEAN, CIFAR10_STD, PipelineError, create_dataset,
                                    worker_count)

DATA_DIR = DATA_ROOT / cifar10.FOLDER_NAME
from prerequisites import needs_data  # noqa: E402  (skipped without the data; CI=true: failed)


def batches(dataset) -> list[tuple[np.ndarray, np.ndarray]]:
    return list(dataset.create_tuple_iterator(output_numpy=True, num_epochs=1))


def first_batch(dataset) -> tuple[np.ndarray, np.ndarray]:
    return next(dataset.create_tuple_iterator(output_numpy=True, num_epochs=1))


def pixels(images_chw: np.ndarray) -> np.ndarray:
    """Undo Normalize/Rescale/HWC2CHW: back to uint8 N,H,W,3 pixels (exact for unresized images)."""
    x = images_chw.transpose(0, 2, 3, 1) * np.array(CIFAR10_STD) + np.array(CIFAR10_MEAN)
    return np.rint(x * 255.0).astype(np.uint8)


def normalise(images_hwc: np.ndarray) -> np.ndarray:
    """What the evaluation pipeline should produce, computed with numpy: N,3,H,W float32."""
    x = images_hwc.astype(np.float32) / 255.0
    x = (x - np.array(CIFAR10_MEAN, np.float32)) / np.array(CIFAR10_STD, np.float32)
    return x.transpose(0, 3, 1, 2)


# --------------------------------------------------------------------------- worker_count

def test_worker_count_is_capped_at_the_cores(monkeypatch):
    monkeypatch.setattr(pipeline, "usable_cores", lambda: 2)
    assert worker_count(8) == 2
    assert worker_count(2) == 2
    assert worker_count(1) == 1
    assert worker_count(None) == 1
    monkeypatch.setattr(pipeline, "usable_cores", lambda: 1)
    assert worker_count(None) == 1
    assert worker_count(4) == 1


@pytest.mark.parametrize("cores, auto", [(1, 1), (2, 1), (4, 1), (7, 1), (8, 2), (16, 4),
                                         (31, 7), (32, 8), (192, 8)])
def test_worker_count_auto_keeps_the_stages_within_the_cores(monkeypatch, cores, auto):
    monkeypatch.setattr(pipeline, "usable_cores", lambda: cores)
    assert worker_count(None) == auto
    assert auto * pipeline.STAGES <= max(cores, pipeline.STAGES)


def test_usable_cores_follow_the_affinity() -> None:
    import os
    assert pipeline.usable_cores() == len(os.sched_getaffinity(0))
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing to pin")
    # the same in a process pinned to one core (taskset's way)
    import subprocess
    import sys
    code = ("import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); "
            "import msresnet.data.pipeline as p; print(p.usable_cores(), p.worker_count(2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["1", "1"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_worker_count_rejects_non_positive_and_non_int(bad):
    with pytest.raises(PipelineError, match="num_workers"):
        worker_count(bad)


# --------------------------------------------------------------------------- argument errors

def test_missing_folder_names_the_folder(tmp_path):
    missing = tmp_path / "nowhere" / cifar10.FOLDER_NAME
    with pytest.raises(cifar10.DatasetError, match="nowhere"):
        create_dataset(missing)


def blank_folder(tmp_path, records: int):
    """A CIFAR-10 folder whose every file holds ``records`` all-zero records."""
    folder = tmp_path / cifar10.FOLDER_NAME
    folder.mkdir()
    (folder / "batches.meta.txt").write_text("\n".join(cifar10.CLASSES) + "\n")
    for name in (*cifar10.TRAIN_FILES, *cifar10.TEST_FILES):
        (folder / name).write_bytes(bytes(cifar10.RECORD_BYTES * records))
    return folder


def test_truncated_file_names_the_file(tmp_path):
    folder = blank_folder(tmp_path, 2)
    (folder / "data_batch_3.bin").write_bytes(bytes(cifar10.RECORD_BYTES + 7))
    with pytest.raises(cifar10.DatasetError, match="data_batch_3.bin"):
        create_dataset(folder)


def test_missing_data_says_which_command_makes_it(tmp_path):
    with pytest.raises(cifar10.DatasetError, match=r"the command `msresnet prepare` makes it"):
        create_dataset(tmp_path / cifar10.FOLDER_NAME)


def test_whole_records_but_not_10000_per_file_fail_before_mindspore(tmp_path):
    """MindSpore's reader would fail later with "Invalid cifar10 file ... re-download dataset"."""
    folder = blank_folder(tmp_path, 3)
    with pytest.raises(cifar10.DatasetError) as info:
        create_dataset(folder)
    assert str(info.value) == ("data_batch_1.bin: 3 records, MindSpore's Cifar10Dataset needs"
                               " exactly 10000 per file (a cut, or other data in the CIFAR-10"
                               f" layout?) (in {folder})")


def test_other_class_names_are_named_with_the_folder(tmp_path):
    folder = tmp_path / cifar10.FOLDER_NAME
    folder.mkdir()
    names = ["plane", *cifar10.CLASSES[1:]]
    (folder / "batches.meta.txt").write_text("\n".join(names) + "\n")
    for name in (*cifar10.TRAIN_FILES, *cifar10.TEST_FILES):
        (folder / name).write_bytes(bytes(cifar10.RECORD_BYTES * 3))
    with pytest.raises(cifar10.DatasetError,
                       match=r"^batches\.meta\.txt: class 0 is .plane., expected .airplane. .*"
                             rf"\(in {folder}\)$"):
        create_dataset(folder)


@needs_data
@pytest.mark.parametrize("kwargs, word", [
    ({"usage": "valid"}, "usage"),
    ({"batch_size": 0}, "batch_size"),
    ({"image_size": -3}, "image_size"),
    ({"num_samples": 0}, "num_samples"),
    ({"num_shards": 2}, "shard_id"),
    ({"num_shards": 2, "shard_id": 2}, "shard_id"),
    ({"num_workers": 0}, "num_workers"),
    ({"seed": -1}, "seed"),
])
def test_bad_arguments_name_the_argument(kwargs, word):
    with pytest.raises(PipelineError, match=word):
        create_dataset(DATA_DIR, **kwargs)


@pytest.mark.parametrize("kwargs, word", [
    ({"image_size": -3}, "image_size"), ({"num_samples": True}, "num_samples"),
    ({"shard_id": 0}, "num_shards and shard_id"), ({"num_shards": 2, "shard_id": 2}, "shard_id"),
    ({"seed": 1.5}, "seed"), ({"source": "tfrecord"}, "source"),
    ({"progressive": (24, 1)}, "whole fraction of image_size 32"),
    ({"progressive": (16, 0)}, "progressive epochs"),
])
def test_options_are_checked_when_made(kwargs, word):
    """No folder needed: the options are checked before any file is read."""
    with pytest.raises(PipelineError, match=word):
        pipeline.PipelineOptions(**kwargs)
    with pytest.raises(PipelineError, match=word):
        create_dataset("/nonexistent/cifar-10-batches-bin", **kwargs)


def test_the_keywords_are_the_options_and_a_misspelt_one_is_named():
    options = dataclasses.fields(pipeline.PipelineOptions)
    assert pipeline.OPTION_NAMES == tuple(option.name for option in options)
    assert {"training", "image_size", "indices", "checked"} <= set(pipeline.OPTION_NAMES)
    with pytest.raises(TypeError, match=r"keyword argument 'imagesize' \(it takes training, "):
        create_dataset("/nonexistent/cifar-10-batches-bin", "test", 8, imagesize=32)


# --------------------------------------------------------------------------- batches

@needs_data
def test_train_batch_shapes_and_dtypes():
    images, labels = first_batch(create_dataset(DATA_DIR, "train", 8, num_samples=16, seed=1))
    assert images.shape == (8, 3, 32, 32) and images.dtype == np.float32
    assert labels.shape == (8,) and labels.dtype == np.int32
    assert labels.min() >= 0 and labels.max() <= 9


@needs_data
def test_test_batch_is_the_file_normalised_in_order():
    """No augmentation and no shuffle for test: exactly numpy's normalisation of the records."""
    images, labels = first_batch(create_dataset(DATA_DIR, "test", 16))
    raw, raw_labels = cifar10.read_records(DATA_DIR / "test_batch.bin", 0, 16)
    assert images.shape == (16, 3, 32, 32) and images.dtype == np.float32
    assert labels.dtype == np.int32
    np.testing.assert_array_equal(labels, raw_labels)
    np.testing.assert_allclose(images, normalise(raw), atol=1e-5)


@needs_data
def test_image_size_224_resizes():
    images, _ = first_batch(create_dataset(DATA_DIR, "test", 2, image_size=224, num_samples=2))
    assert images.shape == (2, 3, 224, 224) and images.dtype == np.float32


@needs_data
def test_train_augmentation_is_a_padded_crop_maybe_flipped():
    """Each training image equals some 32x32 window of the zero-padded original, maybe mirrored."""
    augmented, labels = first_batch(
        create_dataset(DATA_DIR, "train", 16, shuffle=False, num_samples=16, seed=3))
    raw, raw_labels = cifar10.read_records(DATA_DIR / "data_batch_1.bin", 0, 16)
    np.testing.assert_array_equal(labels, raw_labels)
    shifted = flipped = 0
    for original, image in zip(raw, pixels(augmented)):
        padded = np.pad(original, ((4, 4), (4, 4), (0, 0)))
        windows = [(dy, dx, flip) for dy in range(9) for dx in range(9) for flip in (False, True)
                   if np.array_equal(image, (padded[dy:dy + 32, dx:dx + 32, :][:, ::-1]
                                             if flip else padded[dy:dy + 32, dx:dx + 32, :]))]
        assert windows, "a training image is not a crop/flip of its source image"
        shifted += all((dy, dx) != (4, 4) for dy, dx, _ in windows)
        flipped += all(flip for _, _, flip in windows)
    # 80 of 81 crop offsets move the image; half the images are mirrored.
    assert shifted >= 12, f"only {shifted} of 16 images were shifted by the crop"
    assert 2 <= flipped <= 14, f"{flipped} of 16 images were flipped"


@needs_data
def test_progressive_resizing_shrinks_the_first_epochs_by_area():
    """Epochs 1-2 come averaged down to 16x16 (the same batches, the same labels, each
    pixel the mean of a 2x2 block), epoch 3 at 32x32; a resumed pipeline that starts in
    epoch 2 (``set_init_step``) still shrinks it and stops after it."""
    def epochs(dataset, count, skipped=0):  # num_epochs counts the skipped ones too
        iterator = dataset.create_tuple_iterator(output_numpy=True, num_epochs=count + skipped)
        return [[(x, y) for x, y in iterator] for _ in range(count)]

    kwargs = dict(training=False, num_samples=16, seed=1)
    plain = epochs(create_dataset(DATA_DIR, "train", 8, **kwargs), 3)
    grown = epochs(create_dataset(DATA_DIR, "train", 8, progressive=(16, 2), **kwargs), 3)
    for epoch, (want, got) in enumerate(zip(plain, grown)):
        for (x, y), (small, labels) in zip(want, got):
            np.testing.assert_array_equal(labels, y)
            if epoch < 2:
                assert small.shape == (8, 3, 16, 16) and small.dtype == np.float32
                np.testing.assert_allclose(small[:, :, 3, 5], x[:, :, 6:8, 10:12].mean((2, 3)),
                                           rtol=1e-6, atol=1e-6)
            else:
                np.testing.assert_array_equal(small, x)
    resumed = create_dataset(DATA_DIR, "train", 8, progressive=(16, 2), **kwargs)
    resumed.set_init_step(2)  # two batches per epoch: the start of epoch 2
    second, third = epochs(resumed, 2, skipped=1)
    assert [x.shape[-1] for x, _ in second + third] == [16, 16, 32, 32]


def test_shrink_batch_needs_a_whole_factor():
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    np.testing.assert_array_equal(pipeline.shrink_batch(x, 2)[0, 0], [[2.5, 4.5], [10.5, 12.5]])
    with pytest.raises(PipelineError, match="4x4 images down to 3x3"):
        pipeline.shrink_batch(x, 3)


# --------------------------------------------------------------------------- sizes

@needs_data
def test_num_samples_and_drop_remainder():
    train = create_dataset(DATA_DIR, "train", 32, num_samples=100, seed=1)
    got = batches(train)
    assert train.get_dataset_size() == 3 == len(got)  # 100 = 3 * 32 + 4, last 4 dropped
    assert all(images.shape[0] == 32 for images, _ in got)

    test = create_dataset(DATA_DIR, "test", 32, num_samples=100)
    got = batches(test)
    assert test.get_dataset_size() == 4 == len(got)  # the last batch keeps the 4
    assert [images.shape[0] for images, _ in got] == [32, 32, 32, 4]


@needs_data
def test_full_sizes_without_limit():
    assert create_dataset(DATA_DIR, "train", 32).get_dataset_size() == 50_000 // 32
    assert create_dataset(DATA_DIR, "test", 32).get_dataset_size() == -(-10_000 // 32)


@needs_data
def test_shards_are_disjoint_and_cover_the_data():
    def fingerprints(shard_id):
        data = create_dataset(DATA_DIR, "test", 50, num_samples=200, num_shards=2,
                              shard_id=shard_id, shuffle=False)
        return [hashlib.sha1(image.tobytes()).hexdigest() + str(label)
                for images, labels in batches(data) for image, label in zip(pixels(images), labels)]

    shard0, shard1 = fingerprints(0), fingerprints(1)
    assert len(shard0) == len(shard1) == 200
    assert not set(shard0) & set(shard1)
    # Together the two shards are the first 400 test records (MindSpore deals them round-robin).
    raw, raw_labels = cifar10.read_records(DATA_DIR / "test_batch.bin", 0, 400)
    expected = {hashlib.sha1(image.tobytes()).hexdigest() + str(label)
                for image, label in zip(raw, raw_labels)}
    assert set(shard0) | set(shard1) == expected


# --------------------------------------------------------------------------- values

@needs_data
def test_normalisation_centres_the_test_images():
    data = create_dataset(DATA_DIR, "test", 100, num_samples=500)
    images = np.concatenate([images for images, _ in batches(data)])
    assert images.shape == (500, 3, 32, 32)
    means = images.mean(axis=(0, 2, 3))
    stds = images.std(axis=(0, 2, 3))
    assert np.all(np.abs(means) < 0.1), means
    # The repo's std constants are ~0.2 while pixels vary by ~0.25: std lands near 1.2, not 1.
    assert np.all((stds > 1.05) & (stds < 1.4)), stds


@needs_data
def test_same_seed_same_batches_other_seed_other_batches():
    def first(seed):
        return first_batch(create_dataset(DATA_DIR, "train", 32, num_samples=256, seed=seed))

    a_images, a_labels = first(7)
    b_images, b_labels = first(7)
    np.testing.assert_array_equal(a_images, b_images)
    np.testing.assert_array_equal(a_labels, b_labels)
    c_images, _ = first(8)
    assert not np.array_equal(a_images, c_images)


# ---------------------------------------------------------------- three ways to feed (chapter 9)

@pytest.fixture(scope="module")
def test_split_mindrecord(tmp_path_factory) -> Path:
    from msresnet.data.mindrecord import convert
    out = tmp_path_factory.mktemp("mindrecord")
    convert(DATA_DIR, out, "test")
    return out


@needs_data
def test_three_sources_give_the_same_batches(test_split_mindrecord: Path) -> None:
    """Unshuffled, the binary files, the MindRecord file and the in-memory arrays give
    the same normalised images and labels, in the same order."""
    got = {}
    for source in pipeline.SOURCES:
        data = create_dataset(DATA_DIR, "test", 50, num_samples=300, source=source,
                              mindrecord_dir=test_split_mindrecord)
        got[source] = batches(data)
    reference = got["binary"]
    assert len(reference) == 6
    for source in ("mindrecord", "numpy"):
        assert len(got[source]) == len(reference)
        for (images, labels), (want_images, want_labels) in zip(got[source], reference):
            assert labels.dtype == np.int32
            assert np.array_equal(images, want_images), source
            assert np.array_equal(labels, want_labels), source


@needs_data
def test_sources_shard_and_augment_alike(test_split_mindrecord: Path) -> None:
    for source in pipeline.SOURCES:
        shards = [batches(create_dataset(DATA_DIR, "test", 20, training=True, num_samples=60,
                                         num_shards=2, shard_id=i, seed=3, source=source,
                                         mindrecord_dir=test_split_mindrecord))
                  for i in (0, 1)]
        for shard in shards:
            assert sum(len(labels) for _, labels in shard) == 60, source
            assert shard[0][0].shape == (20, 3, 32, 32)


@needs_data
def test_missing_mindrecord_file_is_named(tmp_path: Path) -> None:
    from msresnet.data.mindrecord import MindRecordError
    with pytest.raises(MindRecordError, match="cifar10_test.mindrecord: no such file"):
        create_dataset(DATA_DIR, "test", 10, source="mindrecord", mindrecord_dir=tmp_path)


def test_unknown_source_is_named() -> None:
    with pytest.raises(PipelineError, match="source must be one of .* got 'tfrecord'"):
        create_dataset(DATA_DIR, "test", 10, source="tfrecord")


# --------------------------------------------------------------------------- held-out split

@needs_data
def test_hold_out_is_balanced_disjoint_and_fixed_by_the_seed():
    train, valid = splits.hold_out(DATA_DIR, 5000, seed=1)
    labels = splits.training_records(DATA_DIR)[:, 0]
    assert len(valid) == 5000 and len(train) == 45_000
    assert np.intersect1d(train, valid).size == 0
    assert np.array_equal(np.union1d(train, valid), np.arange(50_000))
    assert np.bincount(labels[valid], minlength=10).tolist() == [500] * 10
    again_train, again_valid = splits.hold_out(DATA_DIR, 5000, seed=1)
    assert np.array_equal(valid, again_valid) and np.array_equal(train, again_train)
    _, other = splits.hold_out(DATA_DIR, 5000, seed=2)
    assert not np.array_equal(valid, other)
    _, odd = splits.hold_out(DATA_DIR, 13, seed=1)
    assert np.bincount(labels[odd], minlength=10).tolist() == [2, 2, 2] + [1] * 7


@needs_data
@pytest.mark.parametrize("count", [0, 50_000, -1])
def test_hold_out_refuses_a_count_that_leaves_nothing(count):
    with pytest.raises(cifar10.DatasetError, match="valid_split must be from 1 to 49999"):
        splits.hold_out(DATA_DIR, count, seed=1)


@needs_data
def test_validation_pipeline_reads_exactly_the_held_out_images():
    _, valid = splits.hold_out(DATA_DIR, 200, seed=3)
    data = create_dataset(DATA_DIR, "train", 64, training=False, indices=valid)
    images, labels = zip(*batches(data))
    records = splits.training_records(DATA_DIR)[valid]
    expected = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    assert np.array_equal(np.concatenate(labels), records[:, 0])
    assert np.array_equal(pixels(np.concatenate(images)), expected)


@needs_data
def test_training_pipeline_never_reads_a_held_out_image():
    train, valid = splits.hold_out(DATA_DIR, 49_800, seed=3)  # 200 left to train on
    data = create_dataset(DATA_DIR, "train", 50, training=False, shuffle=True, seed=5,
                          indices=train)
    records = splits.training_records(DATA_DIR)
    seen = {hashlib.sha256(img.tobytes()).hexdigest()
            for batch, _ in batches(data) for img in pixels(batch)}
    wanted = {hashlib.sha256(r[1:].reshape(3, 32, 32).transpose(1, 2, 0).tobytes()).hexdigest()
              for r in records[train]}
    assert seen == wanted  # every training image once, none of the held-out ones
    first = [b[1].tolist() for b in batches(create_dataset(
        DATA_DIR, "train", 50, training=False, shuffle=True, seed=5, indices=train))]
    again = [b[1].tolist() for b in batches(create_dataset(
        DATA_DIR, "train", 50, training=False, shuffle=True, seed=5, indices=train))]
    assert first == again  # the seed fixes the shuffled order


@needs_data
def test_sharded_subset_gives_disjoint_equal_shards():
    records = splits.training_records(DATA_DIR)
    indices = np.arange(5, 108)  # 103 records over 4 shards: 25 each, 3 left out
    seen = []
    for shard in range(4):
        data = create_dataset(DATA_DIR, "train", 25, training=False, indices=indices,
                              num_shards=4, shard_id=shard)
        (images, _), = batches(data)
        seen.append([img.tobytes() for img in pixels(images)])
    expected = [[records[i, 1:].reshape(3, 32, 32).transpose(1, 2, 0).tobytes()
                 for i in indices[k::4][:25]] for k in range(4)]
    assert seen == expected
    with pytest.raises(PipelineError, match="indices is empty"):
        pipeline.subset_sampler([], shuffle=False)
    with pytest.raises(PipelineError, match="cannot fill 4 shards"):
        pipeline.subset_sampler([1, 2, 3], shuffle=False, num_shards=4, shard_id=0)
