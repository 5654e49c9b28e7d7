"""Shared code of the book *ResNet50 on CIFAR-10 with MindSpore*.

Importing the package first applies the CPU speed setting (see
:mod:`msresnet.cpu_speed`): it caps oneDNN's instruction set through an environment
variable, which MindSpore reads once, when its CPU kernels first load. So nothing
may import MindSpore before :mod:`msresnet.cpu_speed` has acted. Inside the
package this holds by construction (importing any ``msresnet.X`` runs this file
first, and it imports only ``cpu_speed``); in a notebook or script it is why
``import msresnet`` comes before ``import mindspore``.

The folders are the architecture: each sub-package holds one concern, and they
are layered. At import time a module imports only from its own layer or from the
layers listed before it; a tool may import a later layer inside the function that
needs it (``jobs.job`` runs the training, ``experiments.bench`` builds the model).
No sub-package's ``__init__`` imports anything, so ``import msresnet.training``
loads no MindSpore. ``tests/test_layers.py`` reads every module's imports in the
whole tree and fails on an import cycle (lazy imports inside functions included),
on an import from a later layer, on a module of :data:`MINDSPORE_FREE_MODULES`
that imports MindSpore at import time (directly or through another ``msresnet``
module), and on a module this docstring does not name. The layers, first to last:

* the basics, at the root: ``cpu_speed`` (the ISA setting), ``paths`` (where things
  are, the local mirror's variable), ``atomic`` (crash-safe file writes), ``spelling`` (the one
  "did you mean" hint), ``text_table`` (the one plain-text table),
  ``compile_cache`` (MindSpore's compile cache refused: it reuses graphs by compile
  order alone), ``command_line`` (what every verb shares: the one option spelling, ``--profile``
  for a profile, the argument types, the one-line errors);
* ``data``: ``cifar10`` (CIFAR-10's facts, read by every other module: URL, MD5,
  counts, classes, mean and std; and its binary format: reading records,
  validating a folder), ``download`` (resumable, checksummed HTTP),
  ``prepare`` (a ready folder from a URL, an archive or a folder; its marker),
  ``splits`` (the held-out validation split), ``identity`` (which images an
  evaluation scored, by SHA-256), ``source`` (a run's data resolved once: the
  folder's one precedence rule, validated, split and identified), ``images`` (any
  picture to the network's input),
  ``mindrecord`` (CIFAR-10 to MindRecord), ``pipeline`` (``mindspore.dataset``: the
  binary files, MindRecord or arrays in memory);
* ``model``: the network and its training step's parts: ``lr_schedule`` (the
  schedules, numpy only), ``architecture`` (ResNet50's stages, widths and
  BatchNorm settings as plain numbers, which the PyTorch twin reads too), ``losses``, ``flops``, ``resnet`` (ResNet50), ``nesterov``
  (Nesterov momentum that the CPU honours), ``tta`` (flip test-time augmentation);
* ``config``: ``profile`` (the profiles, their overrides and checks; it reads the
  schedule names of ``model.lr_schedule`` and CIFAR-10's facts of ``data.cifar10``),
  ``rules`` (what each kind of value must be), ``table`` (the profiles side by side)
  and ``run`` (a run's Config built in one place: profile, overrides, the data
  folder's rule, the device-count rule; read back from a run folder);
* ``training``: ``distributed`` (rank and group size), ``device`` (what the device
  target decides: data sink, mixed precision, whose Nesterov kernel), ``checkpoints``,
  ``selection`` (``best.json``, the choice rule, the same-images rule, the chosen
  and the last readable checkpoint scored once on the test set), ``callbacks``,
  ``ema`` (the weight average kept beside training), ``factories``
  (network, optimizer, loss, metrics, device setting and datasets from a config),
  ``resume`` (which checkpoint a run continues, what may differ, restoring it),
  ``train`` (the one training function), ``sweep`` (score every checkpoint of a run:
  what ``msresnet sweep`` and chapter 5 run);
* ``ranks``: a data-parallel run's evidence, ``dump`` (the callback a worker adds
  with ``--rank_dump``; the train command imports it only then) and ``analysis``
  (chapter 7's reading and replay of the rank records; no training worker imports it);
* ``storage``: ``errors`` (one class per failure, naming the URL), ``urls`` (local
  paths, ``s3://``, ``obs://``), ``settings`` (the environment; credentials never
  kept), ``etag`` (is the copy already there?), ``temp_files`` (written whole or
  not at all), ``s3_errors`` (what botocore's errors mean), ``s3_filesystem`` (s3fs
  for ``s3://`` and ``obs://``), ``store`` (listing one side), ``backend`` (what a
  backend does), ``transfer`` (parallel copy with retries), ``fsspec_backend`` and
  ``moxing_backend`` (the two backends), ``staging`` (the public API, choosing the
  backend once), ``sync`` (one copy per node);
* ``testing``: ``local_s3`` (the loopback S3 server the chapters and tests start);
* ``jobs``: ``job`` (a ModelArts-style job; it imports the training only when it
  runs), ``ports`` (free and taken TCP ports, local addresses), ``worker_logs``
  (what a failed worker left: its log's end, how it exited), ``launch`` (``msrun``);
* ``doctor``: one machine checked for a profile before a long run (``msresnet
  doctor``; MindSpore and the training are imported only when a check runs):
  ``checks`` (a finding and its status), ``software`` (MindSpore's build, the CUDA
  runtime and cuDNN or CANN), ``hardware`` (the device, NCCL or HCCL), ``speed``
  (the data, the timed training and validation steps, the projection and the
  figures cited beside it), ``command`` (the report);
* ``deploy``: ``onnx_session`` (onnxruntime's CPU session as the package opens it),
  ``checkpoint_config`` (which network a checkpoint holds, told without MindSpore),
  ``export`` (MINDIR, ONNX and INT8 exports of a checkpoint),
  ``predict`` (top-5 classes of pictures; an ONNX model needs onnxruntime only);
* ``experiments``: ``bench`` (the training step), ``pipeline_bench`` (the data
  pipeline, alone and in training), ``ablation`` (chapter 10's short runs),
  ``range_inputs`` (the range test's rates and limits, checked without MindSpore),
  ``lr_range`` (the learning-rate range test), ``onednn_trace`` (which oneDNN
  convolution a framework runs, from oneDNN's verbose log: the troubleshooting
  page's diagnosis);
* ``chapters``: ``helpers`` (what every chapter shares: paths as printed, output at
  the page's width, the figures' style), ``notebook`` (the chapters' parameter
  pattern and metric records),
  ``reproduce`` (papermill runs of the chapters), ``results_page`` (the results
  page), ``results_figures`` (its figures, drawn from the records), ``lab``
  (JupyterLab);
* ``commands``: the verbs' command lines, each a parser and a thin ``main`` over
  the library function its docstring names: ``prepare``, ``train``, ``sweep``,
  ``export``, ``predict``, ``doctor``, ``job``, ``sync``, ``reproduce``,
  ``launch``, ``results_page``, ``lab``, ``convert_mindrecord``, ``bench``,
  ``pipeline_bench``, ``ablation``, ``lr_range``, ``local_s3`` (one module per verb,
  named as the verb with underscores; chapter 7 calls ``launch``'s ``main`` for a
  dry run). One verb keeps a part below: the job's arguments are read by
  ``jobs.job`` (the platform's contract: chapter 6 and the boot file read them
  there); and ``cli``, at the root: the ``msresnet`` dispatcher, the top floor,
  which no library module imports.
"""

