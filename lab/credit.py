"""Credit inside VPO's set: vpo_credit's per-answer forms trained against VPO, GRPO and the warm
start (docs/RESULTS.md, "Credit inside VPO's set").

    python lab/experiment.py --algos vpo_togo vpo_marginal --tasks code --seeds 0 \
        --against docs/figures/leaderboard --set out_dir=out/credit evo_problems=0
    python lab/credit.py --valid-by-place out/credit --out docs/figures/credit  # code's checkpoints
    python lab/credit.py --report docs/figures/credit                           # the tables

The runs are lab/experiment.py's (lab/experiment.CREDIT_FORMS); this file adds what their result
files lack, the share of valid answers at each place of a set (measured on the pools' own held-out
problems and draws, from the run folders' checkpoints and their warm starts), and the comparison:
each form minus VPO, GRPO and the warm start asked for sets of 3, with the paired 95% interval over
seeds and problems (metrics.paired_bootstrap_interval) on the seeds both hold.
Deliberately left out: the search on code (its cost did not fit the session), VPO's own validity by
place (the board keeps VPO's result files, not its checkpoints).
"""

import argparse
import glob
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)  # so that `python lab/credit.py` finds the reference and the lab package

import numpy as np  # noqa: E402
import yaml  # noqa: E402

import evaluate  # noqa: E402
from config import EVALUATION, make_task  # noqa: E402
from lab.experiment import CREDIT_FORMS  # noqa: E402
from lab.report import load_records, verdict  # noqa: E402
from metrics import paired_bootstrap_interval  # noqa: E402

BOARD = os.path.join(HERE, "docs", "figures", "leaderboard")
BASELINES = {"VPO": "vpo", "GRPO": "grpo", "the warm start": "warm_start_m3"}
# per task, the held-out metrics compared: (the name shown, where a record keeps its per-problem
# values, the key there)
METRICS = {
    "code": [("best@30", "per_problem", "best"), ("pass@30", "per_problem", "pass")],
    "persona": [("w-best@30", "per_problem", "w_best"), ("best@30", "per_problem", "best")],
    "maze": [
        ("w-best@30", "per_problem", "w_best"),
        ("best@30", "per_problem", "best"),
        ("both corners", "per_maze", "both_corners"),
    ],
}
PLACES_FILE = "valid_by_place.json"
HEADER = (
    "| form | metric | mean (per seed) | - VPO [95%] | - GRPO [95%] | - warm start (m=3) [95%] |"
)
PLACES_HEADER = (
    "| task | method | seeds | place 1 / 2 / 3 | "
    + " | ".join(f"place {j} - warm start [95%]" for j in (1, 2, 3))
    + " |"
)


def valid_by_place(rewards, m):
    """rewards (problems, n, D) of pools written m per rollout -> (problems, m): the share of
    answers at each place of a rollout whose reward vector is not all zero (the pool's `valid`)."""
    valid = rewards.sum(-1) > 0  # (problems, n)
    return valid.reshape(len(rewards), -1, m).mean(1)


def measure_places(run_dirs, found, settings=EVALUATION):
    """Each run folder's final checkpoint and its warm start (asked for sets of its m), pooled on
    its seed's held-out problems as lab/workers.pools_job pools them, into `found`
    {"task/method/seed": (problems, m) list}; what `found` holds already is not measured again."""
    for run_dir in run_dirs:
        with open(os.path.join(run_dir, "config.yaml")) as f:
            cfg = yaml.safe_load(f)
        task = make_task(cfg["task"], **cfg["task_options"])
        seed, m = cfg["seed"], cfg["answers_per_rollout"]
        problems = task.problems("heldout", settings["pool_problems"], random.Random(seed))
        method = os.path.basename(run_dir).split("-")[1]
        checkpoints = {method: os.path.join(run_dir, "final.pt")}
        checkpoints[f"warm_start_m{m}"] = cfg["warmstart_from"]
        for name, path in checkpoints.items():
            key = f"{cfg['task']}/{name}/{seed}"
            if key in found:  # a warm start shared by several runs
                continue
            _, rewards, _ = evaluate.evaluate_checkpoint(
                path, task, problems, settings["pool_n"], seed=seed, m=m
            )
            found[key] = valid_by_place(rewards, m).round(4).tolist()
            print(key, np.mean(found[key], 0).round(3).tolist(), flush=True)


