#!/bin/bash
# One GPU lease's experiments for issue 42, in order, each skipped (and logged) when
# too little time is left before DEADLINE (Unix seconds):
#   probe     MindSpore's first GPU operator (seconds with precompiled sm_90 kernels;
#             the driver's JIT otherwise, about 9 minutes on a fresh machine)
#   bncheck   BatchNorm alone, float16 and float32, NCHW and NHWC, against a float64
#             reference (scripts/gpu/bn_check.py)
#   airbench  airbench94/96 (scripts/gpu/airbench.py) on this data: what a recipe known
#             to reach 94 % / 96 % on the official files reaches on this copy
#   pytorch   PyTorch's step at 32x32, batch 256, NCHW and channels_last
#   levers    MindSpore's step under each speed lever (scripts/gpu/levers.py), then
#             the profiler's kernel tables for the default and the NHWC step
#   ablation  gpu-fast's short-run ablation on the held-out split, row by row
#             (`msresnet ablation run --profile gpu-fast ROW`), as time allows
#   choose    the fastest lever and the epochs that fit 15 minutes, written into
#             configs/gpu-fast.yaml (scripts/gpu/choose_profile.py)
#   gpu-fast  `msresnet train gpu-fast`, as shipped
#   twin      the PyTorch twin of results/gpu/fast.yaml for 18 epochs, then 75 (the
#             two MindSpore runs on record), as time allows
# Usage, from the repository root of a copy that nothing else writes to:
#   setsid bash scripts/gpu/lease.sh RUNTIME RECORDS DEADLINE [STEPS] &
#   RUNTIME: the folder scripts/gpu/assemble.sh unpacked; RECORDS: small files only
# The machine goes back 30 s after a call returns: keep a call running while this
# chain does (scripts/gpu/watch.sh RECORDS SECONDS, which also packs RECORDS into
# one archive under $OUT), and make the next one at once.
#   STEPS: which of the steps above to run (default: all, in that order)
# Landing the runtime: the paths a call carries replace the checkout's own, so each
# part is copied out of it as it lands, one call per part (carry .bundle/pNN, command
# `mkdir -p /tmp/parts && cp .bundle/p*/* /tmp/parts/`; about 4 s a call for 35 MiB
# parts beside a 29 MB checkout, 24 parts in 2.5 minutes on 2026-12-06), then
# `scripts/gpu/assemble.sh /tmp/parts ROOT` in the call that starts the chain. A
# bundle built before make_bundle.sh packed NumPy 1.26.4 and SciPy 1.13.1 needs both
# in .whl/; SciPy's 38 MB wheel does not fit one call beside the checkout, so it goes
# in two pieces joined on the machine (results/gpu/h100-2026-12-06-bn16/README.md).
set -u
R=$1; O=$2; END=$3; STEPS=${4:-probe,bncheck,airbench,pytorch,levers,ablation,choose,gpu-fast,twin}
AIRBENCH=${AIRBENCH:-airbench94:8 airbench96:1}
source "$R/env.sh"
mkdir -p "$O"
echo $$ > "$O/chain.pid"  # first: scripts/gpu/watch.sh waits on it (the wheels take seconds)
# Wheels that travel beside the bundle in .whl/ (the profiler's CUPTI; NumPy 1.26 and
# SciPy 1.13 for a bundle built before make_bundle.sh packed them: MindSpore 2.10
# fails at its first operator under the NumPy 2 of PyTorch's environment, and that
# environment's SciPy under NumPy 1); installed into the runtime once.
if [ -d .whl ]; then
  for pkg in numpy scipy; do
    ls .whl/$pkg-*.whl >/dev/null 2>&1 && [ ! -d "$R/whl/$pkg" ] && \
      python3 -m pip install -q --no-index --no-deps --target "$R/whl" .whl/$pkg-*.whl
  done
  # (no unzip on the GPU machine: the profiler's CUPTI stayed packed on 2026-12-06)
  for w in .whl/nvidia_*.whl; do [ -f "$w" ] && python3 -m zipfile -e "$w" "$R/nv"; done
fi
CUPTI=$R/nv/nvidia/cuda_cupti/lib
[ -d "$CUPTI" ] && ln -sf "$(ls "$CUPTI" | grep -m1 'libcupti.so.')" "$CUPTI/libcupti.so" && \
  export LD_LIBRARY_PATH=$CUPTI:$LD_LIBRARY_PATH
