"""The GPU records (``results/gpu/``) and what the book says of them.

The GPU/Ascend page's section "Measured on one GPU" quotes the H200 and H100 runs; every
figure it quotes is computed here from the records and looked for in that section
(and the doctor's printed lines in the page's examples), so a record that changes
moves the page or fails this test. The ``gpu`` profile's AMP level is the one the
records show the GPU accepting.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import pytest
import yaml

from msresnet.config.profile import load_config

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "results" / "gpu"
RUN = GPU / "h200-2026-12-04"
PAGE = (REPO / "book" / "gpu-ascend.md").read_text()
MEASURED = " ".join(
    PAGE[PAGE.index("(gpu-ascend-measured)="):PAGE.index("(gpu-ascend-one-gpu)=")].split())
"""The section, its line breaks made spaces (a figure may span two lines)."""


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _checks(record: dict) -> dict[str, dict]:
    return {check["name"]: check for check in record["checks"]}


def _history(folder: Path, name: str = "history.csv") -> list[dict[str, float]]:
    with (folder / name).open() as handle:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)]


def _busy(log: Path, start: str, end: str) -> list[int]:
    """nvidia-smi dmon's SM % between two times of day."""
    rows = [line.split() for line in log.read_text().splitlines() if not line.startswith("#")]
    return [int(r[2]) for r in rows if len(r) > 2 and start <= r[0] <= end]


def test_the_doctor_passed_on_the_gpu_profile_and_the_page_quotes_it():
    record = _json(RUN / "doctor_gpu.json")
    checks = _checks(record)
    assert record["ok"] and record["config"]["amp_level"] == "O2"
    assert checks["toolkit"]["notes"] == [
        "CUDA 11.8 runs MindSpore's CUDA 11.6 kernels (minor-version compatibility)"]
    assert "/plugin/gpu11.6/libnccl.so.2" in checks["msrun"]["summary"]
    speed = checks["speed"]["details"]
    rate = f"{speed['timing']['images_per_second']:.1f} images/s"
    epoch = f"{speed['projection']['epoch_seconds']:.0f} s per epoch"
    run = f"{speed['projection']['run_seconds'] / 60:.1f} min"
    for figure in (rate, epoch, run):
        assert figure in MEASURED, figure
    # the example output on the page is the record's own lines
    printed = (RUN / "doctor_gpu.log").read_text()
    for line in (checks["speed"]["summary"], *checks["speed"]["notes"][:2]):
        assert line in printed and line in PAGE, line


def test_o3_fails_at_validation_with_mindspores_line_and_the_page_says_so():
    checks = _checks(_json(RUN / "doctor_gpu_O3.json"))
    speed = checks["speed"]
    assert speed["status"] == "FAIL"
    assert "Select GPU operator[BatchNorm] fail! Unsupported data type!" in speed["summary"]
    assert "use amp_level O2" in speed["fix"]
    # training passed; the first validation (Model.eval) is where it failed
    assert "model.eval(" in speed["details"]["traceback"]
    assert "rejects the first validation (BatchNorm)" in MEASURED
    # the earlier session's run of the profile at O3 failed the same way
    assert "Select GPU operator[BatchNorm] fail!" in (
        GPU / "h200-gpu12-o2" / "gpu12o3_train.log").read_text()


def test_the_gpu_profile_uses_the_amp_level_the_gpu_accepted():
    assert load_config("gpu").amp_level == _json(RUN / "doctor_gpu.json")["config"]["amp_level"]
    assert load_config("gpu").amp_level != _json(RUN / "doctor_gpu_O3.json")["config"][
        "amp_level"]
    assert load_config("ascend").amp_level == "O3"  # the repository's, on Ascend


def test_one_epoch_of_the_profile_as_shipped_trained_swept_and_exported():
    run = RUN / "train_gpu_run"
    (epoch,) = _history(run)
    assert f"{epoch['images_per_second']:.1f} images/s" in MEASURED
    assert f"{epoch['train_seconds']:.0f} s training and {epoch['eval_seconds']:.0f} s " \
           "validating" in MEASURED
    assert f"top-1 {100 * epoch['val_top1']:.2f} %" in MEASURED
    sweep = _json(run / "sweep.json")
    assert sweep, "the sweep wrote its record"
    exported = (RUN / "export_gpu.log").read_text()
    assert "resnet50.mindir" in exported and "resnet50.onnx" in exported


