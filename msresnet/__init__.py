"""Shared code of the book *ResNet50 on CIFAR-10 with MindSpore*.

Importing the package first applies the CPU speed setting (see
:mod:`msresnet.cpu_speed`), which must happen before MindSpore runs an operator.
"""

from msresnet.cpu_speed import apply_fast_isa

CPU_ISA_SETTING = apply_fast_isa()

__version__ = "0.1.0"
