#!/bin/bash
# The levers record of chapter 10 (issue 30): one file per measurement, all on
# one host within the same hour, the unchanged step measured three times (first,
# middle, last) so its spread is the noise a lever must beat. Run from the
# repository root on an idle machine, with the project's Python first on PATH
# (about 4 minutes on 2 cores). graph-kernel needs the `decorator` package (AKG
# imports it; not a dependency of the book): pip install --target DIR decorator
# and DECORATOR_DIR=DIR. pytorch needs a PyTorch environment: TORCH_PYTHON=...
set -euo pipefail
out=results/budget/levers
bench() { name=$1; shift; python -m msresnet bench --batch-size 64 --modes graph --isa AVX2 --steps 10 --warmup 2 --json "$out/$name.json" "$@"; }
bench base-1
bench size-24 --image-size 24
bench size-16 --image-size 16
PYTHONPATH=${DECORATOR_DIR:?pip install --target DIR decorator, then DECORATOR_DIR=DIR} bench graph-kernel --graph-kernel
"${TORCH_PYTHON:?a Python with PyTorch}" scripts/pytorch/pytorch_step.py "$out/pytorch.json"
bench base-2
bench jit-O2 --jit-level O2
bench batch-128 --batch-size 128
bench base-3