def test_the_twelve_epoch_run_and_the_fast_recipe():
    best = _json(GPU / "h200-gpu12-o2" / "best.json")
    log = (GPU / "h200-gpu12-o2" / "gpu12o2_train.log").read_text()
    seconds = float(re.search(r"done: 12 epochs, \d+ steps, ([\d.]+) s", log).group(1))
    assert f"test top-1 {100 * best['top1']:.2f} % in {seconds:.1f} s" in MEASURED

    fast = RUN / "train_fast_run"
    history, test = _history(fast), _json(fast / "test.json")
    result = _json(fast / "result.json")
    rate = statistics.median(row["images_per_second"] for row in history[1:])
    assert f"{round(rate, -1):,.0f} images/s" in MEASURED
    assert f"test top-1 {100 * test['chosen']['top1']:.2f} %" in MEASURED
    assert test["selected_on"]["images"] == 5000 and "5,000 held-out" in MEASURED
    assert f"{result['seconds']:.1f} s in all" in MEASURED


def _seventy_five() -> tuple[list[dict[str, float]], dict, float]:
    """The gpu-fast run on the H100: history, test.json and its seconds (train75.log)."""
    folder = GPU / "h100-fast75"
    log = (folder / "train75.log").read_text()
    seconds = float(re.search(r"done: 75 epochs, \d+ steps, ([\d.]+) s", log).group(1))
    return _history(folder), _json(folder / "test.json"), seconds


FUSION = GPU / "h100-2026-12-06-fusion"
BN16 = GPU / "h100-2026-12-06-bn16"


def _notebook_prose(path: Path) -> str:
    """A notebook's markdown cells as one line of text (line breaks made spaces)."""
    cells = _json(path)["cells"]
    return " ".join(" ".join("".join(c["source"]) for c in cells
                             if c["cell_type"] == "markdown").split())


def _troubleshooting() -> str:
    return _notebook_prose(REPO / "book" / "troubleshooting.ipynb")


def _comments(path: Path) -> str:
    """A YAML file's comment lines as one line of text."""
    lines = [line[1:] for line in path.read_text().splitlines() if line.startswith("#")]
    return " ".join(" ".join(lines).split())


def _run(folder: Path) -> tuple[list[dict[str, float]], dict, dict]:
    """A gpu-fast run's history, test.json and result.json."""
    run = folder / "gpu_fast_run"
    return _history(run), _json(run / "test.json"), _json(run / "result.json")


def _shipped_run() -> tuple[list[dict[str, float]], dict, dict]:
    """The gpu-fast profile's run as shipped."""
    return _run(BN16)


def test_the_gpu_fast_profile_is_the_run_on_record_and_the_page_quotes_it():
    """configs/gpu-fast.yaml is what trained in h100-2026-12-06-bn16/gpu_fast_run/,
    key for key, as choose_profile.py wrote it in that lease; the page's figures for
    it are that run's."""
    recorded = yaml.safe_load((BN16 / "gpu_fast_run" / "config.yaml").read_text())
    shipped = load_config("gpu-fast").to_dict()
    for key in ("profile", "data_dir"):
        recorded.pop(key), shipped.pop(key)
    # depth came after this run, whose package built only ResNet50: the profile's 50
    assert "depth" not in recorded and shipped.pop("depth") == 50
    assert shipped == recorded
    assert (shipped["data_format"], shipped["amp_batchnorm"]) == ("NCHW", "float16")
    strip = lambda text: [x for x in text.splitlines()  # noqa: E731
                          if not x.startswith(("#", "depth:"))]
    assert strip((BN16 / "gpu-fast.yaml").read_text()) == strip(
        (REPO / "configs" / "gpu-fast.yaml").read_text())
    history, test, result = _shipped_run()
    rate = statistics.median(row["images_per_second"] for row in history[1:])
    epochs = shipped["epoch_size"]
    assert len(history) == epochs == 100 and test["chosen"]["epoch"] == 98
    assert all(row["train_loss"] == row["train_loss"] for row in history)  # finite
    assert f"{round(rate, -1):,.0f} images/s" in MEASURED
    seconds = result["seconds"]
    assert f"{seconds:.1f} s of training and validation for its {epochs} epochs" in MEASURED
    assert f"(epoch {test['chosen']['epoch']}) at {100 * test['chosen']['top1']:.2f} % top-1" \
        in MEASURED
    assert test["selected_on"]["images"] == 5000
    short = 93.87 - 100 * test["chosen"]["top1"]
    assert f"{short:.2f} points short of the seed's 93.87 %" in MEASURED
    assert f"cut by a factor of {(48 * 60 + 38) / seconds:.1f}" in MEASURED
    assert seconds <= 15 * 60  # "a quarter of an hour"
    said = _comments(REPO / "configs" / "gpu-fast.yaml")  # the profile's own comment
    assert f"{epochs} epochs in {seconds:.1f} s of training and validation, test top-1 " \
           f"{100 * test['chosen']['top1']:.2f} %" in said
    assert "(results/gpu/h100-2026-12-06-bn16/)" in said
    for chapter, words in (("02_config_lr", f"{epochs} epochs of 45,000 images"),
                           ("10_training_budget", f"`gpu-fast` ({epochs} epochs at 32x32")):
        assert words in _notebook_prose(REPO / "notebooks" / f"{chapter}.ipynb"), chapter


