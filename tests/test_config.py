"""Tests of msresnet.config: profiles, validation messages, overrides, tables."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from msresnet.config.profile import (FIELDS, PROFILES, Config, ConfigError, load_config,
                             parse_overrides)
from msresnet.config.table import markdown_table, profiles_table
from msresnet.config.run import for_devices, lr_rule
from msresnet.paths import CONFIG_DIR


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------- shipped profiles
@pytest.mark.parametrize("name", PROFILES)
def test_profile_file_opens_with_its_purpose_and_sets_every_key(name):
    text = (CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith(f"# {name}:"), first
    keys = {line.split(":", 1)[0] for line in text.splitlines()
            if line and not line.startswith(("#", " "))}
    assert keys == set(FIELDS) - {"profile"}


@pytest.mark.parametrize("name", PROFILES)
def test_profile_loads_and_takes_its_name_from_the_file(name):
    config = load_config(name)
    assert config.profile == name
    assert config.output_dir == f"runs/{name}"


@pytest.mark.parametrize("name, target, amp", [("gpu", "GPU", "O2"), ("ascend", "Ascend", "O3")])
def test_gpu_and_ascend_are_the_models_repo_recipe(name, target, amp):
    # official/cv/ResNet/config/resnet50_cifar10_config.yaml (mindspore-ai/models);
    # amp: train.py builds ms.Model(..., amp_level="O3") for GPU and Ascend, which
    # MindSpore 2.10's GPU rejects at validation (results/gpu): gpu uses O2.
    config = load_config(name)
    expected = dict(device_target=target, mode="graph", batch_size=32, epoch_size=90,
                    warmup_epochs=5, lr_schedule="poly", lr_init=0.01, lr_max=0.1,
                    lr_end=1e-5, momentum=0.9, weight_decay=1e-4, loss_scale=1024.0,
                    image_size=224, stem="imagenet", num_classes=10,
                    save_checkpoint_epochs=5, keep_checkpoint_max=10, amp_level=amp,
                    label_smoothing=0.0, seed=1, train_samples=None, eval_samples=None,
                    lr_devices=8)
    assert {key: getattr(config, key) for key in expected} == expected


def test_defaults_are_the_ascend_recipe():
    different = {key for key, value in Config().to_dict().items()
                 if getattr(load_config("ascend"), key) != value}
    assert different == {"profile", "output_dir"}


def test_cpu_profiles_train_in_float32_at_native_size_and_smoke_is_the_smaller():
    smoke, cpu = load_config("smoke"), load_config("cpu")
    for config in (smoke, cpu):
        assert (config.device_target, config.amp_level, config.loss_scale) == ("CPU", "O0", 1.0)
        assert config.image_size == 32
    assert cpu.train_samples is None and cpu.eval_samples is None
    assert smoke.train_samples is not None and smoke.eval_samples is not None
    assert smoke.train_samples * smoke.epoch_size < 50_000 * cpu.epoch_size


# ----------------------------------------------------------------- the device-count rule
@pytest.mark.parametrize("name, tuned_for", [("gpu", 8), ("ascend", 8), ("cpu", 1), ("smoke", 1)])
def test_each_profile_states_the_device_count_its_rate_is_tuned_for(name, tuned_for):
    """The recipes are tuned for 8 devices (the models repo's yaml); the CPU profiles
    for one process, so the rule leaves their rates as they are."""
    config = load_config(name)
    assert config.lr_devices == tuned_for
    assert for_devices(config, 1).lr_max == config.lr_max / tuned_for
    assert for_devices(config, tuned_for) is config


@pytest.mark.parametrize("devices, expected", [(1, 0.0125), (2, 0.025), (8, 0.1), (16, 0.2)])
def test_one_gpu_or_card_gets_the_models_repos_rate_without_typing_it(devices, expected):
    # train.py (init_lr): config.lr_max = config.lr_max / 8 * config.device_num
    for name in ("gpu", "ascend"):
        run = for_devices(load_config(name), devices)
        assert run.lr_max == pytest.approx(expected, rel=1e-12)
        assert run.lr_devices == devices
        # the recorded config is the one trained with: the rule again changes nothing
        assert for_devices(run, devices) is run
        assert load_config(name, run.to_dict()) == run


def test_the_rule_says_the_rate_it_uses_in_one_line():
    gpu, smoke = load_config("gpu"), load_config("smoke")
    assert lr_rule(gpu, 1) == "lr_max 0.0125 for 1 device = 0.1 x 1/8 (gpu: lr_devices 8)"
    assert lr_rule(gpu, 8) == "lr_max 0.1 for 8 devices: gpu's own (lr_devices 8)"
    assert lr_rule(smoke, 1) == "lr_max 0.002 for 1 device: smoke's own (lr_devices 1)"
    assert lr_rule(smoke, 2) == "lr_max 0.004 for 2 devices = 0.002 x 2/1 (smoke: lr_devices 1)"
    assert max(len(lr_rule(load_config(n), d)) for n in PROFILES for d in (1, 2, 8, 16)) <= 80


def test_the_rule_checks_the_scaled_rate_once_and_names_where_it_came_from():
    with pytest.raises(ConfigError, match=r"^lr_init: must not exceed lr_max \(0.000125, from "
                                          r"lr_max 0.002 x 1/16: the device-count rule\), "
                                          r"got 0.0002 \(in profile smoke\)$"):
        for_devices(load_config("smoke", {"lr_devices": 16}), 1)
    with pytest.raises(ConfigError, match=r"^lr_devices: must be a positive integer, got 0 "):
        load_config("gpu", {"lr_devices": 0})
    assert parse_overrides(["--lr_devices", "2"]) == {"lr_devices": 2}


# ----------------------------------------------------------------- error messages
def test_a_depth_outside_the_family_names_the_depths_there_are():
    with pytest.raises(ConfigError, match=r"^depth: must be one of 14, 26, 50, 101, 152, got 34 "
                       r"\(in command-line arguments\)$"):
        load_config("smoke", parse_overrides(["--depth", "34"]))


def test_out_of_range_value_names_key_value_and_file(tmp_path):
    path = write(tmp_path, "batch_size: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"batch_size: must be a positive integer, got 0 (in {path})"
    assert (info.value.key, info.value.value, info.value.source) == ("batch_size", 0, str(path))


def test_shipped_file_is_named_relative_to_the_repository():
    # smoke's train_samples (from the file) is smaller than this batch size.
    with pytest.raises(ConfigError, match=r"^train_samples: must be at least batch_size "
                       r"\(4096, from overrides\) .*, got \d+ \(in configs/smoke\.yaml\)$"):
        load_config("smoke", {"batch_size": 4096})


@pytest.mark.parametrize("source", ["file", "overrides"])
def test_misspelt_key_suggests_the_right_one(tmp_path, source):
    if source == "file":
        with pytest.raises(ConfigError) as info:
            load_config(write(tmp_path, "batchsize: 64\n"))
    else:
        with pytest.raises(ConfigError) as info:
            load_config("smoke", {"batchsize": 64})
    assert str(info.value).startswith("unknown key 'batchsize' (did you mean 'batch_size'?)")
    assert info.value.key == "batchsize"


def test_unknown_key_without_a_close_match_lists_the_keys():
    with pytest.raises(ConfigError, match=r"unknown key 'zzz'; known keys: profile, "
                                          r"device_target, .* \(in overrides\)$"):
        load_config("smoke", {"zzz": 1})


@pytest.mark.parametrize("key, bad, choices", [
    ("device_target", "TPU", "'CPU', 'GPU', 'Ascend'"),
    ("mode", "eager", "'graph', 'pynative'"),
    ("stem", "resnet", "'imagenet', 'cifar'"),
    ("lr_schedule", "exponential", "'steps', 'poly', 'cosine', 'linear', 'constant'"),
    ("amp_level", "O4", "'O0', 'O1', 'O2', 'O3', 'auto'"),
])
def test_enum_error_lists_the_choices(key, bad, choices):
    with pytest.raises(ConfigError) as info:
        load_config("smoke", {key: bad})
    assert str(info.value).startswith(f"{key}: must be one of {choices}, got {bad!r}")


def test_enum_with_wrong_case_suggests_the_spelling():
    with pytest.raises(ConfigError, match=r"got 'gpu' \(did you mean 'GPU'\?\) \(in overrides\)"):
        load_config("smoke", {"device_target": "gpu"})


@pytest.mark.parametrize("key, bad", [
    ("epoch_size", 2.5), ("epoch_size", "3"), ("epoch_size", True), ("epoch_size", None),
    ("lr_max", "fast"), ("lr_max", 0), ("lr_max", float("nan")), ("lr_end", -1e-5),
    ("momentum", 1.0), ("image_size", 16), ("train_samples", 50_001),
    ("eval_samples", 0), ("data_md5", "abc"), ("data_dir", ""), ("seed", -1),
    ("num_workers", 0), ("loss_scale", 0.5), ("label_smoothing", 1.0),
])
def test_wrong_type_or_range_is_one_error_naming_the_key(key, bad):
    with pytest.raises(ConfigError) as info:
        load_config("smoke", {key: bad})
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: must be ")
    assert str(info.value).endswith("(in overrides)")


@pytest.mark.parametrize("overrides, key", [
    ({"lr_init": 0.5}, "lr_init"),
    ({"lr_end": 0.2}, "lr_end"),
    ({"warmup_epochs": 3, "epoch_size": 2}, "warmup_epochs"),
])
def test_fields_that_depend_on_each_other(overrides, key):
    with pytest.raises(ConfigError, match=rf"^{key}: must not exceed "):
        load_config("smoke", overrides)


FRACTION = "progressive_size: must be a whole fraction of image_size (32, from configs/smoke.yaml)"


@pytest.mark.parametrize("overrides, message", [
    ({"progressive_size": 24}, FRACTION), ({"progressive_size": 32}, FRACTION),
    ({"progressive_size": 16}, "progressive_size: does nothing with progressive_epochs 0"),
    ({"progressive_epochs": 1}, "progressive_epochs: needs progressive_size (null here)"),
    ({"progressive_size": 16, "progressive_epochs": 3},
     "progressive_epochs: must be less than epoch_size (3, from configs/smoke.yaml)"),
])
def test_progressive_resizing_is_checked_against_the_size_and_the_epochs(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config("smoke", overrides)
    assert load_config("smoke", {"progressive_size": 16, "progressive_epochs": 2}) \
        .progressive_size == 16


def test_conflict_names_where_each_side_came_from():
    with pytest.raises(ConfigError) as info:
        load_config("gpu", {"epoch_size": 3})
    assert str(info.value) == ("warmup_epochs: must not exceed epoch_size (3, from overrides), "
                               "got 5 (in configs/gpu.yaml)")


def test_null_is_accepted_where_the_field_allows_it():
    config = load_config("smoke", {"train_samples": None, "resume_from": None})
    assert config.train_samples is None


def test_integers_are_accepted_for_float_fields():
    config = load_config("smoke", {"lr_max": 1, "lr_end": 0})
    assert type(config.lr_max) is float and config.lr_max == 1.0


def test_constructing_config_directly_validates():
    with pytest.raises(ConfigError, match=r"\(in Config\(\.\.\.\)\)$"):
        Config(batch_size=0)


def test_unknown_profile_suggests_a_name():
    with pytest.raises(ConfigError, match=r"unknown profile 'gpus' \(did you mean 'gpu'\?\); "
                                          r"available: .*smoke"):
        load_config("gpus")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.yaml")


# ----------------------------------------------------------------- YAML details
def test_partial_file_keeps_defaults_and_takes_its_file_name(tmp_path):
    config = load_config(write(tmp_path, "device_target: CPU\nepoch_size: 7\n", "tiny.yaml"))
    assert (config.profile, config.epoch_size, config.batch_size) == ("tiny", 7, 32)


def test_exponent_without_a_dot_is_a_float(tmp_path):
    # Plain PyYAML (YAML 1.1) reads 1e-5 as the string '1e-5'.
    assert load_config(write(tmp_path, "lr_end: 1e-5\n")).lr_end == 1e-5


def test_duplicate_key_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="duplicate key 'epoch_size'"):
        load_config(write(tmp_path, "epoch_size: 3\nepoch_size: 4\n"))


@pytest.mark.parametrize("text, message", [("- 1\n- 2\n", "must be a mapping"),
                                           ("a: [1\n", "not valid YAML")])
def test_file_that_is_not_a_mapping_is_named(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_config(path)


@pytest.mark.parametrize("text", ["", "\n", "# my profile, keys to come\n", "{}\n"])
def test_an_empty_file_is_refused_not_read_as_the_ascend_recipe(tmp_path, text):
    """Issue 45: an empty profile loaded Config()'s defaults (device_target Ascend)."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: empty, names no keys")):
        load_config(path)


# ----------------------------------------------------------------- overrides
def test_overrides_change_only_their_keys():
    base, changed = load_config("cpu"), load_config("cpu", {"epoch_size": 7, "profile": "cpu"})
    assert changed.epoch_size == 7
    assert dataclasses.replace(changed, epoch_size=base.epoch_size) == base


def test_overriding_the_profile_name_is_refused():
    with pytest.raises(ConfigError, match="^profile: must be the profile being loaded"):
        load_config("smoke", {"profile": "gpu"})


def test_parse_overrides_converts_to_field_types():
    parsed = parse_overrides(["--batch_size", "64", "--lr-end=0", "--train_samples", "None",
                              "--lr_schedule", "cosine", "--lr_max", "1e-2"])
    assert parsed == {"batch_size": 64, "lr_end": 0.0, "train_samples": None,
                      "lr_schedule": "cosine", "lr_max": 0.01}
    assert type(parsed["lr_end"]) is float
    config = load_config("gpu", parsed)
    assert (config.batch_size, config.lr_schedule, config.epoch_size) == (64, "cosine", 90)


def test_parse_overrides_last_value_wins():
    assert parse_overrides(["--seed", "1", "--seed=2"]) == {"seed": 2}


@pytest.mark.parametrize("args, message", [
    (["--batch_size", "many"], "batch_size: must be a positive integer, got 'many' "
                               "(in command-line arguments)"),
    (["--epoch_size"], "epoch_size: missing value after --epoch_size"),
    (["batch_size", "3"], "expected --key, got 'batch_size'"),
    (["--batchsize", "3"], "unknown key 'batchsize' (did you mean 'batch_size'?)"),
    (["--epoch_size", "none"], "epoch_size: must be a positive integer, got 'none'"),
])
def test_parse_overrides_errors(args, message):
    with pytest.raises(ConfigError) as info:
        parse_overrides(args)
    assert str(info.value).startswith(message)


def test_range_errors_from_the_command_line_say_so():
    with pytest.raises(ConfigError, match=r"^batch_size: .*, got 0 \(in command-line arguments\)$"):
        load_config("smoke", parse_overrides(["--batch_size", "0"]))


# ----------------------------------------------------------------- output
def test_to_dict_lists_every_field_in_order_and_round_trips():
    config = load_config("smoke")
    data = config.to_dict()
    assert list(data) == list(FIELDS)
    assert Config(**data) == config


def test_to_yaml_reads_back_to_the_same_config(tmp_path):
    config = load_config("gpu", {"epoch_size": 7, "lr_end": 1e-7})
    assert load_config(write(tmp_path, config.to_yaml(), "saved.yaml")) == config


def test_profiles_table_has_one_row_per_field():
    rows = profiles_table(["smoke", "gpu"])
    assert rows[0] == ["key", "smoke", "gpu"]
    assert [row[0] for row in rows[1:]] == [key for key in FIELDS if key != "profile"]
    assert ["image_size", "32", "224"] in rows
    assert ["lr_end", "1e-05", "1e-05"] in rows
    assert ["train_samples", str(load_config("smoke").train_samples), "null"] in rows


def test_profiles_table_differences_only():
    keys = [row[0] for row in profiles_table(PROFILES, differences_only=True)[1:]]
    assert "device_target" in keys and "image_size" in keys
    assert "num_classes" not in keys and "momentum" not in keys  # the same everywhere


def test_markdown_table():
    text = markdown_table([["key", "a"], ["x", "1|2"]])
    assert text.splitlines() == ["| key | a |", "| --- | --- |", "| x | 1\\|2 |"]


def test_data_url_default_is_the_official_archive():
    from msresnet.data import cifar10  # the package's own module: an import error fails
    assert Config().data_url == cifar10.OFFICIAL_URL


def test_batch_of_one_on_a_one_pixel_last_stage_is_refused() -> None:
    # imagenet stem at 32x32: layer4 is 1x1, so one image a batch gives BatchNorm one
    # value per channel and a NaN moving variance (measured); the cifar stem keeps 4x4.
    with pytest.raises(ConfigError, match=r"batch_size: must be at least 2 with stem 'imagenet' "
                                          r"at image_size 32: .* 1x1.*NaN.*got 1"):
        load_config("smoke", {"batch_size": 1, "train_samples": 1})
    assert load_config("smoke", {"batch_size": 1, "train_samples": 1, "stem": "cifar"}).batch_size == 1
    assert load_config("smoke", {"batch_size": 1, "train_samples": 1, "image_size": 64}).batch_size == 1
    with pytest.raises(ConfigError, match=r"at progressive_size 16: .* 1x1"):
        load_config("smoke", {"batch_size": 1, "train_samples": 1, "image_size": 64,
                              "progressive_size": 16, "progressive_epochs": 1})


# ----------------------------------------------------------------- boolean fields
@pytest.mark.parametrize("text, value", [("false", False), ("False", False), ("no", False),
                                         ("0", False), ("true", True), ("YES", True), ("1", True)])
def test_boolean_from_the_command_line(text, value):
    parsed = parse_overrides(["--zero_init_residual", text])
    assert parsed == {"zero_init_residual": value}
    assert load_config("smoke", parsed).zero_init_residual is value


def test_boolean_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"^zero_init_residual: must be true or false, "
                                          r"got 'maybe' \(in command-line arguments\)"):
        parse_overrides(["--zero_init_residual", "maybe"])
    with pytest.raises(ConfigError, match=r"zero_init_residual: must be true or false, got 1"):
        load_config("smoke", {"zero_init_residual": 1})


