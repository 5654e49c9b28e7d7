#!/usr/bin/env bash
# On the GPU machine: join the parts of scripts/gpu/make_bundle.sh (all copied into
# PARTS_DIR), unpack the runtime into ROOT, extract CIFAR-10 there and write
# ROOT/env.sh. About 15 s on 16 cores.
# Usage: assemble.sh PARTS_DIR ROOT   (this script's folder holds the last part's extras)
# Then, from the repository root: source ROOT/env.sh; msresnet doctor --profile gpu
set -euo pipefail
PARTS=${1:?usage: assemble.sh PARTS_DIR ROOT}
ROOT=${2:?usage: assemble.sh PARTS_DIR ROOT}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$ROOT" && ROOT=$(cd "$ROOT" && pwd) && cd "$ROOT"
BYTES=$(cat "$HERE/payload_bytes")
ls "$PARTS"/part* | sort | xargs cat > blob
head -c "$BYTES" blob > payload.tar.zst
tail -c +$((BYTES + 1)) blob > cifar-10-binary.tar.gz
rm -f blob
python3 -m pip install -q --no-index --no-deps --no-compile --target "$ROOT/whl" "$HERE"/*.whl
if command -v zstd >/dev/null; then zstd -dc --long=30 payload.tar.zst | tar -x
else PYTHONPATH="$ROOT/whl" python3 -c "import sys, zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(open('payload.tar.zst', 'rb'), sys.stdout.buffer)" | tar -x
fi
rm -f payload.tar.zst
mkdir -p data && tar -xzf cifar-10-binary.tar.gz -C data
# MindSpore picks its GPU plugin from `$CUDA_HOME/bin/nvcc --version` and reads the
# runtime's version from a libcudart.so.X.Y.Z file name: a stand-in nvcc that says
# 11.6 and a link so named select the CUDA 11.6 plugin, which runs on these 11.8
# libraries (CUDA 11 minor-version compatibility).
mkdir -p fakecuda/bin
printf '#!/bin/sh\necho "Cuda compilation tools, release 11.6, V11.6.124"\n' > fakecuda/bin/nvcc
chmod +x fakecuda/bin/nvcc
NV="$ROOT/nv/nvidia"
ln -sf libcudart.so.11.0 "$NV/cuda_runtime/lib/libcudart.so.11.6.55"
ln -sf libcudart.so.11.0 "$NV/cuda_runtime/lib/libcudart.so"
ln -sf libcudnn.so.8 "$NV/cudnn/lib/libcudnn.so.8.9.6"
cat > env.sh <<EOT
export CUDA_HOME=$ROOT/fakecuda
export LD_LIBRARY_PATH=$NV/cudnn/lib:$NV/cublas/lib:$NV/cuda_runtime/lib:$NV/cuda_nvrtc/lib:$NV/curand/lib:$NV/cusolver/lib:$NV/cufft/lib:$NV/cusparse/lib:\${LD_LIBRARY_PATH:-}
export PYTHONPATH=\$PWD:$ROOT/site:$ROOT/whl
export PATH=$ROOT/fakecuda/bin:\$PATH
# Kernels the driver still compiles (none of MindSpore's, which carry sm_90 code) go here.
export CUDA_CACHE_PATH=$ROOT/jitcache CUDA_CACHE_MAXSIZE=4294967296 CUDA_MODULE_LOADING=LAZY
export PYTHONUNBUFFERED=1
EOT
du -sh "$ROOT"/* | tr '\n' ' '; echo