def test_more_epochs_bought_no_accuracy():
    """The page: the three runs of the recipe (75, 89 and 100 epochs) end on about the
    same training loss, and the longest scores no better than the 89-epoch one."""
    runs = [_seventy_five(), _run(FUSION), _shipped_run()]  # history, test, seconds or result
    epochs = [len(history) for history, _, _ in runs]
    losses = [history[-1]["train_loss"] for history, _, _ in runs]
    scores = [100 * test["chosen"]["top1"] for _, test, _ in runs]
    assert epochs == [75, 89, 100] and scores[2] <= scores[1]
    assert f"between {min(losses):.3f} and {max(losses):.3f}" in MEASURED
    assert f"trained 89 epochs in {runs[1][2]['seconds']:.1f} s and scored " \
           f"{scores[1]:.2f} %" in MEASURED
    assert f"scored {scores[0]:.2f} % in {runs[0][2]:.1f} s" in MEASURED


def test_the_lever_timing_chose_float16_batchnorm_and_the_twin_ran_beside_it():
    """The fifth H100: float16 BatchNorm was the fastest finite lever, NHWC with it is
    refused, and the whole recipe ran at 0.79x its PyTorch twin on the same card."""
    levers = {lv["name"]: lv for lv in _json(BN16 / "levers.json")}
    bn16, nhwc = levers["bn16"]["result"], levers["nhwc"]["result"]
    assert bn16["images_per_second"] > nhwc["images_per_second"] > \
        levers["base"]["result"]["images_per_second"]
    assert all("'float16' trains to NaN with data_format 'NHWC'" in levers[n]["error"]
               for n in ("nhwc_bn16", "nhwc_bn16_b512"))
    assert f"({bn16['images_per_second']:,.2f} images/s against " \
           f"{nhwc['images_per_second']:,.1f} for NHWC)" in MEASURED
    twin = _json(BN16 / "twin_fast75.json")
    assert twin["gpu"] == _json(BN16 / "twin_fast18.json")["gpu"] == "NVIDIA H100 80GB HBM3"
    theirs = statistics.median(e["images_per_second"] for e in twin["history"][1:])
    ours = statistics.median(r["images_per_second"] for r in _shipped_run()[0][1:])
    assert f"at a median of about {round(ours, -1):,.0f} images/s per epoch" in MEASURED
    assert f"at about {round(theirs, -1):,.0f}: {ours / theirs:.2f}x" in MEASURED
    assert f"about {round(theirs, -1):,.0f} images/s (median epoch" in MEASURED
    assert ours / theirs >= 0.6  # the goal, on the same card
    short = _json(BN16 / "twin_fast18.json")
    mindspore18 = _json(RUN / "train_fast_run" / "test.json")["chosen"]["top1"]
    assert short["overrides"] == ["epoch_size=18", "warmup_epochs=1"]
    assert f"scored {100 * short['test_chosen']['top1']:.2f} % for 18 epochs, where " \
           f"MindSpore's 18-epoch run scored {100 * mindspore18:.2f} %, and " \
           f"{100 * twin['test_chosen']['top1']:.2f} % for 75" in MEASURED


