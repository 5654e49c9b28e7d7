"""Rank and group size, so one training function serves one device or many.

A data-parallel job (launched with ``msrun``, a later chapter) runs the same
script once per device. Each process must read a different shard of the data,
and only one of them (rank 0) should write checkpoints, history and logs, or the
files would be written N times over each other. On a single device the helpers
below answer rank 0 of a group of 1, and nothing is sharded.

``msrun`` starts every worker with ``MS_WORKER_NUM`` (and friends) in the
environment; :func:`init_if_launched` calls ``mindspore.communication.init()``
only then, so a plain ``msresnet train`` never tries to set up a
communication group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DUMP_VARIABLE = "MSRESNET_RANK_DUMP"
"""Environment variable naming the folder where every rank writes its evidence
(:mod:`msresnet.ranks.dump`); ``msresnet launch --rank_dump`` sets it and
``msresnet train`` reads it. Unset: nothing is written. It lives here, in
a module both import, so neither the launcher nor the training imports the other."""

LAUNCHER_VARIABLES = ("MS_WORKER_NUM", "RANK_SIZE")
"""Set by ``msrun`` (``MS_WORKER_NUM``) or the older rank-table scripts (``RANK_SIZE``)."""


@dataclass(frozen=True)
class RankInfo:
    """This process's place in the job."""

    rank: int = 0
    group_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes files; the others only train."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.group_size > 1

    def shard_kwargs(self) -> dict[str, int]:
        """``num_shards``/``shard_id`` for :func:`msresnet.data.pipeline.create_dataset` (empty on one device)."""
        return {"num_shards": self.group_size, "shard_id": self.rank} if self.distributed else {}


def communication_initialized() -> bool:
    """True once ``mindspore.communication.init()`` has run in this process."""
    try:
        from mindspore.communication.management import GlobalComm
    except ImportError:  # pragma: no cover - every MindSpore 2.x has it
        return False
    return bool(getattr(GlobalComm, "INITED", False))


def launched_by_msrun(environ: dict[str, str] | None = None) -> bool:
    """True when a launcher started this process as one worker of several, or as
    one process of an ``msrun`` job (``MS_ROLE`` set: its scheduler or a worker,
    even ``msrun --worker_num=1``, whose scheduler must not train on its own)."""
    env = os.environ if environ is None else environ
    if env.get("MS_ROLE"):
        return True
    for name in LAUNCHER_VARIABLES:
        value = env.get(name, "")
        if value.isdigit() and int(value) > 1:
            return True
    return False


def init_if_launched() -> bool:
    """Initialise the communication group if ``msrun`` launched us and nobody did
    yet.

    Returns True when this process is part of an initialised group afterwards.
    """
    if communication_initialized():
        return True
    if not launched_by_msrun():
        return False
    from mindspore.communication import init

    init()
    return True


def rank_info() -> RankInfo:
    """Rank and group size from ``mindspore.communication`` when initialised, else (0, 1)."""
    if not communication_initialized():
        return RankInfo()
    from mindspore.communication import get_group_size, get_rank

    return RankInfo(rank=int(get_rank()), group_size=int(get_group_size()))
