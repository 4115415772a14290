"""
Each run's steps done and median seconds a step, from its timing.jsonl (a finished run or one cut
short): what lab/gpu_speed.sh and tools/gpu_train_check.sh print after their runs.

    python lab/step_times.py out/headline/runs/*/timing.jsonl

Left out: means, percentiles, plots (the file has every step; read it for more).
"""

import json
import os
import statistics
import sys


def step_times(path):
    """timing.jsonl -> (steps, median step seconds, median sampling seconds), or None if it has no steps."""
    rows = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
    if not rows:
        return None
    return len(rows), statistics.median(r["step_s"] for r in rows), statistics.median(r["sample_s"] for r in rows)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        times = step_times(path)
        name = os.path.basename(os.path.dirname(path)) or path
        print(f"{name}: no steps timed" if times is None else
              f"{name}: {times[0]} steps, median {times[1]:.3f} s a step (sampling {times[2]:.3f} s)")
