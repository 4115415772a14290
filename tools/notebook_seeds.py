"""
Pool notebooks/maze.ipynb's comparisons over seeds: each run of the notebook writes its per-maze
measures to out/notebook/maze_seed{SEED}.json; this prints each method's means over every maze of
every seed and VPO's paired 95% intervals against GRPO and the base (seeds and mazes resampled, as
lab/experiment.py's are).

    python tools/run_notebook.py notebooks/maze.ipynb                         # seed 0, in place
    python tools/run_notebook.py notebooks/maze.ipynb --out out/notebook/maze_s1.ipynb --set SEED=1
    python tools/notebook_seeds.py out/notebook/maze_seed0.json out/notebook/maze_seed1.json ...

Runs nothing itself: each seed is one full run of the notebook (minutes). Leaves out the lab's
other measures (diversity, routes by family, pools at another temperature): lab/experiment.py.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab.report import paired_bootstrap_interval  # noqa: E402

MEASURES = {"best": "best@{pool}", "w_best": "w-best@{pool}", "both_corners": "both corners"}


def pooled(runs):
    """The notebook's result files, read -> the lines of the pooled table, the intervals after."""
    pools = {run["pool"] for run in runs}
    steps = {run["rl_steps"] for run in runs}
    if len(pools) != 1 or len(steps) != 1:
        raise SystemExit(f"the runs differ in POOL {pools} or RL_STEPS {steps}: not one setting")
    pool = pools.pop()
    methods = list(runs[0]["per_maze"])
    labels = {m: label.format(pool=pool) for m, label in MEASURES.items()}

    def stacked(method, measure):  # (seeds, mazes)
        return np.array([run["per_maze"][method][measure] for run in runs], dtype=float)

    lines = [
        f"{len(runs)} seeds ({', '.join(str(run['seed']) for run in runs)}), "
        f"{stacked(methods[0], 'best').shape[1]} mazes each, {steps.pop()} RL steps",
        "| method | " + " | ".join(labels.values()) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for method in methods:
        means = [f"{stacked(method, measure).mean():.3f}" for measure in MEASURES]
        lines.append(f"| {method} | " + " | ".join(means) + " |")
    for other in [m for m in methods if m != "VPO"]:
        for measure, label in labels.items():
            gap = paired_bootstrap_interval(stacked("VPO", measure), stacked(other, measure))
            lines.append(f"VPO - {other} {label}: {gap[0]:+.3f} [{gap[1]:+.3f}, {gap[2]:+.3f}]")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="out/notebook/maze_seed*.json, one per seed")
    args = parser.parse_args(argv)
    runs = []
    for path in args.results:
        with open(path) as f:
            runs.append(json.load(f))
    print("\n".join(pooled(runs)))


if __name__ == "__main__":
    main()