def test_the_twin_trained_the_same_recipe_to_the_same_place():
    """The PyTorch twin read the same profile with epoch_size 75 and ended on the
    training loss MindSpore ended on; the page's figures are the records'."""
    twin = _json(GPU / "h100-2026-12-06" / "twin_fast75.json")
    history, test, _ = _seventy_five()
    assert twin["overrides"] == ["epoch_size=75"] and twin["profile"] == "results/gpu/fast.yaml"
    assert twin["gpu"] == "NVIDIA H100 80GB HBM3" and len(twin["history"]) == 75
    ours, theirs = history[-1]["train_loss"], twin["history"][-1]["train_loss"]
    assert f"{ours:.3f}" == f"{theirs:.3f}" and f"training loss, {ours:.3f}" in MEASURED
    top1 = twin["test_chosen"]["top1"]
    assert f"{100 * top1:.2f} % on the test set" in MEASURED
    gap = 100 * (top1 - test["chosen"]["top1"])
    assert f"{gap:.2f} points from MindSpore's 75-epoch run" in MEASURED
    assert f"test top-1 {100 * top1:.2f} %; the same final training loss, {theirs:.3f}; " \
           f"{twin['seconds']:.1f} s" in MEASURED


def test_pytorch_on_the_same_gpu_and_the_ratios_the_page_gives():
    for record in (RUN / "pytorch.json", GPU / "h100-2026-12-06" / "pytorch.json",
                   FUSION / "pytorch.json"):
        for row in _json(record)["results"]:
            assert f"{row['images_per_s']:.1f} images/s ({row['layout']})" in MEASURED
    rows = {r["layout"]: r["images_per_s"]
            for r in _json(GPU / "h100-2026-12-06" / "pytorch.json")["results"]}
    assert f"{rows['NCHW']:.1f} images/s in NCHW and {rows['channels_last']:.1f} in " \
           "channels_last" in MEASURED
    history, _, _ = _seventy_five()
    ours = statistics.median(r["images_per_second"] for r in history[1:])
    said = [float(x) for x in re.findall(r"(\d\.\d\d)x", MEASURED)]
    assert said[:2] == [round(ours / rows["NCHW"], 2), round(ours / rows["channels_last"], 2)]


def test_the_gpu_was_busy_while_mindspore_trained():
    """What makes the pipeline an unlikely limit: SM busy in steady training."""
    chain = (RUN / "chain.log").read_text()
    start, end = re.search(r"\[(\S+)\] start train_gpu.*\n\[(\S+)\] end train_gpu", chain).groups()
    h100 = (GPU / "h100-fast75" / "chain.log").read_text()
    start75, end75 = re.search(r"\[(\S+)\] train75 start\n\[(\S+)\] train75 exit", h100).groups()
    samples = [_busy(RUN / "dmon.log", start, end),
               _busy(RUN / "dmon_fast.log", "00:00:00", "23:59:59"),
               _busy(GPU / "h100-fast75" / "dmon.log", start75, end75)]
    steady = [[b for b in busy if b > 50] for busy in samples]
    medians = [statistics.median(s) for s in steady]
    assert min(medians) >= 96 and max(max(s) for s in steady) <= 99, medians
    assert "busy 96 to 99 %" in MEASURED


@pytest.mark.parametrize("figure", ["93.87 %", "\"about 20 s per epoch\"", "\"48 min 38 s\""])
def test_the_seed_figures_stand_beside_the_measured_ones(figure):
    assert figure in MEASURED