def read_places(folder):
    """folder's valid_by_place.json ({} if none)."""
    path = os.path.join(folder, PLACES_FILE)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def per_problem(records, task, method, where, key):
    """{seed: per-problem values} of one method's result files."""
    return {
        r["seed"]: r["pools"][where][key]
        for r in records
        if r["task"] == task and r["method"] == method and key in r["pools"].get(where, {})
    }


def difference(a, b):
    """{seed: values} x 2 -> (mean a - b, low, high) on the seeds both hold, and those seeds."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None, []
    pair = [np.array([x[s] for s in seeds], dtype=float) for x in (a, b)]
    return paired_bootstrap_interval(*pair), seeds


def cell(interval):
    if interval is None:
        return "not run"
    mean, low, high = interval
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}] {verdict(interval)}"


def metric_rows(records, task):
    """Markdown rows: each form and metric, its value per seed, minus each baseline."""
    rows = []
    for form in CREDIT_FORMS:
        for shown, where, key in METRICS[task]:
            mine = per_problem(records, task, form, where, key)
            if not mine:
                rows.append(f"| {form} | {shown} | not run | | | |")
                continue
            values = " ".join(f"{np.mean(mine[s]):.3f}" for s in sorted(mine))
            cells = []
            for base in BASELINES.values():
                interval, _ = difference(mine, per_problem(records, task, base, where, key))
                cells.append(cell(interval))
            seeds = ",".join(str(s) for s in sorted(mine))
            rows.append(
                f"| {form} | {shown} | {values} (seeds {seeds}) | " + " | ".join(cells) + " |"
            )
    return rows


def place_rows(places):
    """Markdown rows: code's valid answers at each place, per method, and each form minus the warm
    start asked for sets of 3, per place."""
    by_method = {}
    for key, values in places.items():
        task, method, seed = key.split("/")
        by_method.setdefault((task, method), {})[int(seed)] = np.array(values)
    rows = []
    for (task, method), per_seed in sorted(by_method.items()):
        means = np.mean([v.mean(0) for v in per_seed.values()], 0)
        shown = " / ".join(f"{x:.3f}" for x in means)
        cells = []
        warm = by_method.get((task, "warm_start_m3"))
        if warm and method != "warm_start_m3":
            for j in range(len(means)):
                a = {s: v[:, j] for s, v in per_seed.items()}
                cells.append(cell(difference(a, {s: v[:, j] for s, v in warm.items()})[0]))
        seeds = ",".join(str(s) for s in sorted(per_seed))
        rows.append(f"| {task} | {method} | {seeds} | {shown} | " + " | ".join(cells) + " |")
    return rows


def report(credit_dir):
    """The tables, from credit_dir's result files and the board's -> markdown text."""
    records = load_records([BOARD, credit_dir])
    mine = [r for r in records if r["method"] in CREDIT_FORMS]
    tasks = [t for t in METRICS if any(r["task"] == t for r in mine)]
    lines = ["# Credit inside VPO's set: each form minus VPO, GRPO and the warm start", ""]
    lines += [f"Commits: {', '.join(sorted({r.get('commit', '?') for r in mine}))}.", ""]
    for task in tasks:
        lines += [f"## {task}", ""]
        lines += [HEADER]
        lines += ["|---|---|---|---|---|---|"] + metric_rows(records, task) + [""]
    places = read_places(credit_dir)
    if places:
        lines += ["## Valid answers by place in the set (held-out pools)", ""]
        lines += [PLACES_HEADER]
        lines += ["|---|---|---|---|---|---|---|"] + place_rows(places) + [""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--valid-by-place", metavar="DIR", help="measure DIR/runs/code-vpo_*'s checkpoints"
    )
    p.add_argument("--out", help="where valid_by_place.json and summary.md go")
    p.add_argument("--report", metavar="DIR", help="print and write DIR/summary.md")
    args = p.parse_args(argv)
    if args.valid_by_place:
        out = args.out or args.valid_by_place
        runs = sorted(glob.glob(os.path.join(args.valid_by_place, "runs", "code-vpo_*-s*")))
        runs = [r for r in runs if os.path.exists(os.path.join(r, "final.pt"))]
        path = os.path.join(out, PLACES_FILE)
        found = read_places(out)
        measure_places(runs, found)
        os.makedirs(out, exist_ok=True)
        with open(path, "w") as f:
            json.dump(found, f, indent=1, sort_keys=True)
    if args.report:
        text = report(args.report)
        with open(os.path.join(args.report, "summary.md"), "w") as f:
            f.write(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
