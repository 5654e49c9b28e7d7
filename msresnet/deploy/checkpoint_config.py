"""Which network a checkpoint holds, told without MindSpore.

A checkpoint file is only weights; the network they fit (stem, depth, classes,
image size) is in the ``config.yaml`` its run wrote beside it, or in a profile
the user names. ``msresnet export`` and ``msresnet predict`` look that up first,
so a checkpoint without its config, or a path that is not a file, is refused
with one line before MindSpore loads (about 3 CPU-s), and before any output
folder is made. :mod:`msresnet.deploy.export` imports its three names from here.
"""

from __future__ import annotations

import os
from pathlib import Path

from msresnet.config.profile import Config
from msresnet.config.run import CONFIG_FILE, build_run_config, recorded_config

EXPORT_RECORD = "resnet50.export.json"
"""What :func:`msresnet.deploy.export.export_checkpoint` wrote into its folder: each
graph's SHA-256, and from which checkpoint. A file of a graph's name that it does not
list with that content is another program's, which the next export will not replace
unless forced. Here so that ``msresnet export --help`` can name it without MindSpore."""


class ExportError(ValueError):
    """An export cannot be made as asked; the message names the file or value."""


def run_config(checkpoint: str | os.PathLike[str], config: str | None = None) -> Config:
    """The configuration of the run that wrote ``checkpoint`` (its folder's config.yaml),
    or the profile or YAML file ``config`` names."""
    if not Path(checkpoint).is_file():
        raise ExportError(f"{checkpoint}: no such checkpoint")
    if config is not None:
        return build_run_config(config)
    recorded = recorded_config(Path(checkpoint).parent)
    if recorded is None:
        raise ExportError(f"{checkpoint}: no {CONFIG_FILE} beside it to say which network it "
                          "holds; pass --profile PROFILE_OR_YAML")
    return recorded