def test_zero_init_residual_in_every_profile_and_a_file(tmp_path):
    for name in PROFILES:
        assert load_config(name).zero_init_residual is True  # the seed's model_zoo ResNet
    assert load_config(write(tmp_path, "zero_init_residual: false\n")).zero_init_residual is False


# ----------------------------------------------------------------- checked once, frozen
def _count_checks(monkeypatch) -> list[int]:
    from msresnet.config import profile as config_module

    calls: list[int] = []
    real = config_module._check_values

    def counting(values, source_of):
        calls.append(1)
        return real(values, source_of)
    monkeypatch.setattr(config_module, "_check_values", counting)
    return calls


def test_one_load_checks_the_config_once(monkeypatch, tmp_path):
    calls = _count_checks(monkeypatch)
    load_config("smoke", {"epoch_size": 2, "train_samples": "none"})
    assert len(calls) == 1
    load_config(write(tmp_path, "epoch_size: 7\n"))
    assert len(calls) == 2


def test_a_change_is_a_new_config_checked_once(monkeypatch):
    config = load_config("smoke")
    calls = _count_checks(monkeypatch)
    changed = dataclasses.replace(config, epoch_size=4, lr_max=1)
    assert len(calls) == 1
    assert (changed.epoch_size, changed.lr_max, type(changed.lr_max)) == (4, 1.0, float)
    assert config.epoch_size == load_config("smoke").epoch_size  # the original is unchanged
    with pytest.raises(ConfigError,
                       match=r"^lr_init: must not exceed lr_max .*\(in Config\(\.\.\.\)\)$"):
        dataclasses.replace(config, lr_max=config.lr_init / 2)


