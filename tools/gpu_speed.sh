#!/usr/bin/env bash
# The speed measurements that need a GPU, in one script, so one short loan suffices:
#   1. the default experiment, `python lab/experiment.py`, end to end: wall time and every job's time (its log);
#      on CUDA the runner trains on the GPU with several workers sharing it (workers.default_workers);
#   2. tools/bench.py --device cuda at the code VPO shape, float32 as the experiment trains, with and
#      without the captured decode step (cuda_graph), each alone on the GPU: against the runs' own step
#      times in 1, what sharing the GPU costs;
#   3. tools/gpu_check.py's sampler checks (the captured decode step draws the eager sampler's tokens) and
#      its check of the captured warm-start update (the eager losses and weights to float rounding);
#   4. the code warm start's first 1,000 SFT steps, timed as the warm start runs them (both formats),
#      with its update captured as a CUDA graph and eager.
# RUN=0 skips 1, BENCH=0 skips 2.
# Everything lands in $OUT (default out/gpu_speed): machine.txt, default_run.log, bench.log,
# bench_code_vpo*.json, warm_start_graph_*.json, graph_check/gpu_check.json and default_run.tgz
# (the experiment's results, summary and per-run logs and timings).
#
#   OUT=out/gpu_speed BUDGET_S=560 bash tools/gpu_speed.sh CHECKPOINT
#   DEVICE=cpu RUN_ARGS="--quick --set out_dir=out/gpu_speed_dry" BUDGET_S=300 bash tools/gpu_speed.sh CKPT  # dry run
#
# CHECKPOINT: a trained code VPO final.pt (rollouts of real lengths for the bench). The experiment
# gets what the budget leaves after the bench's reserve; a run cut short still reports its finished
# jobs (the experiment resumes with the same command, on a machine that keeps out/).
set -u
CKPT=${1:?usage: gpu_speed.sh CHECKPOINT}
OUT=${OUT:-out/gpu_speed}
DEVICE=${DEVICE:-cuda}
BUDGET_S=${BUDGET_S:-560}
RUN_ARGS=${RUN_ARGS:-}
RUN=${RUN:-1}
BENCH=${BENCH:-1}
BENCH_RESERVE_S=${BENCH_RESERVE_S:-150}  # seconds kept for 2-4 below (0: the run gets the whole budget)
PY=$(command -v python3 || command -v python)
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
mkdir -p "$OUT"
t_start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - t_start))); }

{
    date -u; nproc; free -g | head -2
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
    git rev-parse --short HEAD 2>/dev/null; git status --short 2>/dev/null | head -20
} > "$OUT/machine.txt" 2>&1

# 1. the default experiment, alone on the machine (setsid: a cut-short run's workers go with it)
if [ "$RUN" = 1 ]; then
    run_s=$(( $(left) - BENCH_RESERVE_S ))
    echo "default run: up to ${run_s}s" > "$OUT/default_run.log"
    t0=$(date +%s)
    timeout -s INT -k 15 "$run_s" setsid $PY lab/experiment.py $RUN_ARGS >> "$OUT/default_run.log" 2>&1
    rc=$?
    echo "exit ${rc} after $(( $(date +%s) - t0 ))s wall (124: cut at the budget)" >> "$OUT/default_run.log"
    pkill -f "experiment.py" 2>/dev/null; pkill -f "multiprocessing.spawn" 2>/dev/null; sleep 2
    # each run's steps done and median seconds a step (its timing.jsonl), finished or cut short
    run_dir=$(sed -n 's/.*writing to \([^ ]*\)\/ (runs.*/\1/p' "$OUT/default_run.log" | head -1)
    $PY tools/bench.py --step-times "${run_dir:-out/headline}"/runs/*/timing.jsonl >> "$OUT/default_run.log" 2>&1
fi

# 2. the bench at the code VPO shape, eager then captured, each alone
: > "$OUT/bench.log"
for graph in false true; do
    [ "$BENCH" = 1 ] || break
    per=$(( $(left) / 3 ))
    [ "$per" -lt 20 ] && { echo "no time left for cuda_graph=$graph" >> "$OUT/bench.log"; continue; }
    echo "== bench code vpo cuda_graph=$graph (up to ${per}s)" >> "$OUT/bench.log"
    timeout -k 5 "$per" $PY tools/bench.py --device "$DEVICE" --config configs/code.yaml --checkpoint "$CKPT" \
        --set algo=vpo dtype=float32 cuda_graph=$graph --json "$OUT/bench_code_vpo_graph_$graph.json" \
        >> "$OUT/bench.log" 2>&1
    echo "exit $?" >> "$OUT/bench.log"
done

# 3. the samplers on the device: fast = plain, captured = eager (same tokens with TF32 off), timed; the
#    captured warm-start update against the eager one
[ "$(left)" -gt 20 ] && timeout -k 5 $(( $(left) / 2 )) $PY tools/gpu_check.py --device "$DEVICE" \
    --out "$OUT/graph_check" --skip score train bench >> "$OUT/bench.log" 2>&1
echo "sampler checks exit $?" >> "$OUT/bench.log"

# 4. the code warm start as it runs (its SFT steps, the single-answer phase first), 1,000 steps timed,
#    its update captured as a CUDA graph (the default) and eager
for graph in true false; do
    [ "$(left)" -gt 20 ] && timeout -k 5 $(( $(left) / 2 )) $PY tools/bench.py --device "$DEVICE" --config configs/code.yaml \
        --set dtype=float32 cuda_graph=$graph --warm-start-steps 1000 --json "$OUT/warm_start_graph_$graph.json" \
        >> "$OUT/bench.log" 2>&1
    echo "warm start timing cuda_graph=$graph exit $?" >> "$OUT/bench.log"
done

# 5. the experiment's results and every run's log and step timings, packed as one file
run_dir=$(sed -n 's/.*writing to \([^ ]*\)\/ (runs.*/\1/p' "$OUT/default_run.log" 2>/dev/null | head -1)
run_dir=${run_dir:-out/headline}
tar czf "$OUT/default_run.tgz" --ignore-failed-read "$run_dir/results" "$run_dir/summary.md" \
    $(ls "$run_dir"/runs/*/log.txt "$run_dir"/runs/*/timing.jsonl 2>/dev/null) 2>> "$OUT/bench.log"
echo "gpu_speed.sh done in $(( $(date +%s) - t_start ))s" | tee -a "$OUT/bench.log"
