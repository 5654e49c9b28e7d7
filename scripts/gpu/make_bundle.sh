#!/usr/bin/env bash
# Build an offline MindSpore GPU runtime for one Hopper (sm_90) GPU machine that has
# Python 3.12 and an NVIDIA driver but no package registry, with MindSpore's own
# CUDA kernels already compiled for sm_90 (scripts/gpu/sm90_fatbin.py), so the first
# CUDA use starts at once instead of after about 9 minutes of driver JIT.
#
# What it packs: MindSpore 2.10.0 (its CUDA 11.6 GPU plugin) + PyPI's CUDA 11.8 /
# cuDNN 8.9.6 runtime wheels + CIFAR-10, as one zstd stream split into parts of
# PART_MIB, each small enough for one call of the GPU lending tool. The project
# itself is not packed: it travels with each call.
#
# Usage: [KEEP_AKG=1] scripts/gpu/make_bundle.sh OUTDIR [PART_MIB] [CACHE]
#   KEEP_AKG=1  keep libakg.so (graph-kernel fusion, config key graph_kernel)
#   CACHE       folder for the downloaded wheels and the compiled libraries
#               (default: .gpu-cache), reused by the next build
# Writes OUTDIR/p00/part00, OUTDIR/p01/part01, ...; the last folder also holds
# assemble.sh, payload_bytes and the small wheels. On the GPU machine:
#   scripts/gpu/assemble.sh PARTS_DIR ROOT
set -euo pipefail
OUT=${1:?usage: make_bundle.sh OUTDIR [PART_MIB] [CACHE]}
PART_MIB=${2:-63}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=$(mkdir -p "${3:-$REPO/.gpu-cache}" && cd "${3:-$REPO/.gpu-cache}" && pwd)
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
if [ -n "$(ls -A "$OUT" | grep -v -E '^p[0-9]+$')" ]; then
  echo "make_bundle.sh: $OUT holds files that are not bundle parts; give an empty or new folder" >&2
  exit 2
fi
DATA=$(python3 -c "import sys; sys.path.insert(0, '$REPO'); from msresnet.paths import LOCAL_MIRROR; print(LOCAL_MIRROR)" 2>/dev/null || true)
[ -f "$DATA" ] || DATA="$REPO/../shared/data/cifar-10-binary.tar.gz"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$CACHE/big" \
  mindspore==2.10.0 nvidia-cudnn-cu11==8.9.6.50 nvidia-cublas-cu11==11.11.3.6 \
  nvidia-cuda-runtime-cu11==11.8.89 nvidia-cuda-nvrtc-cu11==11.8.89 \
  nvidia-curand-cu11==10.3.0.86 nvidia-cusolver-cu11==11.4.1.48 \
  nvidia-cufft-cu11==10.9.0.58 nvidia-cusparse-cu11==11.7.5.86
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$CACHE/tools" nvidia-cuda-nvcc-cu11==11.8.89
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$WORK/small" \
  asttokens astunparse dill 'protobuf>=7.34.1' zstandard
# NumPy 1.26 and SciPy 1.13 inside the payload (whl/, first on PYTHONPATH): a machine
# whose python3 carries NumPy 2 (PyTorch's environment on the lent H100s) fails at
# MindSpore 2.10's first operator ("compiled using NumPy 1.x"), and with NumPy 1 in
# front, that environment's SciPy fails in turn (np.long); MindSpore imports SciPy.
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$CACHE/big" numpy==1.26.4 scipy==1.13.1
python3 -c 'import lz4.block' 2>/dev/null || python3 -m pip install -q lz4
mkdir -p "$WORK/root/site" "$WORK/root/nv" "$WORK/root/whl"
(cd "$WORK/root/site" && unzip -q "$CACHE"/big/mindspore-*.whl)
for w in "$CACHE"/big/numpy-1.26.4-*.whl "$CACHE"/big/scipy-1.13.1-*.whl; do
  (cd "$WORK/root/whl" && unzip -q -o "$w"); done
