"""
The one file (grpo_vs_vpo.py) over three seeds, and the predict-then-run experiments of
docs/EXERCISES.md: each run is `python grpo_vs_vpo.py --seed S --out FILE.json`, one at a time,
its JSON (per held-out problem numbers) and its printed log kept under docs/figures/one_file/; the
tables give means and 95% paired bootstrap intervals over seeds and problems
(metrics.paired_bootstrap_interval). An experiment runs a copy of the file with one line changed,
as a student would change it, and is compared with the unchanged file's runs of the same seeds.

    python lab/one_file_seeds.py                        # seeds 0 1 2; a saved run is reused
    python lab/one_file_seeds.py --experiment no_kl     # the file with KL_COEF = 0.0, 3 seeds
    python lab/one_file_seeds.py --experiment all       # every experiment of EXPERIMENTS
    python lab/one_file_seeds.py --trainer              # train.py on configs/persona_one_file.yaml
    python lab/one_file_seeds.py --report               # only the tables, from the saved runs

--trainer runs `python train.py --config configs/persona_one_file.yaml --set algo=A seed=S` for
GRPO and VPO (checkpoints under out/one_file_config/) and measures their pools and the warm
start's on the one file's 40 held-out problems of each seed (evaluate.evaluate_checkpoint, pools of
30, the evaluation's 64 held-out weightings), into docs/figures/one_file/trainer/.

Deliberately left out: runs in parallel (one heavy process at a time on a small machine), figures.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from lab.report import fmt_interval, verdict
from metrics import max_at_k, paired_bootstrap_interval, scalarized_best_at_k

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONE_FILE = os.path.join(HERE, "grpo_vs_vpo.py")
RUNS = os.path.join(HERE, "docs", "figures", "one_file")
TRAINER_CONFIG = os.path.join(HERE, "configs", "persona_one_file.yaml")
TRAINER_RUNS = os.path.join(HERE, "out", "one_file_config")  # checkpoints: not committed
SEEDS = (0, 1, 2)
KS = (1, 5, 30)  # the one file's
# name -> (a line of grpo_vs_vpo.py, what it becomes): each experiment changes that one line.
EXPERIMENTS = {
    # the start of the line only: the whole line is exercise (b)'s answer, stripped from the kit
    "max_to_mean": ("scores = scalarized.max(dim=-1).values", "scores = scalarized.mean(dim=-1)"),
    "one_update": ("UPDATES_PER_BATCH = 2", "UPDATES_PER_BATCH = 1"),
    "no_kl": ("KL_COEF = 0.01", "KL_COEF = 0.0"),
    "m1": ("ANSWERS = 3", "ANSWERS = 1"),
    "four_personas": ("PersonaTask(num_personas=2)", "PersonaTask(num_personas=4)"),
}
# The intervals every table gives: (a, b, metric), for the claim a - b > 0.
GAPS = (
    ("VPO", "GRPO", "w-best@30"),
    ("VPO", "warm start m", "w-best@30"),
    ("GRPO", "VPO", "best@1"),
)


def changed_source(name):
    """grpo_vs_vpo.py's text with experiment `name`'s one line changed."""
    old, new = EXPERIMENTS[name]
    with open(ONE_FILE) as f:
        text = f.read()
    if text.count(old) != 1:
        raise ValueError(f"experiment {name}: '{old}' must occur once in grpo_vs_vpo.py")
    return text.replace(old, new)


def run_seed(folder, seed, experiment=None):
    """One run of the file (changed by `experiment`) at `seed`, unless its JSON exists -> the
    JSON's path."""
    out = os.path.join(folder, f"s{seed}.json")
    if os.path.exists(out):
        return out
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=HERE)
    with tempfile.TemporaryDirectory() as tmp:
        script = ONE_FILE
        if experiment:
            script = os.path.join(tmp, "grpo_vs_vpo.py")
            with open(script, "w") as f:
                f.write(changed_source(experiment))
        command = [sys.executable, script, "--seed", str(seed), "--out", out + ".part"]
        with open(os.path.join(folder, f"s{seed}.log"), "w") as log:
            subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=HERE, env=env, check=True
            )
    os.replace(out + ".part", out)  # a killed run leaves no JSON, so it runs again
    return out