export PYTHONPATH=$PWD:$R/site:$R/whl MSRESNET_DATA_DIR=$R/data
D=$R/data
left() { echo $((END - $(date +%s))); }
log() { echo "[$(date -u +%T)] $*" | tee -a "$O/chain.log"; }
want() { [[ ",$STEPS," == *",$1,"* ]]; }
step() {  # step NAME SECONDS_NEEDED COMMAND...: run it unless too little time is left
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then log "skip $name: $(left) s left, it needs $need"; return 1; fi
  log "start $name: $*"
  local t=$(date +%s)
  timeout "$(left)" "$@" > "$O/$name.log" 2>&1
  local rc=$?
  log "end $name: exit $rc after $(($(date +%s) - t)) s"
  return $rc
}
airbench() {  # PyTorch's own environment (no MindSpore runtime, NumPy 2)
  want airbench && [ ! -f "$O/airbench.json" ] && step airbench 150 env PYTHONPATH=$PWD \
    python3 scripts/gpu/airbench.py "$D" "$O/airbench.json" $AIRBENCH
}
keep() {  # keep RUN_DIR NAME: the run's small files into the records
  mkdir -p "$O/$2"
  find "$1" -maxdepth 1 -type f ! -name '*.ckpt' ! -name '*.mindir' ! -name '*.onnx' \
    -exec cp {} "$O/$2/" \;
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  echo "cores: $(nproc)"; python3 --version
  python3 -c 'import mindspore; print("mindspore", mindspore.__version__)'
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
  ls "$R"/nv/nvidia/*/lib/ | grep -E '\.so\.[0-9]+' ; } > "$O/machine.txt" 2>&1
nvidia-smi dmon -s u -d 5 -o T > "$O/dmon.log" 2>&1 &
DMON=$!

PROBE='import time, numpy as np, mindspore as ms
t = time.time(); ms.set_device("GPU")
x = ms.Tensor(np.ones((64, 3, 32, 32), np.float32))
w = ms.Tensor(np.ones((8, 3, 3, 3), np.float32))
y = ms.ops.conv2d(x, w, pad_mode="same") + 1
print("probe ok", float(y.sum().asnumpy()), round(time.time() - t, 1), "s")'
MINDSPORE=1
if want probe; then
  step probe 60 timeout 120 python3 -c "$PROBE"
  rc=$?
  if [ $rc -eq 124 ]; then  # still compiling: the driver's JIT; the twin meanwhile
    log "probe timed out: the driver compiles kernels; the twin meanwhile"
    (python3 -c "$PROBE" > "$O/probe_jit.log" 2>&1; log "JIT probe: exit $?") &
    JIT=$!
    airbench
    wait $JIT
  elif [ $rc -ne 0 ]; then
    log "MindSpore failed: $(grep -E 'Error|error' "$O/probe.log" | tail -1); PyTorch only"
    MINDSPORE=0
  fi
fi
airbench
want bncheck && [ $MINDSPORE = 1 ] && step bn_check 90 python3 scripts/gpu/bn_check.py "$O/bn_check.json"
want bnfused && [ $MINDSPORE = 1 ] && step bn_fused 60 python3 scripts/gpu/bn_check.py "$O/bn_fused.json" fused
want pytorch && step pytorch 60 env PYTHONPATH=$PWD python3 scripts/gpu/pytorch_gpu.py "$O/pytorch.json" 256x32xcifar
if want levers && [ $MINDSPORE = 1 ]; then
  # LEVERS (names and overrides, levers.py's syntax) replaces the default list
  step levers 120 python3 scripts/gpu/levers.py "$O/levers.json" results/gpu/fast.yaml "$D" 12800 \
    ${LEVERS:-base: nhwc:data_format=NHWC bn16:amp_batchnorm=float16 \
    nhwc_bn16:data_format=NHWC,amp_batchnorm=float16 \
    nhwc_bn16_b512:data_format=NHWC,amp_batchnorm=float16,batch_size=512 \
    profile: profile_nhwc_bn16:data_format=NHWC,amp_batchnorm=float16}
  # the profiler's tables only (its raw traces are large); watch.sh packs them
  find "$O"/profile* -type f ! -name '*.csv' ! -name '*.txt' ! -name '*.json' -delete 2>/dev/null
  find "$O"/profile* -type f -size +4M -delete 2>/dev/null
fi
if want ablation && [ $MINDSPORE = 1 ]; then
  # gpu-fast's short-run ablation, one row per step, most telling first
  # (msresnet.experiments.ablation.GPU); checkpoints stay in runs/ablation-gpu
  for row in ${ABLATION_ROWS:-$(python3 -c 'from msresnet.experiments.ablation import GPU
print(" ".join(GPU.by_name))')}; do
    case $row in flip-tta) need=60;; size-40) need=260;; *) need=190;; esac
    step "ablation_$row" $need python3 -m msresnet ablation run --profile gpu-fast \
      --records "$O/ablation" "$row"
  done
fi
# The run's budget: 15 minutes, or less when the lease would leave no time after it
# for the 18-epoch twin (about 3 minutes with its start).
RESERVE=60; want twin && RESERVE=260
BUDGET=$(( $(left) - RESERVE )); [ "$BUDGET" -gt 900 ] && BUDGET=900
if want choose && [ $MINDSPORE = 1 ] && [ "$BUDGET" -ge 300 ]; then
  python3 scripts/gpu/choose_profile.py "$O/levers.json" configs/gpu-fast.yaml "$BUDGET" \
    >> "$O/chain.log" 2>&1 || log "choose failed: configs/gpu-fast.yaml as sent"
  cp configs/gpu-fast.yaml "$O/gpu-fast.yaml"
fi
if want gpu-fast && [ $MINDSPORE = 1 ] && [ "$BUDGET" -ge 300 ]; then
  step gpu_fast $((BUDGET + 45)) python3 -m msresnet train gpu-fast --no_progress
  keep runs/gpu-fast gpu_fast_run
fi
if want twin; then
  # The twin of the 18-epoch MindSpore run on record (results/gpu/h200-2026-12-04:
  # fast.yaml with --epoch_size 18 --warmup_epochs 1, 87.41 %), then of 75 epochs
  # (../shared/gpu/h100-fast75: 90.16 %), as time allows.
  [ -f "$O/twin_fast75.json" ] || step twin_fast18 150 python3 scripts/gpu/twin.py \
    results/gpu/fast.yaml "$D" "$O/twin_fast18.json" epoch_size=18 warmup_epochs=1
  [ -f "$O/twin_fast75.json" ] || step twin_fast75 330 python3 scripts/gpu/twin.py \
    results/gpu/fast.yaml "$D" "$O/twin_fast75.json" epoch_size=75
fi
kill $DMON
log "done, $(left) s before the deadline"