for w in "$CACHE"/big/nvidia_*.whl; do (cd "$WORK/root/nv" && unzip -q -o "$w"); done
M="$WORK/root/site/mindspore/lib"
# AKG: the CPU back end's is never used there; the GPU's only with KEEP_AKG=1.
rm -f "$M/plugin/cpu/libakg.so"
[ "${KEEP_AKG:-0}" = 1 ] || rm -f "$M/plugin/gpu11.6/libakg.so"
rm -rf "$M/plugin/ascend" "$M"/plugin/libmindspore_ascend.so.* "$M/plugin/libmindspore_ops_ascend.so" \
  "$M/plugin/libmindspore_gpu.so.11.1" "$M/plugin/gpu11.1" "$WORK"/root/nv/nvidia/cufft/lib/libcufftw.so.* \
  "$WORK"/root/nv/nvidia/cublas/lib/libnvblas.so.* "$WORK"/root/nv/nvidia/cusolver/lib/libcusolverMg.so.* \
  "$WORK"/root/nv/nvidia/cudnn/lib/libcudnn_adv_*
# MindSpore's kernels and NCCL: sm_90 code compiled here once (about 7 minutes on 2
# cores), kept in CACHE for the next build of the same wheel.
KEY=$(cat "$CACHE"/big/mindspore-2.10.0-*.whl "$HERE/sm90_fatbin.py" "$HERE/fatbin.py" | sha256sum | cut -c1-16)
if [ ! -f "$CACHE/sm90-$KEY/libcuda_ops.so.11" ]; then
  mkdir -p "$CACHE/sm90-$KEY.tmp" "$CACHE/ptxas"
  (cd "$CACHE/ptxas" && unzip -q -o "$CACHE"/tools/nvidia_cuda_nvcc_cu11-*.whl 'nvidia/cuda_nvcc/bin/ptxas')
  chmod +x "$CACHE/ptxas/nvidia/cuda_nvcc/bin/ptxas"
  cp "$M/plugin/gpu/libcuda_ops.so.11" "$M/plugin/gpu11.6/libnccl.so.2" "$CACHE/sm90-$KEY.tmp/"
  chmod u+w "$CACHE/sm90-$KEY.tmp"/*
  python3 "$HERE/sm90_fatbin.py" "$CACHE/ptxas/nvidia/cuda_nvcc/bin/ptxas" "$(nproc)" \
    "$CACHE/sm90-$KEY.tmp/libcuda_ops.so.11" "$CACHE/sm90-$KEY.tmp/libnccl.so.2"
  mv "$CACHE/sm90-$KEY.tmp" "$CACHE/sm90-$KEY"
fi
cp "$CACHE/sm90-$KEY/libcuda_ops.so.11" "$M/plugin/gpu/libcuda_ops.so.11"
cp "$CACHE/sm90-$KEY/libnccl.so.2" "$M/plugin/gpu11.6/libnccl.so.2"
# The CUDA libraries: keep only what an sm_90 device loads.
python3 "$HERE/slim_fatbin.py" $(find "$WORK/root/nv" -name '*.so*' -size +1M)
(cd "$WORK/root" && tar -cf - site nv) | zstd -q -T0 -10 --long=30 -o "$WORK/payload.tar.zst"
cat "$WORK/payload.tar.zst" "$DATA" > "$WORK/blob"
PAYLOAD_BYTES=$(stat -c %s "$WORK/payload.tar.zst")
rm -rf "$OUT" && mkdir -p "$OUT"
(cd "$OUT" && split -b $((PART_MIB * 1048576)) -d -a 2 "$WORK/blob" part)
n=0
for f in "$OUT"/part*; do
  d="$OUT/p${f##*part}"; mkdir -p "$d"; mv "$f" "$d/"; last=$d; n=$((n + 1))
done
cp "$WORK"/small/*.whl "$HERE/assemble.sh" "$last/"
echo "$PAYLOAD_BYTES" > "$last/payload_bytes"
du -sh "$OUT"/p* | tr '\n' ' '; echo
echo "$n parts in $OUT; copy p00..p$(printf %02d $((n - 1))) to one folder on the GPU machine, then run assemble.sh there"
