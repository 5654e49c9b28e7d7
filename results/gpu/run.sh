#!/bin/bash
# The GPU records of issue 35, on one GPU machine, in one go, from the repository
# root: the doctor on the gpu profile (and at O3, which the GPU rejects), the gpu
# profile as shipped for one epoch with a sweep and both exports of its checkpoint,
# PyTorch's step on the same GPU, then the fast recipe (results/gpu/fast.yaml) for
# as many epochs as fit before DEADLINE (Unix seconds), chosen from the doctor's
# own projection of its epoch. Each step is skipped, and says so, when too little
# time is left for it.
#
# Usage: results/gpu/run.sh RUNTIME RECORDS DEADLINE
#   RUNTIME: the folder ../shared/gpu/assemble.sh unpacked (env.sh, data/)
#   RECORDS: where the small records go (logs, JSON, histories); runs go beside it
set -u
R=$1; O=$2; END=$3
source "$R/env.sh"
export PYTHONPATH=$PWD:$R/site:$R/whl
D=$R/data
RUNS=$(dirname "$O")/runs
mkdir -p "$O" "$RUNS"
left() { echo $((END - $(date +%s))); }
log() { echo "[$(date -u +%T)] $*" | tee -a "$O/chain.log"; }
step() {  # step NAME SECONDS_NEEDED COMMAND...: run it unless too little time is left
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then log "skip $name: $(left) s left, it needs $need"; return 1; fi
  log "start $name: $*"
  local t=$(date +%s)
  "$@" > "$O/$name.log" 2>&1
  local rc=$?
  log "end $name: exit $rc after $(($(date +%s) - t)) s"
  return $rc
}
keep() {  # keep RUN_DIR NAME: the run's small files into the records
  mkdir -p "$O/$2"
  find "$1" -maxdepth 1 -type f ! -name '*.ckpt' ! -name '*.mindir' ! -name '*.onnx' \
    -exec cp {} "$O/$2/" \;
}
ms="python3 -m msresnet"

{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  echo "cores: $(nproc)"; python3 --version
  python3 -c 'import mindspore; print("mindspore", mindspore.__version__)'
  ls "$R"/nv/nvidia/*/lib/ | grep -E '\.so\.[0-9]+' ; } > "$O/machine.txt" 2>&1
nvidia-smi dmon -s u -d 5 -o T > "$O/dmon.log" 2>&1 &
DMON=$!

step doctor_gpu 240 $ms doctor --profile gpu --data_dir "$D" --json "$O/doctor_gpu.json"
step doctor_gpu_O3 120 $ms doctor --profile gpu --data_dir "$D" --amp_level O3 --steps 5 \
  --json "$O/doctor_gpu_O3.json"
step train_gpu 300 $ms train gpu --data_dir "$D" --output "$RUNS/gpu" --stop_after_epoch 1 \
  --no-progress && keep "$RUNS/gpu" train_gpu_run
step sweep_gpu 120 $ms sweep "$RUNS/gpu" --data_dir "$D" && keep "$RUNS/gpu" train_gpu_run
step export_gpu 120 $ms export "$RUNS/gpu/best.ckpt" --out "$RUNS/gpu-export" \
  && ls -l "$RUNS/gpu-export" >> "$O/export_gpu.log"
step pytorch 240 python3 scripts/gpu/pytorch_gpu.py "$O/pytorch.json" 32x224ximagenet \
  256x32xcifar
step doctor_fast 240 $ms doctor --profile results/gpu/fast.yaml --data_dir "$D" --steps 40 \
  --json "$O/doctor_fast.json"
# The fast recipe: as many whole epochs as fit, at the doctor's projected epoch plus
# validation (5,000 images, about a ninth of an epoch) and 90 s for compiling,
# testing and saving.
EPOCHS=$(python3 - "$O/doctor_fast.json" "$(left)" <<'PY'
import json, sys
try:
    speed = json.load(open(sys.argv[1]))["checks"][-1]["details"]["projection"]
    print(max(0, min(40, int((int(sys.argv[2]) - 90) / (speed["epoch_seconds"] * 1.15)))))
except Exception:
    print(0)
PY
)
log "fast recipe: $EPOCHS epochs fit in $(left) s"
if [ "$EPOCHS" -ge 3 ]; then
  step train_fast 60 $ms train --config results/gpu/fast.yaml --data_dir "$D" \
    --epoch_size "$EPOCHS" --warmup_epochs $((EPOCHS < 15 ? 1 : 2)) --output "$RUNS/gpu-fast" \
    --no-progress
  keep "$RUNS/gpu-fast" train_fast_run
fi
kill $DMON
log "done, $(left) s before the deadline"
