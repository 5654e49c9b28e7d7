"""Set a profile's speed levers and epochs from measured lever speeds, in place.

Reads the levers record of ``scripts/gpu/levers.py``, takes the fastest lever
among those that only change speed (layout, BatchNorm precision, fusion, compile
level: never the batch or the recipe) and that trained to a finite loss and
validated, and writes its settings into PROFILE together with the most epochs
whose training and validation fit within BUDGET seconds at that speed
(first-epoch compile and a 5 % margin included). Only the ``key: value`` lines of
those keys change, so the profile's comments stay. Prints what it chose and why.

Usage: python3 scripts/gpu/choose_profile.py LEVERS.json PROFILE.yaml BUDGET_SECONDS
"""

import json
import math
import re
import sys

import yaml

from msresnet.config.profile import FIELDS, GPU_ONLY, load_config
from msresnet.data.cifar10 import TRAIN_IMAGES
from msresnet.model.lr_schedule import steps_per_epoch

SPEED_KEYS = (*GPU_ONLY, "jit_level")
"""The keys that change the step's speed and nothing it computes."""
MARGIN = 0.95
PER_EPOCH_OVERHEAD = 0.5  # callbacks, history, a checkpoint every few epochs (seconds)


def trained(result: dict) -> bool:
    """A lever is only a speed if the step it timed still trains: on one H100,
    ``amp_batchnorm: float16`` ran 3.2 times faster with a NaN loss from the first
    steps (results/gpu/h100-2026-12-06-levers/), and a profile chosen by speed alone
    trained 110 epochs of NaN."""
    return math.isfinite(result.get("train_loss", math.nan))


def main(levers_path: str, profile: str, budget: float) -> None:
    levers = json.load(open(levers_path))
    usable = [lv for lv in levers if "result" in lv and trained(lv["result"]) and all(
        o.split("=")[0] in SPEED_KEYS for o in lv["overrides"])]
    if not usable:
        sys.exit(f"choose_profile: no speed-only lever in {levers_path} trained to a "
                 f"finite loss; {profile} left as it is")
    best = max(usable, key=lambda lv: lv["result"]["images_per_second"])
    result = best["result"]
    config = load_config(profile)
    images = steps_per_epoch(TRAIN_IMAGES - config.valid_split,
                             config.batch_size) * config.batch_size
    epoch = images / result["images_per_second"]
    check = (config.valid_split or 10_000) / result["eval_images_per_second"]
    compile_extra = result["first_epoch_seconds"] - result["seconds"] + result["first_eval_seconds"]
    epochs = math.floor((budget * MARGIN - compile_extra) / (epoch + check + PER_EPOCH_OVERHEAD))
    defaults = {key: yaml.safe_dump(FIELDS[key].default).split("\n")[0] for key in SPEED_KEYS}
    chosen = dict(defaults, **dict(o.split("=", 1) for o in best["overrides"]), epoch_size=epochs)
    text = open(profile).read()
    for key, value in chosen.items():
        text, n = re.subn(rf"^{key}:.*$", f"{key}: {value}", text, count=1, flags=re.M)
        assert n == 1, f"{profile} has no line for {key}"
    open(profile, "w").write(text)
    print(f"chose lever {best['name']} ({result['images_per_second']} images/s): "
          f"{epoch:.1f} s training + {check:.1f} s validation an epoch, {compile_extra:.0f} s "
          f"compile: {epochs} epochs in {budget:.0f} s x {MARGIN}; {profile}: "
          + ", ".join(f"{k}={v}" for k, v in chosen.items()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
