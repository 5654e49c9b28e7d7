"""From a swept checkpoint to deployable graphs: MINDIR, ONNX, and ONNX quantized to INT8.

Chapter 8 teaches each step in its cells; this module is the same steps as
functions, for ``msresnet export`` (which also rebuilds the model the
book's in-browser page runs) and for the tests. What the steps are for:

* :func:`network_for` builds the network the checkpoint's run recorded in its
  ``config.yaml`` (stem, classes) and loads the weights strictly, in evaluation
  mode: an export from training mode would freeze batch statistics instead of
  the moving averages, and a half-loaded network exports random weights.
* :func:`export_graph` calls ``mindspore.export`` with a zero tensor of the shape to
  serve: the graph records that shape (batch included).
* :func:`make_batch_dynamic` renames the ONNX graph's batch dimension to a symbol,
  which is valid for this network because no operator of its graph fixes the batch
  (``Flatten``, not a ``Reshape`` to a stored shape); :func:`operator_counts` is the
  evidence.
* :func:`quantize_int8` is onnxruntime's static quantization (weights per output
  channel, activations per tensor, QDQ format) calibrated on training images; QDQ
  needs opset 13, MindSpore writes opset 11, so the graph is converted first.
* :func:`unsigned_weights` stores those int8 weights as uint8 with zero point 128:
  the same numbers, but a graph whose answer does not depend on the CPU. With
  uint8 activations and int8 weights (U8S8) onnxruntime's x86 kernels multiply with
  ``VPMADDUBSW`` on CPUs without VNNI, which saturates each sum of two products at
  16 bits; CPUs with VNNI (and WebAssembly) compute exactly. The reference model
  lost 2.4 points of top-1 that way on an AVX2-only host (62.37 % against 64.81 %).
  uint8 by uint8 (U8U8) is computed without saturation on every ISA, as
  onnxruntime's quantization guide advises for such an accuracy drop.
* :func:`int8_test` measures the served INT8 graph on every test image with
  onnxruntime's CPU kernels and records on which CPU: the figure the in-browser
  page quotes, beside the checkpoint's own.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn

from msresnet.atomic import write_json
from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.training.checkpoints import BEST_CKPT, BEST_JSON, load_strict
from msresnet.config.profile import Config
from msresnet.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD, CLASSES
from msresnet.data.download import sha256  # also imported from here by the tests
from msresnet.training.selection import read_test
from msresnet.training.factories import make_network
from msresnet.config.run import with_data_dir
from msresnet.deploy.checkpoint_config import EXPORT_RECORD, ExportError, run_config

FORMATS = {"MINDIR": ".mindir", "ONNX": ".onnx"}
ONNX_QDQ_OPSET = 13  # DequantizeLinear's per-channel "axis" attribute needs opset 13
BATCH_SYMBOL = "batch"


def input_record(image_size: int) -> dict[str, Any]:
    """model.json's ``input``: the graph's input name and shape, and what turns a picture
    into it (CIFAR-10's class names in output order, the per-channel mean and std of
    :func:`msresnet.data.images.normalize`), so the in-browser page reads them here
    instead of keeping a copy of its own."""
    return {"name": "x", "shape": [BATCH_SYMBOL, 3, image_size, image_size],
            "classes": list(CLASSES), "mean": list(CIFAR10_MEAN), "std": list(CIFAR10_STD)}


def network_for(checkpoint: str | os.PathLike[str], config: Config) -> nn.Cell:
    """ResNet50 as ``config`` describes it, the checkpoint loaded strictly, in evaluation mode.
    Export and prediction both start here, so MindSpore's compile cache is refused here,
    before the weights load (:mod:`msresnet.compile_cache`)."""
    refuse_compile_cache()
    net = make_network(config)
    load_strict(net, checkpoint)
    net.set_train(False)
    return net


def export_graph(net: nn.Cell, path: str | os.PathLike[str], batch_size: int, image_size: int,
                 **kwargs: Any) -> Path:
    """``mindspore.export`` of ``net`` for (batch, 3, size, size) float32 inputs to ``path``.

    The format follows the suffix (``.mindir`` or ``.onnx``); ``kwargs`` go to
    ``mindspore.export`` (``enc_key``, ``dataset``...). MindSpore writes the file
    read-only; an existing file of that name is replaced. The folder keeps its mode
    (MindSpore sets it to 700).
    """
    path = Path(path)
    formats = {suffix: name for name, suffix in FORMATS.items()}
    if path.suffix not in formats:
        raise ExportError(f"{path}: the suffix must be one of {', '.join(formats)}")
    if batch_size < 1 or image_size < 1:
        raise ExportError(f"batch_size and image_size must be >= 1, got {batch_size}, {image_size}")
    refuse_compile_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o600)
        path.unlink()
    example = ms.Tensor(np.zeros((batch_size, 3, image_size, image_size), np.float32))
    mode = path.parent.stat().st_mode & 0o7777
    try:
        ms.export(net, example, file_name=str(path.with_suffix("")),
                  file_format=formats[path.suffix], **kwargs)
    finally:  # mindspore.export makes the folder 700: the folder's owner decides its mode
        if path.parent.stat().st_mode & 0o7777 != mode:
            path.parent.chmod(mode)
    if not path.is_file():
        raise ExportError(f"mindspore.export did not write {path}")
    return path


def operator_counts(onnx_path: str | os.PathLike[str]) -> dict[str, int]:
    """How many nodes of each operator type the ONNX graph has, most frequent first."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return dict(Counter(node.op_type for node in model.graph.node).most_common())