def test_the_pages_figure_is_drawn_from_the_records(tmp_path):
    """results/gpu/figures/twin-accuracy.png is what results/gpu/draw.py draws from the
    two 75-epoch records (the same bytes: PNGs carry no software version), and the page
    shows it with the caption the drawing gives."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_draw", GPU / "draw.py")
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    path, caption = draw.draw_twin(out=tmp_path / "twin-accuracy.png")
    assert path.read_bytes() == (GPU / "figures" / "twin-accuracy.png").read_bytes()
    assert "../results/gpu/figures/twin-accuracy.png" in PAGE
    assert " ".join(caption.split()) in MEASURED


def test_the_fast_recipe_does_about_a_third_of_the_profiles_arithmetic():
    """The page: the fast recipe's input is 'about a third of the multiply-adds per
    image' of the gpu profile's, counted on the two networks at their two sizes."""
    import msresnet  # noqa: F401  (the CPU setting before MindSpore)
    from msresnet.model.flops import count_macs
    from msresnet.config.run import build_run_config
    from msresnet.training.factories import make_network

    gpu, fast = build_run_config("gpu"), build_run_config(str(GPU / "fast.yaml"))
    ratio = (count_macs(make_network(fast), fast.image_size).total
             / count_macs(make_network(gpu), gpu.image_size).total)
    assert 0.29 < ratio < 0.37, ratio
    assert "about a third of the multiply-adds per image" in MEASURED


def test_the_intro_and_the_readme_tell_the_gpu_figures_the_records_give():
    """One story: the intro, the README and the page's One GPU block quote the H100
    run, its twin and the 90-epoch projection as the records give them."""
    intro = " ".join((REPO / "book" / "intro.md").read_text().split())
    readme = " ".join((REPO / "README.md").read_text().split())
    page = " ".join(PAGE.split())
    _, before, _ = _seventy_five()
    history, test, result = _shipped_run()
    twin = _json(GPU / "h100-2026-12-06" / "twin_fast75.json")["test_chosen"]["top1"]
    airbench = _json(GPU / "h100-2026-12-06-levers" / "airbench.json")["scripts"]["airbench94"]
    for text in (intro, readme):
        assert f"{airbench['mean']:.2f} % on" in text and "94.01 % on the official files" in text
        assert f"{len(history)} epochs in {result['seconds']:.1f} s of training and " \
               "validation" in text
        assert f"{100 * test['chosen']['top1']:.2f} %" in text
        assert f"{100 * before['chosen']['top1']:.2f} %" in text
        assert f"{100 * twin:.2f} %" in text
    first = _history(RUN / "train_gpu_run")[0]
    minutes = 90 * (first["train_seconds"] + first["eval_seconds"]) / 60
    for text in (readme, page):
        assert f"{first['train_seconds']:.1f} s" in text and f"{first['eval_seconds']:.1f} s" in text
        assert f"about {round(minutes)} minutes" in text
    assert f"{result['seconds']:.1f} s of training and validation" in \
        page.split("(gpu-ascend-one-gpu)=")[1]
    assert "83 minutes" not in readme and "no GPU or NPU" not in readme
    assert "measured on a CPU" not in intro.split("## What hardware")[0].replace(
        "and is measured, on a CPU", "")


LEVERS = GPU / "h100-2026-12-06-levers"


def test_airbench_on_this_copy_and_the_page_says_what_the_copy_costs():
    """airbench's published recipes, run on the book's copy of CIFAR-10: the page
    quotes their means, the points the copy costs and the gap to the seed."""
    record = _json(LEVERS / "airbench.json")
    assert record["images"] == {"train": 50000, "test": 10000}
    assert record["gpu"] == "NVIDIA H100 80GB HBM3"
    runs = record["scripts"]
    assert len(runs["airbench94"]["accuracies"]) == 8 and len(runs["airbench96"]["accuracies"]) == 1
    for name, published in (("airbench94", 94.01), ("airbench96", 96.03)):
        entry = runs[name]
        mean = statistics.mean(entry["accuracies"])
        assert entry["published_mean"] == published and abs(mean - entry["mean"]) < 0.005
        assert f"{mean:.2f} %" in MEASURED and f"{published:.2f} %" in MEASURED
    cost = [94.01 - runs["airbench94"]["mean"], 96.03 - runs["airbench96"]["mean"]]
    assert f"{cost[0]:.2f} and {cost[1]:.2f} points less" in MEASURED
    assert min(cost) > 2.5  # "about three points"
    short = 93.87 - runs["airbench96"]["mean"]
    assert f"{short:.2f} points short of the seed's 93.87 % on this copy" in MEASURED
    _, test, _ = _seventy_five()
    assert abs(100 * test["chosen"]["top1"] - runs["airbench94"]["mean"]) < 0.5  # "stands where"


def test_the_levers_the_page_gives_are_the_records():
    levers = {lever["name"]: lever for lever in _json(LEVERS / "levers.json")}
    base, bn16 = levers["base"]["result"], levers["bn16"]["result"]
    assert bn16["train_loss"] != bn16["train_loss"]  # NaN
    assert base["train_loss"] == base["train_loss"] and base["train_loss"] > 2
    for name in ("nhwc", "nhwc_bn16", "nhwc_bn16_gk", "nhwc_bn16_b512"):
        assert "error" in levers[name] and "analyze_fail" in levers[name]["error"]
    rows = {r["layout"]: r["images_per_s"] for r in _json(LEVERS / "pytorch.json")["results"]}
    assert f"{base['images_per_second']:,.2f} images/s" in MEASURED
    assert f"{bn16['images_per_second']:,.2f} images/s" in MEASURED
    assert f"from {base['ms_per_step']} ms to {bn16['ms_per_step']} ms" in MEASURED
    island = base["ms_per_step"] - bn16["ms_per_step"]
    assert f"the island is {island:.1f} of the step's {base['ms_per_step']} ms" in MEASURED
    assert f"{bn16['images_per_second'] / rows['channels_last']:.2f}x PyTorch's" in MEASURED
    assert f"({rows['channels_last']:.1f} images/s in channels_last)" in MEASURED
    history = _history(LEVERS, "gpu_fast_history.csv")
    assert len(history) == 110 and all(row["train_loss"] != row["train_loss"] for row in history)
    assert {row["val_top1"] for row in history} == {0.1} and "trained 110 epochs of NaN" in MEASURED


def test_float16_batchnorm_is_right_alone_and_wrong_fused_with_its_relu():
    """bn_check.py's records: BatchNorm alone within float16's precision of float64 in
    every case, the fused BatchNorm + ReLU's input gradient far off; the page and the
    troubleshooting section quote them."""
    alone = _json(FUSION / "bn_check.json")
    assert len(alone) == 16 and {r["layout"] for r in alone} == {"NCHW", "NHWC"}
    grads = ("y", "dx", "dgamma", "dbeta")
    half = max(r[g]["rel_err"] for r in alone if r["dtype"] == "float16" for g in grads)
    full = max(r[g]["rel_err"] for r in alone if r["dtype"] == "float32" for g in grads)
    assert all(r[g]["finite"] for r in alone for g in grads)
    said = f"{half:.1e}".replace("e-0", "e-")  # 7.3e-4
    assert half < 1e-3 and full < 1e-5 and f"within {said}" in MEASURED
    fused = {(r["pattern"], r["layout"]): r for r in _json(FUSION / "bn_fused.json")}
    relu = fused["bn_relu", "NHWC"]
    assert relu["y"]["rel_err"] < 1e-3 and relu["dgamma"]["rel_err"] < 1e-3
    assert all(r["dx"]["rel_err"] > 0.5 for r in fused.values())
    assert f"the input gradient is {relu['dx']['rel_err']:.2f} of its largest value off" \
        in MEASURED
    assert fused["bn_relu", "NCHW"]["dx"] == relu["dx"]  # moved to NHWC by the backend
    assert f"{100 * relu['dx']['rel_err']:.0f} % off the reference" in _troubleshooting()


def test_the_fusion_avoided_trains_and_nhwc_compiles_as_the_page_says():
    base = {lv["name"]: lv for lv in _json(FUSION / "levers.json")}
    fix = {lv["name"]: lv["result"] for lv in _json(FUSION / "levers_fix.json")}
    default, nhwc = base["base"]["result"], base["nhwc"]["result"]
    for name in ("bn16", "nhwc_bn16", "nhwc_bn16_b512"):
        assert base[name]["result"]["train_loss"] != base[name]["result"]["train_loss"]
    assert all(r["train_loss"] == r["train_loss"] for r in fix.values())  # finite
    nft = fix["bn16_nft"]
    assert f"trained at {nft['images_per_second']:.1f} images/s" in MEASURED
    ratio = nft["images_per_second"] / default["images_per_second"]
    assert f"{ratio:.2f}x the float32-BatchNorm step" in MEASURED
    assert f"that step trained, {ratio:.1f} times faster than float32" in _troubleshooting()
    rows = {r["layout"]: r["images_per_s"] for r in _json(FUSION / "pytorch.json")["results"]}
    assert f"{nhwc['images_per_second']:,.2f} images/s, " \
           f"{nhwc['images_per_second'] / rows['channels_last']:.2f}x that card's" in MEASURED
    assert f"({default['images_per_second'] / rows['channels_last']:.2f}x with the defaults)" \
        in MEASURED
    assert f"{nhwc['images_per_second'] / default['images_per_second']:.2f}x faster" in MEASURED
    earlier = _json(LEVERS / "levers.json")[0]["result"]["images_per_second"]
    earlier_pt = {r["layout"]: r["images_per_s"]
                  for r in _json(LEVERS / "pytorch.json")["results"]}["channels_last"]
    assert f"{earlier_pt:.1f} and {rows['channels_last']:.1f} images/s in channels_last" \
        in MEASURED
    assert f"{earlier:,.2f} and {default['images_per_second']:,.2f} for MindSpore" in MEASURED


def test_the_kernels_compiled_ahead_started_at_once():
    said = re.search(r"probe ok \S+ ([\d.]+) s", (LEVERS / "probe.log").read_text())
    page = " ".join(PAGE.split())
    assert said and f"had its result {said.group(1)} s after `set_device`" in page
    assert float(said.group(1)) < 10


ABLATION = GPU / "h100-2026-12-06-ablation"


def test_the_ablation_table_is_the_records_and_no_lever_beats_two_seeds():
    """The GPU plan's rows as recorded, in the page's table in the plan's order; the
    page's reading of them (every lever inside the two seeds' spread) is the records'."""
    from msresnet.experiments import ablation

    rows = ablation.read_rows(plan=ablation.GPU)
    by_name = {r["row"]: r for r in rows}
    assert list(by_name)[:2] == ["recipe", "flip-tta"] and "seed-2" in by_name
    table = MEASURED[MEASURED.index("{list-table} The short-run ablation"):]
    table = table[:table.index("```")]
    quoted = [f"`{r['row']}`" for r in rows]
    assert [table.index(q) for q in quoted] == sorted(table.index(q) for q in quoted)
    for r in rows:
        cells = [f"{100 * r['valid']['top1']:.2f} %", f"{100 * r['test']['top1']:.2f} %"]
        cells.append(f"{r['train_seconds']:.1f} s" if r["scores"] == "last" else "(none)")
        assert " - ".join(cells) in table, (r["row"], cells)
        assert r["short"] == dict(ablation.GPU.short) and r["command"].startswith(
            "msresnet train gpu-fast --output_dir runs/ablation-gpu/")
    noise = ablation.noise_floor(rows)
    assert f"differ by {100 * noise:.2f} points on the held-out images" in MEASURED
    base = by_name["recipe"]["valid"]["top1"]
    for name in by_name.keys() - set(ablation.SEED_ROWS):
        delta = by_name[name]["valid"]["top1"] - base
        assert abs(delta) < noise, name  # what "inside that spread" says
        assert f"{100 * delta:+.2f}" in MEASURED, name
    flip = by_name["flip-tta"]["test"]["top1"] - by_name["recipe"]["test"]["top1"]
    assert f"; {100 * flip:+.2f} on the test set)" in MEASURED
    slower = by_name["size-40"]["train_seconds"] / by_name["recipe"]["train_seconds"]
    assert f"for {slower:.2f} times the time" in MEASURED
    missing = [row.name for row in ablation.GPU_ROWS if row.name not in by_name]
    assert len(missing) == 3 and "other three rows" in MEASURED  # named on the page
    assert {r["row"]: r["images_per_second"] for r in rows}["recipe"] > 7500  # gpu-fast's step


