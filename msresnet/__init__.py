"""Shared code of the book *ResNet50 on CIFAR-10 with MindSpore*.

Importing the package first applies the CPU speed setting (see
:mod:`msresnet.cpu_speed`): it caps oneDNN's instruction set through an environment
variable, which MindSpore reads once, when its CPU kernels first load. So nothing
may import MindSpore before :mod:`msresnet.cpu_speed` has acted. Inside the
package this holds by construction (importing any ``msresnet.X`` runs this file
first, and it imports only ``cpu_speed``); in a notebook or script it is why
``import msresnet`` comes before ``import mindspore``.

The modules are flat, in layers: at import time a module imports from its own
layer or from the ones listed before it; a tool may import a later layer inside
the function that needs it (``job`` runs the training, ``bench`` builds the
model). ``tests/test_layers.py`` reads every module's imports and fails on an
import cycle (lazy imports inside functions included), on a MindSpore-free
module that imports MindSpore at import time (directly or through another
``msresnet`` module), and on a module this docstring does not name.

MindSpore-free at import (standard library, numpy, yaml; listed in
:data:`MINDSPORE_FREE_MODULES`), usable before the CPU setting and in processes
that never train:

* basics: ``cpu_speed`` (the ISA setting), ``paths`` (where things are, the local
  mirror), ``atomic`` (crash-safe file writes), ``cli`` (one-line errors of the
  command-line tools), ``download`` (resumable, checksummed HTTP), ``lr_schedule``,
  ``config`` (profiles and overrides), ``cifar10`` (the binary format, preparing
  the data, the held-out validation split), ``images`` (any picture to the network's input, the evaluation
  pipeline's arithmetic), ``distributed`` (rank and group size; imports MindSpore's
  communication module only inside its functions), ``notebook`` (the chapters'
  parameter pattern and metric records);
* tools that run MindSpore in other processes, or only inside a function:
  ``prepare``, ``launch`` (msrun), ``reproduce`` and ``results_page`` (papermill
  runs of the chapters and the results page), ``bench`` (the training step),
  ``pipeline_bench`` (the data pipeline, alone and in training), ``lab`` (JupyterLab),
  ``predict`` (top-5 classes of pictures; an ONNX model needs onnxruntime only,
  a checkpoint or MINDIR loads MindSpore inside the function), ``ablation`` (the
  budget ablation: short training runs in other processes, scored inside a function);
* object storage: ``staging``, ``local_s3``, ``sync``, ``job`` (a ModelArts-style
  job; it imports the training only when it runs).

MindSpore at top level, in the order they build on each other:

* ``losses``, ``flops``, ``model`` (ResNet50), ``convert_mindrecord`` (CIFAR-10 to
  MindRecord, ``mindspore.mindrecord``), ``pipeline`` (``mindspore.dataset``: the
  binary files, MindRecord or arrays in memory), ``tta`` (flip test-time
  augmentation), ``nesterov`` (Nesterov momentum that the CPU honours),
  ``checkpoints``, ``callbacks``, ``ema`` (the weight average kept beside training);
* ``final_test``: the chosen and the last checkpoint scored once on the test set
  (a run that chose on held-out images);
* ``factories``: network, optimizer, loss, metrics, device setting and datasets
  from a config (the held-out validation split included), shared by the tools below;
* ``train`` (``train_and_evaluate`` and ``python -m msresnet.train``), ``sweep``
  (evaluate checkpoints), ``rank_dump`` (the callback a data-parallel worker
  adds with ``--rank_dump``);
* ``lr_range``: the learning-rate range test on a profile's training step;
* ``rank_analysis``: chapter 7's reading and replay of those files (no training
  worker imports it);
* ``export``: MINDIR, ONNX and INT8 exports of a run's checkpoint (chapter 8, and
  the model of the in-browser page).
"""

from msresnet.cpu_speed import apply_fast_isa

CPU_ISA_SETTING = apply_fast_isa()

MINDSPORE_FREE_MODULES = frozenset({
    "cpu_speed", "paths", "atomic", "cli", "download", "lr_schedule", "config", "cifar10",
    "distributed", "notebook", "prepare", "launch", "reproduce", "results_page", "bench",
    "lab", "staging", "local_s3", "sync", "job", "images", "predict", "pipeline_bench",
    "ablation",
})
"""Modules that must not import MindSpore when imported (see the docstring)."""

__version__ = "0.1.0"