def make_batch_dynamic(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """A copy of the ONNX graph whose first input and output dimension is a symbol."""
    import onnx

    model = onnx.load(str(src))
    fixed_reshapes = [n.name for n in model.graph.node if n.op_type == "Reshape"]
    if fixed_reshapes:
        raise ExportError(f"{src}: Reshape nodes may store the batch size ({fixed_reshapes[:3]}); "
                          "export the graph for the batch you serve instead")
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = BATCH_SYMBOL
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return Path(dst)


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol over a stream of input batches."""

    def __init__(self, input_name: str, batches: Iterable[np.ndarray]) -> None:
        self.input_name = input_name
        self.batches: Iterator[np.ndarray] = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self.batches, None)
        return None if batch is None else {self.input_name: batch}


def quantize_int8(src: str | os.PathLike[str], dst: str | os.PathLike[str],
                  calibration: Iterable[np.ndarray], per_channel: bool = True) -> Path:
    """Static INT8 quantization (QDQ) of an fp32 ONNX graph, calibrated on ``calibration``."""
    import tempfile

    import onnx
    from onnx import version_converter
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        model = onnx.load(str(src))
        input_name = model.graph.input[0].name
        upgraded = Path(tmp) / "opset13.onnx"
        onnx.save(version_converter.convert_version(model, ONNX_QDQ_OPSET), str(upgraded))
        prepared = Path(tmp) / "prepared.onnx"
        quant_pre_process(str(upgraded), str(prepared))
        quantize_static(str(prepared), str(dst), _Calibration(input_name, calibration),
                        quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
    return Path(dst)


def unsigned_weights(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """A copy of a QDQ graph whose int8 weights are uint8, shifted by 128 with their zero
    points: every dequantized weight is the same number (see the module docstring for
    why). Activations (already uint8) and int32 biases are left as they are."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    shifted: set[str] = set()
    for node in model.graph.node:
        weight = initializers.get(node.input[0]) if node.op_type == "DequantizeLinear" else None
        if weight is None or weight.data_type != onnx.TensorProto.INT8 or len(node.input) < 3:
            continue
        if node.input[0] in shifted or initializers[node.input[2]].name in shifted:
            raise ExportError(f"{src}: {node.name} shares its weight or zero point with another "
                              "node; cannot shift it once for both")
        for name in (node.input[0], node.input[2]):
            values = numpy_helper.to_array(initializers[name]).astype(np.int16) + 128
            initializers[name].CopyFrom(numpy_helper.from_array(values.astype(np.uint8), name))
            shifted.add(name)
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return Path(dst)


def weight_types(onnx_path: str | os.PathLike[str]) -> dict[str, int]:
    """How many quantized weights (DequantizeLinear of a constant) have each element type."""
    import onnx

    model = onnx.load(str(onnx_path))
    constants = {tensor.name: tensor.data_type for tensor in model.graph.initializer}
    kinds = Counter(onnx.TensorProto.DataType.Name(constants[node.input[0]]).lower()
                    for node in model.graph.node
                    if node.op_type == "DequantizeLinear" and node.input[0] in constants)
    return dict(kinds.most_common())


def host_isa() -> str:
    """The CPU and the integer dot-product instructions onnxruntime's x86 kernels can use."""
    from msresnet.cpu_speed import cpu_flags, cpu_model

    flags = cpu_flags()
    if "avx512_vnni" in flags:
        isa = "AVX-512 VNNI"
    elif "avx_vnni" in flags:
        isa = "AVX-VNNI"
    else:
        isa = "AVX2, no VNNI" if "avx2" in flags else "no AVX2"
    return f"{cpu_model()} ({isa})"


def int8_test(model: str | os.PathLike[str], data_dir: str | os.PathLike[str],
              batch: int = 1000) -> dict[str, Any]:
    """Top-1 and top-5 of an ONNX model on every test image, with onnxruntime's CPU
    kernels, its top-1 per class (the classify page shows which classes it confuses),
    and the images, runtime and CPU they were measured with."""
    import onnxruntime as ort

    from msresnet.data.cifar10 import CLASSES, TEST_FILES, read_records
    from msresnet.data.identity import evaluation_images
    from msresnet.data.images import normalize
    from msresnet.deploy.onnx_session import cpu_session
    from msresnet.training.factories import dataset_folder

    folder = dataset_folder(data_dir)
    images, labels = read_records(folder / TEST_FILES[0])
    session = cpu_session(model)
    name = session.get_inputs()[0].name
    ranks = []
    for start in range(0, len(images), batch):
        inputs = np.stack([normalize(image) for image in images[start:start + batch]])
        logits = session.run(None, {name: inputs})[0]
        label = labels[start:start + batch].astype(np.int64)[:, None]
        # the label's place when sorted as predict ranks (a tie goes to the lower class
        # index, as argmax does): INT8 logits lie on a grid, so ties are common
        mine = np.take_along_axis(logits, label, axis=1)
        before = (logits > mine) | ((logits == mine) & (np.arange(logits.shape[1]) < label))
        ranks.append(before.sum(axis=1))
    rank = np.concatenate(ranks)
    identity = evaluation_images(folder)
    per_class = {name: round(float((rank[labels == index] == 0).mean()), 4)
                 for index, name in enumerate(CLASSES)}
    return {"of": Path(model).name, "top1": round(float((rank == 0).mean()), 4),
            "top5": round(float((rank < 5).mean()), 4), "per_class_top1": per_class,
            "images": identity["images"],
            "sha256": identity["sha256"], "runtime": f"onnxruntime {ort.__version__} (CPU)",
            "cpu": host_isa()}


def calibration_batches(data_dir: str | os.PathLike[str], images: int, batch_size: int,
                        image_size: int) -> list[np.ndarray]:
    """The first ``images`` training images through the evaluation transforms, batched."""
    from msresnet.training.factories import dataset_folder
    from msresnet.data.pipeline import create_dataset

    dataset = create_dataset(dataset_folder(data_dir), "train", batch_size, training=False,
                             image_size=image_size, num_samples=images, shuffle=False)
    return [image.asnumpy() for image, _ in dataset.create_tuple_iterator(num_epochs=1)]


def write_samples(data_dir: str | os.PathLike[str], out: str | os.PathLike[str],
                  per_class: int = 1) -> list[dict[str, Any]]:
    """The first ``per_class`` test images of every class as PNGs, and ``samples.json``."""
    from PIL import Image

    from msresnet.data.cifar10 import CLASSES, read_records
    from msresnet.training.factories import dataset_folder

    images, labels = read_records(dataset_folder(data_dir) / "test_batch.bin")
    folder = Path(out) / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for label, name in enumerate(CLASSES):
        for record in np.flatnonzero(labels == label)[:per_class]:
            file = folder / f"{name}-{int(record)}.png"
            Image.fromarray(images[record]).save(file, optimize=True)
            samples.append({"file": f"samples/{file.name}", "label": name,
                            "test_batch_record": int(record)})
    write_json(Path(out) / "samples.json", samples)
    return samples


QUANTIZATION = {"format": "QDQ",
                "weights": "int8 per channel, stored as uint8 with zero point 128 (U8U8)",
                "activations": "uint8 per tensor"}


def checkpoint_test(checkpoint: Path) -> dict[str, Any] | None:
    """The test score of the checkpoint itself (the run's test.json), before quantization:
    a run that chose on held-out images scored its choice on the test set once."""
    tested = read_test(checkpoint.parent)
    if tested is None or checkpoint.name != BEST_CKPT:
        return None
    return {"of": f"{checkpoint.name} (float32, MindSpore)", "top1": tested["chosen"]["top1"],
            "top5": tested["chosen"]["top5"], "images": tested["evaluated_on"]["images"],
            "sha256": tested["evaluated_on"]["sha256"]}


def export_for_browser(checkpoint: str | os.PathLike[str], out: str | os.PathLike[str], *,
                       data_dir: str | None = None, calibration_images: int = 512,
                       config: str | None = None, command: str = "") -> dict[str, Any]:
    """The in-browser page's model: INT8 ONNX with a symbolic batch, and its provenance,
    with the test score of the checkpoint and that of the INT8 model as served."""
    import tempfile

    checkpoint = Path(checkpoint)
    run = with_data_dir(run_config(checkpoint, config), data_dir)
    net = network_for(checkpoint, run)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    batch = 32
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_graph(net, Path(tmp) / "model.onnx", batch, run.image_size)
        dynamic = make_batch_dynamic(fp32, Path(tmp) / "dynamic.onnx")
        calibration = calibration_batches(run.data_dir, calibration_images, batch,
                                          run.image_size)
        signed = quantize_int8(dynamic, Path(tmp) / "signed.onnx", calibration)
        model = unsigned_weights(signed, out / "model.int8.onnx")
    best_json = checkpoint.parent / BEST_JSON
    best = json.loads(best_json.read_text()) if best_json.is_file() else {}
    if isinstance(best.get("evaluated_on"), dict):  # the folder is this machine's own
        best["evaluated_on"] = {k: v for k, v in best["evaluated_on"].items() if k != "folder"}
    record = {
        "model": model.name,
        "bytes": model.stat().st_size,
        "sha256": sha256(model),
        "checkpoint": checkpoint.name,
        "checkpoint_sha256": sha256(checkpoint),
        "run": {"stem": run.stem, "image_size": run.image_size, "epoch_size": run.epoch_size,
                "batch_size": run.batch_size, "lr_schedule": run.lr_schedule,
                "lr_max": run.lr_max},
        "best": {key: best[key] for key in ("source", "epoch", "top1", "top5", "selected_by",
                                            "evaluated_on") if key in best},
        "test": checkpoint_test(checkpoint),
        "int8_test": int8_test(model, run.data_dir),
        "quantization": {**QUANTIZATION, "calibration_images": calibration_images},
        "input": input_record(run.image_size),
        "command": command,
    }
    write_json(out / "model.json", record)
    write_samples(run.data_dir, out)
    return record


WRITER = "msresnet export"


def _export_record(folder: Path) -> dict[str, Any] | None:
    """``folder``'s :data:`EXPORT_RECORD` when this command wrote it, else None."""
    try:
        record = json.loads((folder / EXPORT_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ours = isinstance(record, dict) and record.get("written_by") == WRITER
    return record if ours and isinstance(record.get("files"), dict) else None


def foreign_files(output_dir: str | os.PathLike[str]) -> list[Path]:
    """The files in ``output_dir`` that an export would replace but did not write: a
    ``resnet50.onnx`` or ``.mindir`` that :data:`EXPORT_RECORD` does not list with its
    content (someone else's model, or one edited since), or a record of another program."""
    folder = Path(output_dir)
    record = _export_record(folder)
    found = [folder / EXPORT_RECORD] if record is None and (folder / EXPORT_RECORD).exists() else []
    for name in (f"resnet50{suffix}" for suffix in FORMATS.values()):
        path = folder / name
        if path.exists() or path.is_symlink():
            ours = record is not None and path.is_file() and not path.is_symlink()
            if not (ours and record["files"].get(name) == sha256(path)):
                found.append(path)
    return found


def export_checkpoint(checkpoint: str | os.PathLike[str], output_dir: str | os.PathLike[str],
                      batch_size: int = 1, config: str | None = None, *,
                      force: bool = False) -> list[Path]:
    """``msresnet export CKPT --output_dir DIR``: the network of ``checkpoint``'s run (or
    ``config``) with its weights, as MINDIR and ONNX graphs for ``batch_size`` images;
    returns the files written. Files of those names that an earlier export did not
    write (:func:`foreign_files`) are refused before any work unless ``force``: they may
    be another program's only copy."""
    run = run_config(checkpoint, config)
    folder = Path(output_dir)
    foreign = [] if force else foreign_files(folder)
    if foreign:
        raise ExportError(f"{', '.join(map(str, foreign))}: not written by msresnet export "
                          f"(not in {folder / EXPORT_RECORD}); pass --force to replace "
                          f"{'them' if len(foreign) > 1 else 'it'}")
    net = network_for(checkpoint, run)
    record = {"written_by": WRITER, "checkpoint": str(checkpoint),
              "checkpoint_sha256": sha256(checkpoint), "batch_size": batch_size,
              "image_size": run.image_size, "files": {}}
    written = []
    for suffix in FORMATS.values():
        path = export_graph(net, folder / f"resnet50{suffix}", batch_size, run.image_size)
        record["files"][path.name] = sha256(path)  # recorded as each lands: a crash between
        write_json(folder / EXPORT_RECORD, record)  # the two leaves the first one ours
        written.append(path)
    return written