from msresnet.cpu_speed import apply_fast_isa

CPU_ISA_SETTING = apply_fast_isa()

MINDSPORE_FREE_MODULES = frozenset({
    "cpu_speed", "paths", "atomic", "compile_cache", "command_line", "cli", "config.profile",
    "config.rules", "config.table", "config.run", "model.lr_schedule", "model.architecture",
    "spelling", "text_table", "data.download", "data.cifar10", "data.prepare", "data.splits",
    "data.identity", "data.source",
    "data.images", "training.distributed", "training.device",
    "storage.errors", "storage.urls", "storage.settings", "storage.etag", "storage.temp_files",
    "storage.s3_errors", "storage.s3_filesystem", "storage.store", "storage.backend",
    "storage.transfer", "storage.fsspec_backend", "storage.moxing_backend",
    "storage.staging", "testing.local_s3", "storage.sync", "jobs.job", "jobs.launch",
    "jobs.ports", "jobs.worker_logs",
    "doctor.checks", "doctor.software", "doctor.hardware", "doctor.speed", "doctor.command",
    "deploy.onnx_session", "deploy.checkpoint_config", "deploy.predict", "experiments.bench",
    "experiments.pipeline_bench", "experiments.ablation", "experiments.onednn_trace",
    "experiments.range_inputs",
    "chapters.helpers", "chapters.notebook", "chapters.reproduce",
    "chapters.results_page", "chapters.lab", "chapters.results_figures",
    "commands.prepare", "commands.predict", "commands.doctor", "commands.launch", "commands.job",
    "commands.sync", "commands.reproduce", "commands.results_page", "commands.lab", "commands.bench",
    "commands.pipeline_bench", "commands.ablation", "commands.local_s3", "commands.train",
    "commands.lr_range", "commands.export",
})
"""Modules that must not import MindSpore when imported (see the docstring)."""

__version__ = "0.1.0"
