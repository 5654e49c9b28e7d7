"""The top-5 classes of any picture: what ``msresnet predict MODEL IMAGE...`` prints
(its command line is :mod:`msresnet.commands.predict`).

MODEL is what a run or chapter 8 leaves behind: a checkpoint (``.ckpt``, read with
the network its run folder's ``config.yaml`` describes, or ``--profile``), a MINDIR
(``.mindir``, run by MindSpore's ``GraphCell``) or an ONNX graph (``.onnx``, run by
onnxruntime, with no MindSpore at all). Every IMAGE goes through
:func:`msresnet.data.images.model_input` (the largest centred square, resized to the
model's input, then the evaluation pipeline's arithmetic), so a photo of any size
and any format Pillow reads can be classified. Each mode reaches RGB with its own
arithmetic (:func:`msresnet.data.images.to_rgb`: 16-bit greys scaled, transparent
pixels composited on ``--background``, white unless told, or refused with
``--background refuse``); ``--verbose`` prints the conversion each picture got.

Every picture is read before the model loads. A picture that cannot be used
(missing, a folder, not an image, transparency refused) gets one line on stderr
that names it, the others are still classified, and the exit status is then 2;
when no picture is usable the model is not loaded at all.

Exported graphs have a fixed batch dimension unless it was made symbolic (chapter 8):
images are then fed in batches of exactly that size, the last one padded with
copies of its last image whose outputs are dropped. A model that does not take
``(N, 3, S, S)`` float32 and give ``(N, 10)`` is refused with one line that names
the file and both shapes; so are a missing, unreadable or corrupt model and a
file that is not a picture. This module imports MindSpore only to read a
checkpoint or a MINDIR, inside the function that does it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from msresnet.compile_cache import refuse as refuse_compile_cache
from msresnet.data.cifar10 import CLASSES
from msresnet.data.images import Color, ImageError, Picture, model_input, open_picture, read_image

SUFFIXES = (".ckpt", ".mindir", ".onnx")
TOP_K = 5


class ModelError(ValueError):
    """A model file cannot be used for prediction; the message names the file."""


@dataclass
class Predictor:
    """A loaded model: ``run`` maps an (N, 3, S, S) float32 batch to (N, classes) logits.

    ``batch_size`` is the batch the graph was exported for (None: any batch).
    """

    path: Path
    kind: str
    image_size: int
    batch_size: int | None
    run: Callable[[np.ndarray], np.ndarray]

    def logits(self, inputs: np.ndarray) -> np.ndarray:
        """Logits for any number of images, fed in batches the model accepts."""
        if self.batch_size is None:
            return np.asarray(self.run(inputs))
        outputs = []
        for start in range(0, len(inputs), self.batch_size):
            chunk = inputs[start:start + self.batch_size]
            missing = self.batch_size - len(chunk)
            if missing:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], missing, axis=0)])
            outputs.append(np.asarray(self.run(chunk))[:self.batch_size - missing])
        return np.concatenate(outputs)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Class probabilities from logits, row by row (numerically stable)."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def top_k(probabilities: np.ndarray, k: int = TOP_K) -> list[tuple[str, float]]:
    """The ``k`` most likely classes of one image, most likely first."""
    order = np.argsort(-probabilities, kind="stable")[:k]
    return [(CLASSES[i], float(probabilities[i])) for i in order]


def _check_io(path: Path, input_shape: Sequence[object], output_shape: Sequence[object] | None,
              ) -> tuple[int, int | None]:
    """(image size, fixed batch or None) from the graph's input shape, or ModelError."""
    dims = list(input_shape)
    fixed = [d if isinstance(d, int) and d > 0 else None for d in dims]
    if len(dims) != 4 or fixed[1] != 3 or fixed[2] is None or fixed[2] != fixed[3]:
        raise ModelError(f"{path}: the model takes input of shape {tuple(dims)}; "
                         f"predict needs (N, 3, S, S) images")
    if output_shape is not None:
        out = list(output_shape)
        if len(out) != 2 or (isinstance(out[1], int) and out[1] != len(CLASSES)):
            raise ModelError(f"{path}: the model gives output of shape {tuple(out)}; "
                             f"predict needs (N, {len(CLASSES)}) logits of CIFAR-10's classes")
    return int(fixed[2]), fixed[0]


def _onnx(path: Path) -> Predictor:
    from msresnet.deploy.onnx_session import cpu_session

    try:
        session = cpu_session(path)
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own classes
        reason = " ".join(str(err).split())[:200]
        raise ModelError(f"{path}: not an ONNX model onnxruntime can load ({reason})") from None
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1 or inputs[0].type != "tensor(float)":
        raise ModelError(f"{path}: the model takes {[(i.name, i.type) for i in inputs]}; "
                         "predict needs one float32 image tensor")
    size, batch = _check_io(path, inputs[0].shape, outputs[0].shape)
    name = inputs[0].name

    def run(batch_images: np.ndarray) -> np.ndarray:
        return session.run(None, {name: batch_images})[0]

    return Predictor(path, "ONNX (onnxruntime)", size, batch, run)


