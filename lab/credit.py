"""Credit inside VPO's set: vpo_credit's per-answer forms trained against VPO, GRPO and the warm
start (docs/RESULTS.md, "Credit inside VPO's set").

    python lab/experiment.py --algos vpo_togo vpo_marginal --tasks code --seeds 0 \
        --against docs/figures/leaderboard --set out_dir=out/credit evo_problems=0
    python lab/credit.py --pools out/credit --out docs/figures/credit   # code: valid by place
    python lab/credit.py --report docs/figures/credit                   # the tables

The runs are lab/experiment.py's (lab/experiment.CREDIT_FORMS) or any train.py run folders named
TASK-METHOD-sSEED under DIR/runs/. What result files lack, the share of valid answers at each place
of a set, is measured here from the run folders' final checkpoints and their warm starts, on the
pools' own held-out problems and draws (with best@30 and pass@30 of the same pools). Every
difference comes with its paired 95% interval over seeds and problems
(report.paired_bootstrap_interval) on the seeds both hold: against the committed board (VPO, GRPO,
the warm start asked for sets of 3) for lab/experiment.py's result files, and against the run
named vpo_set (vpo_credit=set) for the measured pools.
Deliberately left out: the search on code (its cost did not fit the session).
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
from lab.report import (  # noqa: E402
    load_records,
    paired_bootstrap_interval,
    verdict,
)

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
POOLS_FILE = "pools_by_place.json"
HEADER = (
    "| form | metric | mean (per seed) | - VPO [95%] | - GRPO [95%] | - warm start (m=3) [95%] |"
)
MEASURED = ("place 1", "place 2", "place 3", "best@30", "pass@30")  # pool_rows' columns
POOLS_HEADER = (
    "| task | method | seeds | valid at "
    + " | ".join(MEASURED)
    + " | "
    + " | ".join(f"{name} - vpo_set [95%]" for name in MEASURED)
    + " |"
)


def valid_by_place(rewards, m):
    """rewards (problems, n, D) of pools written m per rollout -> (problems, m): the share of
    answers at each place of a rollout whose reward vector is not all zero (the pool's `valid`)."""
    valid = rewards.sum(-1) > 0  # (problems, n)
    return valid.reshape(len(rewards), -1, m).mean(1)


def measure_pools(run_dirs, found, settings=EVALUATION):
    """Each run folder's final checkpoint and its warm start (asked for sets of its m), pooled on
    its seed's held-out problems as lab/workers.pools_job pools them, into `found`
    {"task/method/seed": per-problem valid_by_place, best and pass}; the method is the folder's
    name between its task and seed ("code-vpo_togo-s0": vpo_togo); what `found` holds already is not
    measured again."""
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
            result, rewards, _ = evaluate.evaluate_checkpoint(
                path, task, problems, settings["pool_n"], seed=seed, m=m
            )
            found[key] = {
                "valid_by_place": valid_by_place(rewards, m).round(4).tolist(),
                **{k: result["per_problem"][k] for k in ("best", "pass")},
            }
            if name == method:  # what its training logged: the last LAST_STEPS steps' means
                found[key]["training"] = training_tail(run_dir)
            places = np.mean(found[key]["valid_by_place"], 0).round(3).tolist()
            print(key, "valid by place", places, "best@30", np.mean(found[key]["best"]), flush=True)


LAST_STEPS = 50
LOGGED = ("valid_answers", "set_score", "reward_scalar", "entropy", "adv_std", "grad_norm")


def training_tail(run_dir):
    """A run folder's metrics.jsonl -> {metric: mean over its last LAST_STEPS steps} of LOGGED,
    and step 1's values (the same batch for runs of one warm start and seed)."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [r for r in map(json.loads, f) if r["kind"] == "train"]
    tail = {k: round(float(np.mean([r[k] for r in steps[-LAST_STEPS:]])), 4) for k in LOGGED}
    return {**tail, "step_1": {k: steps[0][k] for k in LOGGED}, "steps": steps[-1]["step"]}


def read_pools(folder):
    """folder's pools_by_place.json ({} if none)."""
    path = os.path.join(folder, POOLS_FILE)
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


def pool_rows(found, base):
    """Markdown rows: per task and method, valid answers at each place, best@30 and pass@30, then
    each minus `base` (a method of the same task) with its paired interval."""
    by_method = {}
    for key, values in found.items():
        task, method, seed = key.split("/")
        by_method.setdefault((task, method), {})[int(seed)] = values
    rows = []
    for (task, method), per_seed in sorted(by_method.items()):
        columns = {
            f"place {j + 1}": lambda v, j=j: np.array(v["valid_by_place"])[:, j] for j in range(3)
        }
        columns |= {
            "best@30": lambda v: np.array(v["best"]),
            "pass@30": lambda v: np.array(v["pass"]),
        }
        means, cells = [], []
        other = by_method.get((task, base))
        for read in columns.values():
            mine = {s: read(v) for s, v in per_seed.items()}
            means.append(np.mean([x.mean() for x in mine.values()]))
            if other and method != base:
                cells.append(cell(difference(mine, {s: read(v) for s, v in other.items()})[0]))
        seeds = ",".join(str(s) for s in sorted(per_seed))
        shown = " | ".join(f"{x:.3f}" for x in means)
        rows.append(f"| {task} | {method} | {seeds} | {shown} | " + " | ".join(cells) + " |")
    return rows


def report(credit_dir):
    """The tables, from credit_dir's result files and the board's -> markdown text."""
    records = load_records([BOARD, credit_dir]) if os.path.isdir(f"{credit_dir}/results") else []
    mine = [r for r in records if r["method"] in CREDIT_FORMS]
    tasks = [t for t in METRICS if any(r["task"] == t for r in mine)]
    lines = ["# Credit inside VPO's set: each form against VPO's set credit", ""]
    if mine:
        lines += [f"Commits: {', '.join(sorted({r.get('commit', '?') for r in mine}))}.", ""]
    for task in tasks:
        lines += [f"## {task}", ""]
        lines += [HEADER]
        lines += ["|---|---|---|---|---|---|"] + metric_rows(records, task) + [""]
    pools = read_pools(credit_dir)
    if pools:
        lines += ["## Valid answers by place in the set, from the runs' checkpoints", ""]
        lines += [POOLS_HEADER, "|---" * (3 + 2 * len(MEASURED)) + "|"]
        lines += pool_rows(pools, base="vpo_set") + [""]
        lines += [
            f"Training problems, the mean of the last {LAST_STEPS} steps (step 1 in brackets):",
            "",
        ]
        lines += ["| run | steps | " + " | ".join(LOGGED) + " |", "|---" * (2 + len(LOGGED)) + "|"]
        for key, values in sorted(pools.items()):
            if "training" in values:
                t = values["training"]
                shown = " | ".join(f"{t[k]:.3f} ({t['step_1'][k]:.3f})" for k in LOGGED)
                lines.append(f"| {key} | {t['steps']} | {shown} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pools", metavar="DIR", help="measure DIR/runs/code-vpo_*'s checkpoints")
    p.add_argument("--out", help=f"where {POOLS_FILE} goes (default: DIR)")
    p.add_argument("--report", metavar="DIR", help="print and write DIR/summary.md")
    args = p.parse_args(argv)
    if args.pools:
        out = args.out or args.pools
        runs = sorted(glob.glob(os.path.join(args.pools, "runs", "code-vpo_*-s*")))
        runs = [r for r in runs if os.path.exists(os.path.join(r, "final.pt"))]
        found = read_pools(out)
        measure_pools(runs, found)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, POOLS_FILE), "w") as f:
            json.dump(found, f, indent=1, sort_keys=True)
    if args.report:
        text = report(args.report)
        with open(os.path.join(args.report, "summary.md"), "w") as f:
            f.write(text + "\n")
        print(text)


if __name__ == "__main__":
    main()
