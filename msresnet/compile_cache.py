"""MindSpore's compile cache, refused wherever the package compiles a graph.

MindSpore 2.10 can save each graph it compiles (``MS_COMPILER_CACHE_ENABLE=1``, in
``MS_COMPILER_CACHE_PATH``) and, in a later process, load it instead of compiling.
It matches the n-th graph a process compiles to the n-th graph saved, and checks
only a hash of the entry script and the files that script imports from outside
``sys.path``: not the batch size, the image size or the network the graph was
compiled for. Every ``msresnet`` command has the same entry script, and so has every
notebook's kernel, so a run with other settings loads an earlier run's graphs.
Measured on the CPU (``results/compile-cache/``): batch-16 smoke runs given a
batch-32 run's cache said nothing but MindSpore's warning and died of a segmentation
fault or an error, one after an epoch at a training loss of 5.45 and a NaN
validation loss. A wrong network is worse than a slower start, so :func:`refuse`
stops a training, an evaluation, an export, a prediction or a benchmark with one
line before it compiles or writes anything.

MindSpore-free: it reads the environment, and MindSpore's context only when MindSpore
is already loaded (before that, nothing can have set it).
"""

from __future__ import annotations

import os
import sys

VARIABLE = "MS_COMPILER_CACHE_ENABLE"
# MindSpore 2.10 turns the cache on for this value only ("0", "true" leave it off).
ENABLED = "1"


class CompileCacheError(RuntimeError):
    """MindSpore's compile cache is on (the message names the setting and what to do)."""


def refuse() -> None:
    """Raise :class:`CompileCacheError` when MindSpore would reuse saved graphs: the
    environment variable, or ``enable_compile_cache`` in a loaded MindSpore's context."""
    mindspore = sys.modules.get("mindspore")
    if os.environ.get(VARIABLE) == ENABLED:
        setting, undo = f"{VARIABLE}={ENABLED}", f"unset {VARIABLE}"
    elif mindspore is not None and mindspore.get_context("enable_compile_cache") is True:
        setting = "mindspore.set_context(enable_compile_cache=True)"
        undo = "leave enable_compile_cache off"
    else:
        return
    raise CompileCacheError(
        f"{setting}: MindSpore's compile cache hands a process the graphs an earlier one "
        "saved without comparing batch size, image size or network, so this run could "
        f"train or score the wrong network; {undo} (the graphs are then compiled afresh)")