def train_and_measure(seed):
    """GRPO and VPO of train.py on the one file's config at `seed`, and their pools and the warm
    start's measured as the one file measures them, unless saved -> the JSON's path."""
    folder = os.path.join(RUNS, "trainer")
    out = os.path.join(folder, f"s{seed}.json")
    if os.path.exists(out):
        return out
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    finals, seconds = {}, {}
    for algo in ("grpo", "vpo"):
        run_dir = os.path.join(TRAINER_RUNS, f"{algo}-s{seed}")
        finals[algo] = os.path.join(run_dir, "final.pt")
        settings = [f"algo={algo}", f"seed={seed}", f"out_dir={run_dir}", "overwrite=true"]
        command = [sys.executable, "train.py", "--config", TRAINER_CONFIG, "--set", *settings]
        start = time.time()
        with open(os.path.join(folder, f"s{seed}-{algo}.log"), "w") as log:
            subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=HERE, env=env, check=True
            )
        seconds[algo] = round(time.time() - start)
    cfg = train.resolve_config(TRAINER_CONFIG)
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", cfg["pool_problems"], random.Random(seed))
    weights = heldout_weights(task.dim, cfg["heldout_weightings"], seed)
    warm = load_checkpoint(finals["vpo"])["warm_start"]
    m = cfg["answers_per_rollout"]
    checkpoints = {"warm start": (warm, 1), f"warm start m={m}": (warm, m)}
    checkpoints.update({"GRPO": (finals["grpo"], 1), "VPO": (finals["vpo"], m)})
    per_problem = {}
    for name, (path, answers) in checkpoints.items():
        _, rewards, _ = evaluate_checkpoint(
            path, task, problems, n=cfg["pool_n"], seed=seed, m=answers
        )
        per_problem[name] = {f"best@{k}": [max_at_k(r.mean(-1), k) for r in rewards] for k in KS}
        for k in KS:
            per_problem[name][f"w-best@{k}"] = [
                scalarized_best_at_k(r, weights, [k])[0] for r in rewards
            ]
    with open(out, "w") as f:
        json.dump(dict(seed=seed, seconds=seconds, per_problem=per_problem), f, indent=1)
    return out


def load(folder):
    """{seed: the run's JSON} for the seeds saved in `folder`."""
    runs = {}
    for seed in SEEDS:
        path = os.path.join(folder, f"s{seed}.json")
        if os.path.exists(path):
            with open(path) as f:
                runs[seed] = json.load(f)
    return runs


def column(per_problem, name):
    """A model's numbers by its name; "warm start m" is the warm start asked for m answers."""
    if name == "warm start m":
        name = next(n for n in per_problem if n.startswith("warm start m="))
    return per_problem[name]


def table(runs, baseline=None):
    """Markdown lines: the means over seeds (per-seed means of w-best@30 beside), then the paired
    intervals of GAPS and, against the unchanged file's runs (baseline), each model's change."""
    seeds = sorted(runs)
    first = runs[seeds[0]]["per_problem"]
    names = list(first)
    lines = ["| metric | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for metric in first[names[0]]:
        means = [np.mean([runs[s]["per_problem"][n][metric] for s in seeds]) for n in names]
        lines.append(f"| {metric} | " + " | ".join(f"{x:.3f}" for x in means) + " |")
    lines.append("")
    for name in names:
        by_seed = [np.mean(runs[s]["per_problem"][name]["w-best@30"]) for s in seeds]
        lines.append(f"- {name}, w-best@30 by seed: " + " / ".join(f"{x:.3f}" for x in by_seed))
    seconds = [runs[s]["seconds"] for s in seeds]
    lines.append(f"- seeds {', '.join(map(str, seeds))}; wall time a run: {seconds} s")
    lines += ["", "| gap (paired over seeds and problems) | mean [95% interval] | verdict |"]
    lines.append("|---|---|---|")
    pairs = [(a, b, metric, runs, runs) for a, b, metric in GAPS]
    if baseline:
        for name in ("GRPO", "VPO"):
            for metric in ("best@1", "w-best@30"):
                pairs.append((name, name, metric, runs, baseline))
    for a, b, metric, runs_a, runs_b in pairs:
        x = np.array([column(runs_a[s]["per_problem"], a)[metric] for s in seeds])
        y = np.array([column(runs_b[s]["per_problem"], b)[metric] for s in seeds])
        interval = paired_bootstrap_interval(x, y)
        label = f"{a} - {b}" if runs_a is runs_b else f"{a} changed - {b} unchanged"
        lines.append(f"| {label}, {metric} | {fmt_interval(interval)} | {verdict(interval)} |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--experiment", choices=[*EXPERIMENTS, "all"])
    parser.add_argument("--trainer", action="store_true", help="train.py on the one file's config")
    parser.add_argument("--report", action="store_true", help="no runs, only the tables")
    args = parser.parse_args(argv)
    if args.trainer:
        for seed in [] if args.report else SEEDS:
            train_and_measure(seed)
        runs = load(os.path.join(RUNS, "trainer"))
        print("\n".join(["## train.py --config configs/persona_one_file.yaml", ""] + table(runs)))
        return
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
    if not args.report:
        for seed in SEEDS:
            run_seed(RUNS, seed)
        for name in filter(None, names):
            for seed in SEEDS:
                run_seed(os.path.join(RUNS, name), seed, experiment=name)
    baseline = load(RUNS)
    print("\n".join(["## grpo_vs_vpo.py", ""] + table(baseline)))
    for name in filter(None, names if args.experiment else []):
        runs = load(os.path.join(RUNS, name))
        if runs:
            # four personas change the problems themselves, so no pairing with the baseline
            paired = baseline if name != "four_personas" else None
            old, new = EXPERIMENTS[name]
            print("\n".join(["", f"## {name}: `{old}` -> `{new}`", ""] + table(runs, paired)))


if __name__ == "__main__":
    main()