def test_config_is_frozen():
    config = load_config("smoke")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.batch_size = 0  # would skip every check
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, "data_dir", "elsewhere")
    assert config.batch_size == load_config("smoke").batch_size


def test_sources_name_where_a_changed_value_came_from():
    config = load_config("smoke")
    with pytest.raises(ConfigError, match=r"^epoch_size: must be a positive integer, got 0 "
                                          r"\(in the launcher\)$"):
        dataclasses.replace(config, epoch_size=0, sources={"epoch_size": "the launcher"})
    with pytest.raises(ConfigError, match=r"\(in my script\)$"):
        dataclasses.replace(config, batch_size=0, sources="my script")
    assert "sources" not in config.to_dict() and "sources" not in repr(config)


# ----------------------------------------------------------------- one null vocabulary
@pytest.mark.parametrize("word", ["null", "none", "~", "None", "NULL", " Null "])
def test_null_words_from_the_command_line(word):
    from msresnet.config.profile import NULL_WORDS, is_null_word

    assert is_null_word(word) and word.strip().lower() in NULL_WORDS
    parsed = parse_overrides(["--train_samples", word, f"--resume_from={word}"])
    assert parsed == {"train_samples": None, "resume_from": None}
    assert load_config("smoke", parsed).train_samples is None


@pytest.mark.parametrize("word", ["null", "none", "~", "None", "'~'", "'null'", "NONE"])
def test_null_words_in_a_yaml_file(tmp_path, word):
    # YAML's own null, ~ and empty are None already; 'none' and a quoted '~' are text.
    config = load_config(write(tmp_path, f"device_target: CPU\ntrain_samples: {word}\n"
                                         f"data_md5: {word}\n"))
    assert (config.train_samples, config.data_md5) == (None, None)


