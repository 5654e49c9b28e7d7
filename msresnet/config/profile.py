"""Typed training configuration, loaded from the YAML profiles in ``configs/``.

A run is described by one :class:`Config`. The four shipped profiles are
``configs/smoke.yaml`` (CI: seconds on a CPU), ``configs/cpu.yaml`` (a real run on
a 2-core CPU), ``configs/gpu.yaml`` and ``configs/ascend.yaml`` (the MindSpore
models repo's ResNet50/CIFAR-10 recipe, ``official/cv/ResNet/config/
resnet50_cifar10_config.yaml``). ``Config()`` with no arguments *is* that recipe,
on Ascend as in the repo's yaml; a YAML file sets the keys it names on top of it.

Everything is checked when the config is built, so a typo fails at once with one
:class:`ConfigError` naming the key, the value and where it came from, instead of
an hour into training::

    batch_size: must be a positive integer, got 0 (in configs/smoke.yaml)
    unknown key 'batchsize' (did you mean 'batch_size'?) (in overrides)

A :class:`Config` is checked exactly once, when it is built, and is frozen: nothing
can change a checked value behind the checks' back. A change is a new Config,
``dataclasses.replace(config, epoch_size=3)``, checked once in its turn. So whoever
receives a Config (the training, the launcher, the learning-rate schedule) trusts
it and checks nothing again.

The words that mean null (:data:`NULL_WORDS`: ``null``, ``none``, ``~``, any case)
are the same wherever a value is written as text: on the command line
(``--train_samples none``), in a YAML file or an overrides dict
(``train_samples: none``; YAML's own ``null``, ``~`` and empty are null already)
and in a notebook's papermill parameters (``-p train_samples null``). They mean
null only for the fields that allow it.

Why not argparse or the models repo's ``model_utils/config.py``? Both take whatever
keys and types they are given: a misspelt key there silently becomes a new
attribute and the intended one keeps its default.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from msresnet.spelling import did_you_mean
from msresnet.config.rules import (BOOL, MD5, NON_EMPTY, OPTIONAL_NON_EMPTY, SEED, Rule, choice,
                                   int_at_least, number, positive_int, rule_field)
from msresnet.data.cifar10 import (IMAGE_SHAPE, NUM_CLASSES, OFFICIAL_URL, TEST_IMAGES,
                                   TRAIN_IMAGES)
from msresnet.model.architecture import DATA_FORMATS, DEPTHS, STEMS
from msresnet.model.lr_schedule import SCHEDULES
from msresnet.paths import CONFIG_DIR, in_repo

PROFILES: tuple[str, ...] = ("smoke", "cpu", "gpu", "gpu-fast", "ascend")
DEVICE_TARGETS = ("CPU", "GPU", "Ascend")
MODES = ("graph", "pynative")
AMP_LEVELS = ("O0", "O1", "O2", "O3", "auto")
AMP_BATCHNORM = ("float32", "float16")
JIT_LEVELS = ("O0", "O1", "O2")
GPU_ONLY = {"data_format": "NHWC", "amp_batchnorm": "float16", "graph_kernel": True}
"""Speed settings only MindSpore's GPU back end has, and the value that asks for it."""
NULL_WORDS: tuple[str, ...] = ("null", "none", "~")
"""Text that means null for a field that allows it, in any case (see the module docstring)."""