def mindir_input_shape(path: str | os.PathLike[str]) -> tuple[int, ...]:
    """The input shape recorded in a MINDIR file (MindSpore's own protobuf schema)."""
    from mindspore.train import mind_ir_pb2

    model = mind_ir_pb2.ModelProto()
    model.ParseFromString(Path(path).read_bytes())
    if len(model.graph.input) != 1 or not model.graph.input[0].tensor:
        raise ModelError(f"{path}: the MINDIR graph has {len(model.graph.input)} inputs; "
                         "predict needs one image tensor")
    return tuple(int(d) for d in model.graph.input[0].tensor[0].dims)


def _mindir(path: Path) -> Predictor:
    import msresnet  # noqa: F401 - the CPU setting before MindSpore runs anything
    import mindspore as ms
    from mindspore import nn

    refuse_compile_cache()
    try:
        shape = mindir_input_shape(path)
        graph = nn.GraphCell(ms.load(str(path)))
    except ModelError:
        raise
    except Exception as err:  # noqa: BLE001 - protobuf and MindSpore raise their own classes
        reason = " ".join(str(err).split())[:200]
        raise ModelError(f"{path}: not a MINDIR file MindSpore can load ({reason})") from None
    size, batch = _check_io(path, shape, None)

    def run(batch_images: np.ndarray) -> np.ndarray:
        return graph(ms.Tensor(batch_images)).asnumpy()

    return Predictor(path, "MINDIR (GraphCell)", size, batch, run)


def _checkpoint(path: Path, config_source: str | None) -> Predictor:
    from msresnet.deploy.checkpoint_config import ExportError, run_config

    try:
        config = run_config(path, config_source)  # no config: one line before MindSpore loads
    except ExportError as err:
        raise ModelError(str(err)) from None
    import msresnet  # noqa: F401 - the CPU setting before MindSpore runs anything
    import mindspore as ms

    from msresnet.training.checkpoints import CheckpointError
    from msresnet.deploy.export import network_for

    try:
        # graph mode, on MindSpore's default device (the CPU here); the device is
        # not set, since a process that already ran MindSpore may not change it
        ms.set_context(mode=ms.GRAPH_MODE)
        net = network_for(path, config)
    except CheckpointError as err:
        raise ModelError(str(err)) from None
    source = config_source or f"{path.parent.name}/config.yaml"

    def run(batch_images: np.ndarray) -> np.ndarray:
        return net(ms.Tensor(batch_images)).asnumpy()

    return Predictor(path, f"checkpoint, network from {source}", config.image_size, None, run)


def open_model(path: str | os.PathLike[str], config: str | None = None) -> Predictor:
    """Load a ``.ckpt``, ``.mindir`` or ``.onnx`` model for prediction, or raise ModelError."""
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise ModelError(f"{path}: unknown model type {path.suffix or '(no suffix)'!r}; "
                         f"expected one of {', '.join(SUFFIXES)}")
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    if path.suffix == ".onnx":
        return _onnx(path)
    if path.suffix == ".mindir":
        return _mindir(path)
    return _checkpoint(path, config)


def predict(model: Predictor, images: Sequence[str | os.PathLike[str] | Picture],
            k: int = TOP_K) -> list[list[tuple[str, float]]]:
    """Top-``k`` (class, probability) of every image (a file, or a :class:`Picture` already
    read), in order."""
    pictures = [p.image if isinstance(p, Picture) else read_image(p) for p in images]
    inputs = np.stack([model_input(picture, model.image_size) for picture in pictures])
    probabilities = softmax(model.logits(inputs).astype(np.float64))
    return [top_k(row, k) for row in probabilities]


REFUSE = "refuse"


def background_colour(text: str) -> Color | None:
    """``--background``'s value: a colour Pillow knows (``white``, ``#808080``...) or
    ``refuse`` (None: pictures with transparent pixels are refused); ValueError otherwise."""
    from PIL import ImageColor

    if text == REFUSE:
        return None
    red, green, blue = ImageColor.getrgb(text)[:3]
    return red, green, blue


def read_pictures(files: Sequence[str], background: Color | None,
                  report: Callable[[str], None]) -> list[tuple[str, Picture]]:
    """The usable pictures among ``files``, in order; each unusable one is ``report``ed
    (its one line) and left out."""
    usable = []
    for file in files:
        try:
            usable.append((file, open_picture(file, background)))
        except ImageError as err:
            report(str(err))
    return usable