def test_mindspores_step_is_above_six_tenths_of_pytorchs_on_the_same_card():
    """Issue 42's speed goal, measured on one card: float16 BatchNorm's step against
    PyTorch's channels_last step, both timed by the same chain."""
    torch = {r["layout"]: r["images_per_s"] for r in _json(ABLATION / "pytorch.json")["results"]}
    levers = {lv["name"]: lv["result"]["images_per_second"]
              for lv in _json(ABLATION / "levers.json")}
    gpu = _json(ABLATION / "pytorch.json")["gpu"]
    assert gpu in (ABLATION / "machine.txt").read_text()
    ratio = levers["bn16"] / torch["channels_last"]
    assert ratio >= 0.6
    for path in ("book/intro.md", "README.md"):  # one story
        text = " ".join((REPO / path).read_text().split())
        assert f"at {ratio:.2f}x PyTorch's channels_last step" in text, path
    assert f"PyTorch's step ran at {torch['NCHW']:.1f} images/s in NCHW and " \
           f"{torch['channels_last']:.1f} in channels_last" in MEASURED
    assert f"{levers['base']:,.2f} with its defaults and {levers['bn16']:,.1f} with float16 " \
           f"BatchNorm: {ratio:.2f}x of PyTorch's channels_last step and " \
           f"{levers['bn16'] / torch['NCHW']:.2f}x of its NCHW step" in MEASURED