class ConfigError(ValueError):
    """A config key is unknown, of the wrong type or out of range.

    ``key``, ``value`` and ``source`` (e.g. ``"configs/smoke.yaml"``) are kept as
    attributes for programs; the message names all three for people.
    """

    def __init__(self, message: str, *, key: str | None = None, value: Any = None,
                 source: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value
        self.source = source


# --------------------------------------------------------------------------- Config
@dataclasses.dataclass(frozen=True)
class Config:
    """One training run. Defaults are the models repo's ResNet50/CIFAR-10 recipe.

    Build it with :func:`load_config`; constructing it directly, or changing it with
    ``dataclasses.replace``, validates too, once. Frozen: assigning a field raises.
    ``field.metadata["help"]`` says what each field does. ``sources`` is not a field:
    where the values came from, for the error messages (:func:`load_config` passes
    ``{key: "configs/smoke.yaml", ...}``; a string names one source for every key;
    None: ``"Config(...)"``).
    """

    profile: str = rule_field("default", NON_EMPTY,
                          "name of the profile (the YAML file's name unless it sets one)")
    device_target: str = rule_field("Ascend", choice(DEVICE_TARGETS),
                                "MindSpore device: CPU, GPU or Ascend")
    mode: str = rule_field("graph", choice(MODES),
                       "graph (compiled, fast) or pynative (eager, easy to debug)")
    data_url: str = rule_field(OFFICIAL_URL, NON_EMPTY,
                           "where CIFAR-10 comes from: https URL, local .tar.gz or folder")
    data_md5: str | None = rule_field(None, MD5,
                                  "expected MD5 of the archive; null: the official one "
                                  "for the official URL, else not checked")
    data_dir: str = rule_field("data", NON_EMPTY,
                           "folder that contains cifar-10-batches-bin (relative to the "
                           "working directory)")
    output_dir: str = rule_field("runs/default", NON_EMPTY,
                             "where checkpoints and logs go (relative to the working "
                             "directory)")
    image_size: int = rule_field(224, int_at_least(IMAGE_SHAPE[0]),
                                 "side of the square network input; 32 keeps CIFAR-10's size")
    progressive_size: int | None = rule_field(
        None, positive_int(optional=True),
        "progressive resizing: train the first progressive_epochs epochs at this "
        "side, a whole fraction of image_size (each batch averaged down by area); "
        "null: every epoch at image_size")
    progressive_epochs: int = rule_field(
        0, int_at_least(0),
        "epochs trained at progressive_size before image_size (fewer than "
        "epoch_size: validation, test and the last epoch see image_size)")
    stem: str = rule_field("imagenet", choice(STEMS),
                       "imagenet: 7x7/2 conv + max pool; cifar: 3x3/1 conv, no pool")
    depth: int = rule_field(50, choice(tuple(DEPTHS)),
                        "layers of the bottleneck ResNet: 50 (the book's); 14 or 26 (one or "
                        "two blocks a stage) check mechanics in seconds; 101, 152 deeper")
    num_classes: int = rule_field(NUM_CLASSES, int_at_least(2),
                              f"number of classes (CIFAR-10: {NUM_CLASSES})")
    zero_init_residual: bool = rule_field(
        True, BOOL,
        "start the last BatchNorm of every residual branch at gamma=0 (each block "
        "the identity): MindSpore 1.x model_zoo ResNet, which the seed recipe used; "
        "false: the models repo's ResNet50 with Momentum today (gamma=1)")
    batch_size: int = rule_field(32, positive_int(), "images per step (per device)")
    epoch_size: int = rule_field(90, positive_int(), "training epochs")
    train_samples: int | None = rule_field(
        None, positive_int(TRAIN_IMAGES, optional=True),
        "train on N training images per epoch (per device), a fresh random draw "
        f"each epoch from the seeded shuffle; null: all {TRAIN_IMAGES:,}")
    eval_samples: int | None = rule_field(
        None, positive_int(TEST_IMAGES, optional=True),
        "evaluate on the first N images of the validation split and of the test "
        "set; null: all of them")
    valid_split: int = rule_field(
        0, Rule(f"an integer from 0 to {TRAIN_IMAGES - 1}",
                 lambda v: 0 <= v < TRAIN_IMAGES),
        "hold out N training images (class-balanced, fixed by seed) to validate on "
        "and choose checkpoints with; the test set then scores only the chosen and "
        "the last checkpoint. 0: validate on the test set (the seed recipe's and the "
        "models repo's way)")
    num_workers: int | None = rule_field(None, positive_int(optional=True),
                                     "data pipeline workers; null: chosen for the "
                                     "machine (never above the CPU count)")
    lr_schedule: str = rule_field("poly", choice(SCHEDULES),
                              "decay after warmup: steps, poly, cosine, linear or constant")
    lr_init: float = rule_field(0.01, number(0), "learning rate at the first warmup step")
    lr_max: float = rule_field(0.1, number(0, low_open=True),
                           "peak learning rate, reached when warmup ends, for "
                           "lr_devices devices")
    lr_devices: int = rule_field(
        8, positive_int(),
        "the device count lr_max is tuned for: a run on N devices trains at "
        "lr_max * N / lr_devices (the models repo's `train.py`; its yaml: 8)")
    lr_end: float = rule_field(0.00001, number(0), "learning rate the decay ends at")
    warmup_epochs: int = rule_field(5, int_at_least(0),
                                "epochs of linear warmup from lr_init to lr_max")
    momentum: float = rule_field(0.9, number(0, 1), "SGD momentum")
    nesterov: bool = rule_field(False, BOOL,
                            "Nesterov momentum (done by msresnet.model.nesterov on the CPU, whose "
                            "kernel ignores MindSpore's flag); the models repo: false")
    bn_momentum: float = rule_field(
        0.9, number(0, 1, low_open=True),
        "BatchNorm moving-average momentum, MindSpore's meaning: running = m * running "
        "+ (1 - m) * batch (PyTorch's momentum is 1 - m); the models repo's 0.9")
    ema_decay: float = rule_field(
        0.0, number(0, 1),
        "also keep an exponential moving average of the weights (and BatchNorm "
        "statistics) with this per-step decay, saved as ema-<epoch>_<step>.ckpt after "
        "each epoch (for evaluation; training never reads it); 0: none")
    weight_decay: float = rule_field(0.0001, number(0),
                                 "L2 weight decay (not applied to BatchNorm and biases)")
    loss_scale: float = rule_field(1024.0, number(1),
                               "fixed loss scale for float16 training; 1: none")
    amp_level: str = rule_field("O3", choice(AMP_LEVELS),
                            "mixed precision: O0 float32, O2/O3 float16 (GPU/Ascend)")
    data_format: str = rule_field(
        "NCHW", choice(DATA_FORMATS),
        "activation layout: NCHW, or NHWC (GPU: cuDNN's tensor-core layout); "
        "checkpoints are the same either way")
    amp_batchnorm: str = rule_field(
        "float32", choice(AMP_BATCHNORM),
        "what BatchNorm reads and writes under O2: float32 (MindSpore's O2 casts "
        "around every BatchNorm) or float16 (float32 parameters and statistics, as "
        "cuDNN takes them; GPU)")
    graph_kernel: bool = rule_field(False, BOOL,
                                    "MindSpore's graph-kernel fusion (GPU; needs AKG)")
    jit_level: str | None = rule_field(
        None, Rule("one of 'O0', 'O1', 'O2' or null", lambda v: v is None or v in JIT_LEVELS),
        "graph compile level (jit_config); null: MindSpore's default")
    label_smoothing: float = rule_field(0.0, number(0, 1),
                                    "label smoothing factor; 0: plain cross-entropy")
    save_checkpoint_epochs: int = rule_field(5, positive_int(), "save a checkpoint every N epochs")
    keep_checkpoint_max: int = rule_field(10, positive_int(), "keep at most N checkpoints")
    valid_frequency: int = rule_field(1, positive_int(), "evaluate every N epochs")
    seed: int = rule_field(1, SEED, "random seed (weights, shuffling, augmentation)")
    resume_from: str | None = rule_field(None, OPTIONAL_NON_EMPTY,
                                     "checkpoint to resume from; null: start fresh")
    sources: dataclasses.InitVar[Mapping[str, str] | str | None] = None

    def __post_init__(self, sources: Mapping[str, str] | str | None) -> None:
        if sources is None or isinstance(sources, str):
            label = sources or "Config(...)"
            values = _check_values(self.__dict__, lambda key: label)
        else:
            values = _check_values(self.__dict__, lambda key: sources.get(key, "Config(...)"))
        # The checked values (an int given for a float field becomes a float, a null
        # word None) replace the given ones while the object is being built: the one
        # write a frozen dataclass allows, before anyone holds it.
        self.__dict__.update(values)

    def to_dict(self) -> dict[str, Any]:
        """All fields, in declaration order, as plain Python values."""
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        """The config as YAML that :func:`load_config` reads back to an equal Config
        (e.g. to save next to a run's checkpoints)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Config)}
_HINTS: dict[str, Any] = typing.get_type_hints(Config)


def _describe(value: Any) -> str:
    return "null" if value is None else repr(value)


def _base_type(name: str) -> tuple[type, bool]:
    """The field's type without ``| None``, and whether None is allowed."""
    hint = _HINTS[name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _fail(key: str, problem: str, value: Any, source: str, hint: str = "") -> typing.NoReturn:
    raise ConfigError(f"{key}: {problem}, got {_describe(value)}{hint} (in {source})",
                      key=key, value=value, source=source)


def is_null_word(value: Any) -> bool:
    """True for text that means null (:data:`NULL_WORDS`, any case, spaces around)."""
    return isinstance(value, str) and value.strip().lower() in NULL_WORDS


def _check_value(key: str, value: Any, source: str) -> Any:
    """The value, type-checked (ints accepted as floats, a null word as None where
    null is allowed) and range-checked."""
    rule: Rule = FIELDS[key].metadata["rule"]
    base, optional = _base_type(key)
    if optional and is_null_word(value):
        return None
    if value is None:
        if optional:
            return None
        _fail(key, f"must be {rule.expect}", value, source)
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if base is int and isinstance(value, bool) or not isinstance(value, base):
        _fail(key, f"must be {rule.expect}", value, source)
    if not rule.ok(value):
        hint = did_you_mean(value, _choices_of(rule)) if isinstance(value, str) else ""
        _fail(key, f"must be {rule.expect}", value, source, hint)
    return value


def _choices_of(rule: Rule) -> list[str]:
    return re.findall(r"'([^']*)'", rule.expect) if rule.expect.startswith("one of") else []


def _check_values(values: Mapping[str, Any], source_of: Callable[[str], str]) -> dict[str, Any]:
    """Check every field, then the rules that tie fields together; first error wins."""
    checked = {key: _check_value(key, values[key], source_of(key)) for key in FIELDS}

    def over(key: str, other: str, problem: str) -> None:
        limit = _describe(checked[other])
        if source_of(other) != source_of(key):
            limit += f", from {source_of(other)}"
        _fail(key, problem.format(other=other, limit=limit), checked[key], source_of(key))

    if checked["lr_init"] > checked["lr_max"]:
        over("lr_init", "lr_max", "must not exceed {other} ({limit})")
    if checked["lr_end"] > checked["lr_max"]:
        over("lr_end", "lr_max", "must not exceed {other} ({limit})")
    if checked["warmup_epochs"] > checked["epoch_size"]:
        over("warmup_epochs", "epoch_size", "must not exceed {other} ({limit})")
    if checked["train_samples"] is not None and checked["train_samples"] < checked["batch_size"]:
        over("train_samples", "batch_size",
             "must be at least {other} ({limit}) so that one full batch exists")
    left = TRAIN_IMAGES - checked["valid_split"]
    if checked["train_samples"] is not None and checked["train_samples"] > left:
        _fail("train_samples", f"must not exceed the {left:,} training images left after "
              f"valid_split ({checked['valid_split']}, from {source_of('valid_split')})",
              checked["train_samples"], source_of("train_samples"))
    _check_progressive(checked, over, source_of)
    for key, value in GPU_ONLY.items():
        if checked[key] == value and checked["device_target"] != "GPU":
            over(key, "device_target", f"{value!r} needs device_target 'GPU' (got {{limit}})")
    if checked["amp_batchnorm"] == "float16" and checked["amp_level"] != "O2":
        over("amp_batchnorm", "amp_level", "'float16' changes O2 only (amp_level {limit})")
    if checked["amp_batchnorm"] == "float16" and checked["data_format"] == "NHWC":
        # MindSpore 2.10 fuses float16 BatchNorm with its ReLU in NHWC, and that fused
        # step's gradients are wrong: NaN from the first epoch (results/gpu/)
        over("amp_batchnorm", "data_format", "'float16' trains to NaN with data_format "
             "{limit} on MindSpore 2.10's GPU kernels; use data_format 'NCHW'")
    # ResNet50's last stage sees image_size/32 pixels a side (imagenet stem: stride 2,
    # max pool, three stride-2 stages; cifar stem: the three stages only, /8). With one
    # image of 1x1 a batch, BatchNorm has one value per channel: the unbiased variance
    # it adds to moving_variance divides by n - 1 = 0 and turns it into NaN (measured).
    # The smallest input decides: progressive resizing's early epochs when it is on.
    size_key = "progressive_size" if checked["progressive_size"] else "image_size"
    side = math.ceil(checked[size_key] / (32 if checked["stem"] == "imagenet" else 8))
    if checked["batch_size"] * side * side < 2:
        _fail("batch_size", f"must be at least 2 with stem {checked['stem']!r} at {size_key} "
              f"{checked[size_key]}: the last stage's feature map is {side}x{side}, so "
              "BatchNorm would see one value per channel and its moving variance would become "
              "NaN (use batch_size 2, a larger image_size or stem 'cifar')",
              checked["batch_size"], source_of("batch_size"))
    return checked


def _check_progressive(checked: dict[str, Any], over: Callable[[str, str, str], None],
                       source_of: Callable[[str], str]) -> None:
    """Progressive resizing's rules: a size that divides ``image_size`` (the pipeline
    averages whole blocks of pixels, no interpolation), epochs only with a size, and
    at least the last epoch at full size (the size validation and the test see)."""
    size, epochs = checked["progressive_size"], checked["progressive_epochs"]
    if size is None:
        if epochs:
            _fail("progressive_epochs", "needs progressive_size (null here): the epochs "
                  "trained small need a size", epochs, source_of("progressive_epochs"))
        return
    if size >= checked["image_size"] or checked["image_size"] % size:
        over("progressive_size", "image_size",
             "must be a whole fraction of {other} ({limit}), e.g. half of it")
    if not epochs:
        _fail("progressive_size", "does nothing with progressive_epochs 0: give the epochs "
              "to train at this size, or null", size, source_of("progressive_size"))
    if epochs >= checked["epoch_size"]:
        over("progressive_epochs", "epoch_size",
             "must be less than {other} ({limit}): the last epoch trains at image_size")


# --------------------------------------------------------------------------- loading
class Overrides(dict):
    """A dict of overrides that remembers where it came from (for error messages)."""

    def __init__(self, values: Mapping[str, Any] = (), source: str = "overrides") -> None:
        super().__init__(values)
        self.source = source


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, plus: ``1e-5`` is a float (YAML 1.1 wants ``1.0e-5``,
    so plain PyYAML returns the string '1e-5'), and duplicate keys are errors."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def available_profiles(config_dir: Path = CONFIG_DIR) -> list[str]:
    """Names of the profiles in ``configs/`` (file names without ``.yaml``)."""
    return sorted(p.stem for p in Path(config_dir).glob("*.yaml"))


def _resolve(profile_or_path: str | os.PathLike) -> Path:
    text = os.fspath(profile_or_path)
    looks_like_path = (isinstance(profile_or_path, os.PathLike) or text.endswith((".yaml", ".yml"))
                       or "/" in text or os.sep in text)
    if looks_like_path:
        path = Path(text)
        if not path.is_file():
            raise ConfigError(f"profile: no such file {text!r}", key="profile", value=text)
        return path
    path = CONFIG_DIR / f"{text}.yaml"
    if not path.is_file():
        names = available_profiles()
        raise ConfigError(f"profile: unknown profile {text!r}{did_you_mean(text, names)}; "
                          f"available: {', '.join(names)} (in {in_repo(CONFIG_DIR)}/)",
                          key="profile", value=text)
    return path


def _read_yaml(path: Path, source: str) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}", source=source) from exc
    if data is None or data == {}:  # Config() alone is the Ascend recipe: never by accident
        raise ConfigError(f"{source}: empty, names no keys; a profile sets its keys "
                          "(copy configs/smoke.yaml)", source=source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a mapping of keys to values, "
                          f"got {type(data).__name__}", source=source)
    return data


def _check_key(key: Any, source: str) -> str:
    if not isinstance(key, str) or key not in FIELDS:
        hint = did_you_mean(key, FIELDS) if isinstance(key, str) else ""
        if not hint:
            hint = "; known keys: " + ", ".join(FIELDS)
        raise ConfigError(f"unknown key {key!r}{hint} (in {source})", key=str(key),
                          source=source)
    return key


def load_config(profile_or_path: str | os.PathLike = "smoke",
                overrides: Mapping[str, Any] | None = None, *,
                data_dir_rule: Callable[[Any, bool], Any] | None = None) -> Config:
    """The config of a profile (``"smoke"``, ``"cpu"``, ``"gpu"``, ``"ascend"``) or of
    a YAML file (a path ending in ``.yaml``), with ``overrides`` applied on top.

    Overrides take Python values (a notebook's papermill parameters, or
    :func:`parse_overrides` for the command line); ``None`` is only valid for the
    fields that allow null. ``profile`` may appear in overrides only with the name
    being loaded. Raises :class:`ConfigError` naming the first bad key.
    ``data_dir_rule(data_dir, given)``, when given, decides the data folder from the
    merged value (``given``: an override set it) before the one check
    (:func:`msresnet.config.run.build_run_config` passes the book's rule).
    """
    path = _resolve(profile_or_path)
    source = in_repo(path)
    values = {name: f.default for name, f in FIELDS.items()}
    origin = {name: "defaults" for name in FIELDS}
    values["profile"] = path.stem
    for key, value in _read_yaml(path, source).items():
        values[_check_key(key, source)] = value
        origin[key] = source

    overrides = overrides if overrides is not None else {}
    override_source = getattr(overrides, "source", "overrides")
    for key, value in overrides.items():
        _check_key(key, override_source)
        if key == "profile" and value != values["profile"]:
            _fail(key, f"must be the profile being loaded ({values['profile']!r}); "
                       "pass another profile as load_config's first argument",
                  value, override_source)
        values[key] = value
        origin[key] = override_source
    if data_dir_rule is not None:
        values["data_dir"] = data_dir_rule(values["data_dir"], "data_dir" in overrides)
    return Config(**values, sources=origin)


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _from_text(key: str, text: str, source: str) -> Any:
    """Convert one command-line string to the type of field ``key``."""
    base, optional = _base_type(key)
    if optional and is_null_word(text):
        return None
    if base is bool:  # bool("false") is True: convert explicitly
        word = text.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        _fail(key, f"must be {FIELDS[key].metadata['rule'].expect}", text, source)
    if base not in (int, float, str):
        raise TypeError(f"{key}: no command-line conversion for {base.__name__} fields")
    try:
        return base(text)  # int("64"), float("1e-5"), str(...)
    except ValueError:
        _fail(key, f"must be {FIELDS[key].metadata['rule'].expect}", text, source)


def value_from_text(key: str, value: Any, source: str = "notebook parameters") -> Any:
    """``value`` for field ``key``, with text converted where a field is a boolean:
    papermill passes ``-p zero_init_residual false`` as the string ``"false"``
    (true/false, yes/no, on/off, 1/0, any case). Other values pass unchanged."""
    if isinstance(value, str) and _base_type(key)[0] is bool:
        return _from_text(key, value, source)
    return value


def parse_overrides(args: Sequence[str], source: str = "command-line arguments") -> Overrides:
    """``["--batch_size", "64", "--lr_end=0", "--train_samples", "none"]`` -> typed dict.

    Each ``--key`` must be a Config field (``-`` may stand for ``_``), followed by its
    value or written ``--key=value``. Values are converted to the field's type;
    :data:`NULL_WORDS` give None for fields that allow it. Ranges are checked when the
    result is passed to :func:`load_config`. A key given twice keeps the last value.
    """
    result = Overrides(source=source)
    items = list(args)
    index = 0
    while index < len(items):
        token = items[index]
        if not token.startswith("--") or token == "--":
            raise ConfigError(f"expected --key, got {token!r} (in {source})", source=source)
        name, has_value, text = token[2:].partition("=")
        key = _check_key(name.replace("-", "_"), source)
        if not has_value:
            index += 1
            if index == len(items):
                raise ConfigError(f"{key}: missing value after {token} (in {source})",
                                  key=key, source=source)
            text = items[index]
        result[key] = _from_text(key, text, source)
        index += 1
    return result
