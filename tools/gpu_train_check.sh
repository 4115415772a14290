#!/usr/bin/env bash
# Code GRPO and VPO training side by side on one GPU at train.py's defaults (the decode step captured
# as a CUDA graph), from a given code warm start, for SECONDS each: does training run with the
# capture, how fast is a step with two runs sharing the GPU, and do the first steps' rewards look like
# the CPU run's. For a loan too short for tools/gpu_speed.sh's end-to-end run. Writes $OUT/{grpo,vpo}.log
# (train.py's log) and $OUT/{grpo,vpo}_timing.jsonl, and a line per run with its median step time.
#
#   OUT=out/gpu_train SECONDS_EACH=140 bash tools/gpu_train_check.sh WARM_START.pt
#   DEVICE=cpu SECONDS_EACH=20 bash tools/gpu_train_check.sh WARM_START.pt        # a dry run
set -u
WARM=${1:?usage: gpu_train_check.sh CODE_WARM_START.pt}
OUT=${OUT:-out/gpu_train}
DEVICE=${DEVICE:-cuda}
SECONDS_EACH=${SECONDS_EACH:-140}
PY=$(command -v python3 || command -v python)
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
mkdir -p "$OUT"
runs=$(mktemp -d)
for algo in grpo vpo; do
    timeout -s INT -k 10 "$SECONDS_EACH" $PY train.py --config configs/code.yaml --set algo=$algo device=$DEVICE \
        warmstart_from="$WARM" out_dir="$runs/$algo" quiet=true > "$OUT/${algo}_stdout.log" 2>&1 &
done
wait
for algo in grpo vpo; do
    cp "$runs/$algo/log.txt" "$OUT/$algo.log" 2>/dev/null
    cp "$runs/$algo/timing.jsonl" "$OUT/${algo}_timing.jsonl" 2>/dev/null
done
$PY tools/step_times.py "$runs"/grpo/timing.jsonl "$runs"/vpo/timing.jsonl
