"""What a run's device target decides, in one place.

Three choices follow from the device alone, and every part of the package that
makes one of them reads it here (:func:`device_policy`):

* **data sink**: on a GPU or an Ascend card a whole epoch runs on the device
  (``dataset_sink_mode``, as the models repository trains); the CPU has no sink mode;
* **mixed precision**: float16 with a loss scale on a GPU or an Ascend card (the
  config's ``amp_level`` and ``loss_scale``); the CPU always trains in float32;
* **Nesterov momentum**: MindSpore 2.10's CPU kernel ignores
  ``nn.Momentum(use_nesterov=True)``, so on the CPU the book's own
  :class:`msresnet.model.nesterov.NesterovMomentum` does it; the GPU and Ascend
  kernels honour the flag.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePolicy:
    """The choices a device target makes for a run (see the module docstring)."""

    target: str
    data_sink: bool
    mixed_precision: bool
    own_nesterov: bool


POLICIES = {
    "CPU": DevicePolicy("CPU", data_sink=False, mixed_precision=False, own_nesterov=True),
    "GPU": DevicePolicy("GPU", data_sink=True, mixed_precision=True, own_nesterov=False),
    "Ascend": DevicePolicy("Ascend", data_sink=True, mixed_precision=True, own_nesterov=False),
}


def device_policy(target: str) -> DevicePolicy:
    """The policy of ``target`` (``CPU``, ``GPU`` or ``Ascend``, as a Config checks it)."""
    return POLICIES[target]
