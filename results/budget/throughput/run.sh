#!/bin/bash
# The throughput records of chapter 10, one bench command per file (run from the
# repository root on an idle machine; about 15 minutes on 2 cores).
set -uo pipefail
out=results/budget/throughput
bench() { name=$1; shift; python -m msresnet bench --batch-size 64 --modes graph --steps 5 --warmup 2 --json "$out/$name.json" "$@"; }
bench isa --isa AVX2,AVX512_CORE,default
bench batch-32 --isa AVX2 --batch-size 32
bench batch-128 --isa AVX2 --batch-size 128
bench threads-1 --isa AVX2 --threads 1
bench threads-2 --isa AVX2 --threads 2
bench threads-4 --isa AVX2 --threads 4
bench jit-O0 --isa AVX2 --jit-level O0
bench jit-O1 --isa AVX2 --jit-level O1
bench jit-O2 --isa AVX2 --jit-level O2
bench size-48 --isa AVX2 --image-size 48
bench stem-cifar --isa AVX2 --stem cifar
