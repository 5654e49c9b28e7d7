"""The learning-rate range test's own inputs, checked without MindSpore.

``msresnet lr-range`` checks its range, step count and divergence factor with these
before it imports anything of MindSpore (about 3 CPU-s), so a wrong value is one
line at once. :mod:`msresnet.experiments.lr_range` runs the test with them.
"""

from __future__ import annotations

import numpy as np


class RangeTestError(ValueError):
    """The range test cannot run as asked (the message names the value)."""


def rates(lr_min: float, lr_max: float, steps: int) -> np.ndarray:
    """``steps`` rates from ``lr_min`` to ``lr_max``, evenly spaced on a log scale."""
    if not 0 < lr_min < lr_max:
        raise RangeTestError(f"need 0 < lr_min < lr_max, got lr_min={lr_min!r}, lr_max={lr_max!r}")
    if steps < 2:
        raise RangeTestError(f"--steps must be at least 2, got {steps!r}")
    return np.geomspace(lr_min, lr_max, steps).astype(np.float32)


def check_diverge(diverge: float) -> float:
    """``diverge`` (times the smoothed loss's minimum) must be above 1: the smoothed loss is
    never below its own minimum, so 1 or less calls the first step a divergence (0.5
    stopped after one step and reported a rate as if it had been measured)."""
    if not diverge > 1:
        raise RangeTestError(f"--diverge must be above 1 (times the smoothed loss's minimum), "
                             f"got {diverge!r}")
    return diverge