@pytest.mark.parametrize("word", ["null", "none", "~", "None"])
def test_null_words_in_overrides(word):
    assert load_config("smoke", {"train_samples": word}).train_samples is None
    assert Config(train_samples=word).train_samples is None


@pytest.mark.parametrize("word", ["null", "none", "~"])
def test_null_words_are_refused_where_null_is_not_allowed(tmp_path, word):
    with pytest.raises(ConfigError, match=rf"^batch_size: must be a positive integer, "
                                          rf"got {re.escape(repr(word))} \(in overrides\)$"):
        load_config("smoke", {"batch_size": word})
    with pytest.raises(ConfigError, match=r"^epoch_size: must be a positive integer, got "):
        parse_overrides(["--epoch_size", word])


# ----------------------------------------------------------------- one "did you mean"
def test_every_spelling_hint_is_the_same_helper(capsys):
    """Commands, config keys, values and profiles, notebook and -p parameters: one
    helper, which also finds a word typed in the wrong case."""
    from msresnet import cli
    from msresnet.chapters.notebook import ParameterError, config_from_parameters
    from msresnet.chapters.reproduce import ReproduceError, typed_parameters

    assert cli.did_you_mean("EPOCH_SIZE", FIELDS) == " (did you mean 'epoch_size'?)"
    assert cli.did_you_mean("batchsize", ["batch_size", "seed"]) == " (did you mean 'batch_size'?)"
    assert cli.did_you_mean("zzz", FIELDS) == ""
    assert cli.main(["LAUNCH"]) == 2  # USAGE_ERROR
    assert "unknown command 'LAUNCH' (did you mean 'launch'?)" in capsys.readouterr().err
    with pytest.raises(ConfigError,
                       match=r"unknown key 'EPOCH_SIZE' \(did you mean 'epoch_size'\?\)"):
        load_config("smoke", {"EPOCH_SIZE": 3})
    with pytest.raises(ParameterError, match=r"'EPOCH_SIZE' \(did you mean 'epoch_size'\?\)"):
        config_from_parameters({"EPOCH_SIZE": 3})
    with pytest.raises(ReproduceError, match=r"\(did you mean 'epoch_size'\?\)"):
        typed_parameters([("EPOCH_SIZE", "3")], set())
