"""
Predict, then run: the experiments of docs/EXERCISES.md train THIS tree's grpo_vs_vpo.py (with your
answers in it) once as it is and once with one line changed, as you would change it, on the same
seeds, and compare the two. Each run is `python grpo_vs_vpo.py --seed S --out FILE.json`, one at a
time; its JSON (per held-out problem numbers, and the sha256 of the text it trained) and its printed
log go under out/one_file/ (NAME/ for an experiment). The tables give means and 95% paired bootstrap
intervals over seeds and problems (report.paired_bootstrap_interval).

    python lab/one_file_seeds.py --experiment no_kl     # your file and KL_COEF = 0.0, seeds 0 1 2
    python lab/one_file_seeds.py --experiment no_kl --seeds 0 --set RL_STEPS=50   # a quicker look
    python lab/one_file_seeds.py                        # only your unchanged file, seeds 0 1 2
    python lab/one_file_seeds.py --experiment all       # every experiment of EXPERIMENTS
    python lab/one_file_seeds.py --experiment no_kl --committed   # the COMMITTED runs' table
    python lab/one_file_seeds.py --experiment all --report        # ... written to tables.md
    python lab/one_file_seeds.py --trainer              # train.py on configs/persona_one_file.yaml

A saved run is reused only while the text it trained is the same (the file, the experiment's line,
--set), so an edit to grpo_vs_vpo.py trains again. --set NAME=VALUE replaces the file's line
`NAME = ...` in both runs (after the experiment's change). --committed and --report train nothing:
they read the committed runs in docs/figures/one_file/, made from the reference answers (with --out
docs/figures/one_file), and label them so; --report also writes their tables, with the trainer's,
to docs/figures/one_file/tables.md.

--trainer runs `python train.py --config configs/persona_one_file.yaml --set algo=A seed=S` for
GRPO and VPO (checkpoints under out/one_file_config/) and measures their pools and the warm
start's on the one file's 40 held-out problems of each seed (evaluate.evaluate_checkpoint, pools of
30, the evaluation's 64 held-out weightings), into docs/figures/one_file/trainer/.

Deliberately left out: runs in parallel (one heavy process at a time on a small machine), figures.
"""

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

import train
from config import make_task
from evaluate import evaluate_checkpoint, heldout_weights
from lab.report import fmt_interval, paired_bootstrap_interval, verdict
from metrics import max_at_k, scalarized_best_at_k
from runfiles import load_checkpoint

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONE_FILE = os.path.join(HERE, "grpo_vs_vpo.py")
RUNS = os.path.join(HERE, "docs", "figures", "one_file")  # the committed runs
OUT = os.path.join(HERE, "out", "one_file")  # this tree's runs: not committed
TRAINER_CONFIG = os.path.join(HERE, "configs", "persona_one_file.yaml")
TRAINER_RUNS = os.path.join(HERE, "out", "one_file_config")  # checkpoints: not committed
SEEDS = (0, 1, 2)
KS = (1, 5, 30)  # the one file's
# name -> (a line of grpo_vs_vpo.py, what it becomes): each experiment changes that one line. Every
# line lies outside the functions the exercises blank, so it is there in a student's tree too.
EXPERIMENTS = {
    # each answer replaced by its set's mean reward vector: the best answer of a set under any
    # trade-off is then the mean answer, so VPO scores a set by its answers' mean, not its best
    # (a rollout of one answer, GRPO's, is unchanged)
    "max_to_mean": (
        "adv = advantages(algo, rewards, weightings)",
        "adv = advantages(algo, rewards.mean(dim=2, keepdim=True).expand_as(rewards), weightings)",
    ),
    "one_update": ("UPDATES_PER_BATCH = 2", "UPDATES_PER_BATCH = 1"),
    "no_kl": ("KL_COEF = 0.01", "KL_COEF = 0.0"),
    "m1": ("ANSWERS = 3", "ANSWERS = 1"),
    "four_personas": ("PersonaTask(num_personas=2)", "PersonaTask(num_personas=4)"),
}
# How a committed experiment's runs were made, where the line changed then was another
COMMITTED_AS = {
    "max_to_mean": "the committed runs changed the set score's max over answers into a mean inside "
    "`advantages`: the same scores up to rounding",
}
# The intervals every table gives: (a, b, metric), for the claim a - b > 0; {top} is the largest k
# of the runs (the file's POOL: 30 unless --set changes it).
GAPS = (
    ("VPO", "GRPO", "w-best@{top}"),
    ("VPO", "warm start m", "w-best@{top}"),
    ("GRPO", "VPO", "best@1"),
)


def changed_source(name, text=None):
    """grpo_vs_vpo.py's text (or `text`) with experiment `name`'s one line changed."""
    old, new = EXPERIMENTS[name]
    if text is None:
        with open(ONE_FILE) as f:
            text = f.read()
    if text.count(old) != 1:
        raise ValueError(f"experiment {name}: '{old}' must occur once in grpo_vs_vpo.py")
    return text.replace(old, new)


def with_settings(text, settings):
    """The file's text with each "NAME=VALUE" of `settings` replacing its line `NAME = ...`."""
    for setting in settings or ():
        name, sep, value = setting.partition("=")
        line = re.compile(rf"^{re.escape(name.strip())} = .*$", re.MULTILINE)
        if not sep or len(line.findall(text)) != 1:
            raise ValueError(f"--set {setting}: grpo_vs_vpo.py has no one line '{name} = ...'")
        replacement = f"{name.strip()} = {value.strip()}"
        text = line.sub(lambda _, line=replacement: line, text)
    return text


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_seed(folder, seed, source, label=""):
    """One run of the file's text `source` at `seed` -> the JSON's path. A JSON already there is
    reused only if it records the same text's sha256; else the file is trained again."""
    out = os.path.join(folder, f"s{seed}.json")
    if os.path.exists(out):
        with open(out) as f:
            if json.load(f).get("source_sha256") == sha256(source):
                print(
                    f"{label or 'grpo_vs_vpo.py'} seed {seed}: the same text's run reused ({out})"
                )
                return out
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=HERE)
    print(
        f"{label or 'grpo_vs_vpo.py'} seed {seed}: training, log in {folder}/s{seed}.log",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "grpo_vs_vpo.py")
        with open(script, "w") as f:
            f.write(source)
        command = [sys.executable, script, "--seed", str(seed), "--out", out + ".part"]
        with open(os.path.join(folder, f"s{seed}.log"), "w") as log:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=HERE, env=env)
    if done.returncode:
        raise SystemExit(
            f"error: the run failed (exit {done.returncode}): see {folder}/s{seed}.log"
        )
    with open(out + ".part") as f:
        run = json.load(f)
    run.update(source_sha256=sha256(source), tree=HERE)
    with open(out + ".part", "w") as f:
        json.dump(run, f, indent=1)
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


def load(folder, seeds=SEEDS):
    """{seed: the run's JSON} for the seeds saved in `folder`."""
    runs = {}
    for seed in seeds:
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
    """Markdown lines: the means over seeds (per-seed means of w-best@top beside), then the paired
    intervals of GAPS and, against the unchanged file's runs (baseline), each model's change."""
    seeds = sorted(runs)
    first = runs[seeds[0]]["per_problem"]
    names = list(first)
    top = max(int(metric.split("@")[1]) for metric in first[names[0]])
    lines = ["| metric | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for metric in first[names[0]]:
        means = [np.mean([runs[s]["per_problem"][n][metric] for s in seeds]) for n in names]
        lines.append(f"| {metric} | " + " | ".join(f"{x:.3f}" for x in means) + " |")
    lines.append("")
    for name in names:
        by_seed = [np.mean(runs[s]["per_problem"][name][f"w-best@{top}"]) for s in seeds]
        lines.append(f"- {name}, w-best@{top} by seed: " + " / ".join(f"{x:.3f}" for x in by_seed))
    seconds = [runs[s]["seconds"] for s in seeds]
    lines.append(f"- seeds {', '.join(map(str, seeds))}; wall time a run: {seconds} s")
    lines += ["", "| gap (paired over seeds and problems) | mean [95% interval] | verdict |"]
    lines.append("|---|---|---|")
    pairs = [(a, b, metric.format(top=top), runs, runs) for a, b, metric in GAPS]
    if baseline:
        for name in ("GRPO", "VPO"):
            for metric in ("best@1", f"w-best@{top}"):
                pairs.append((name, name, metric, runs, baseline))
    for a, b, metric, runs_a, runs_b in pairs:
        x = np.array([column(runs_a[s]["per_problem"], a)[metric] for s in seeds])
        y = np.array([column(runs_b[s]["per_problem"], b)[metric] for s in seeds])
        interval = paired_bootstrap_interval(x, y)
        label = f"{a} - {b}" if runs_a is runs_b else f"{a} changed - {b} unchanged"
        lines.append(f"| {label}, {metric} | {fmt_interval(interval)} | {verdict(interval)} |")
    return lines


def tables(folder, names, seeds=SEEDS, notes=None):
    """Markdown lines: the unchanged file's table from `folder`, then each experiment's from
    folder/NAME/, paired with the unchanged file's runs of the same seeds (notes: {name: a line
    under its heading})."""
    baseline = load(folder, seeds)
    if not baseline:
        return [f"no runs of grpo_vs_vpo.py in {folder}"]
    lines = ["## grpo_vs_vpo.py", ""] + table(baseline)
    for name in names:
        runs = load(os.path.join(folder, name), seeds)
        if not runs:
            lines += ["", f"## {name}: no runs in {os.path.join(folder, name)}"]
            continue
        if set(runs) != set(baseline):
            raise SystemExit(f"error: {name}'s seeds {sorted(runs)} are not {sorted(baseline)}")
        # four personas change the problems themselves, so no pairing with the baseline
        paired = baseline if name != "four_personas" else None
        old, new = EXPERIMENTS[name]
        lines += ["", f"## {name}: `{old}` -> `{new}`", ""]
        lines += [f"({notes[name]})", ""] if name in (notes or {}) else []
        lines += table(runs, paired)
    return lines


def committed_tables(names, write=False):
    """Print the committed runs' tables, labelled so (with the trainer's, written to
    docs/figures/one_file/tables.md, when `write`)."""
    lines = [
        "# COMMITTED runs of grpo_vs_vpo.py, made from the reference answers",
        "",
        "Not your tree's runs (`python lab/one_file_seeds.py --experiment NAME` trains those):",
        "made by `python lab/one_file_seeds.py --experiment all --out docs/figures/one_file`,",
        "the tables by `python lab/one_file_seeds.py --experiment all --report`.",
        "",
    ]
    lines += tables(RUNS, names, notes=COMMITTED_AS)
    trainer = load(os.path.join(RUNS, "trainer"))
    if write and trainer:
        lines += ["", "## train.py --config configs/persona_one_file.yaml", ""] + table(trainer)
    print("\n".join(lines))
    if write:
        with open(os.path.join(RUNS, "tables.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"\nwrote {os.path.relpath(os.path.join(RUNS, 'tables.md'), HERE)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--experiment", choices=[*EXPERIMENTS, "all"])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), metavar="S")
    parser.add_argument(
        "--set", nargs="+", default=[], metavar="NAME=VALUE", help="a line of the file, both runs"
    )
    parser.add_argument("--out", default=OUT, help=f"where the runs go (default {OUT})")
    parser.add_argument(
        "--committed", action="store_true", help="train nothing: the committed runs' tables"
    )
    parser.add_argument(
        "--report", action="store_true", help="--committed, written to docs/figures/one_file/"
    )
    parser.add_argument("--trainer", action="store_true", help="train.py on the one file's config")
    args = parser.parse_args(argv)
    committed = args.committed or args.report
    if committed and (args.set or args.seeds != list(SEEDS) or args.out != OUT):
        parser.error("--committed and --report read the committed runs: no --set, --seeds, --out")
    if args.trainer:
        for seed in [] if committed else SEEDS:
            train_and_measure(seed)
        runs = load(os.path.join(RUNS, "trainer"))
        print("\n".join(["## train.py --config configs/persona_one_file.yaml", ""] + table(runs)))
        return
    names = {None: [], "all": list(EXPERIMENTS)}.get(args.experiment, [args.experiment])
    if committed:
        committed_tables(names, write=args.report)
        return
    with open(ONE_FILE) as f:
        source = f.read()  # this tree's file, your answers in it
    try:
        base = with_settings(source, args.set)
        changed = {name: with_settings(changed_source(name, source), args.set) for name in names}
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    for seed in args.seeds:
        run_seed(args.out, seed, base)
        for name in names:
            run_seed(os.path.join(args.out, name), seed, changed[name], label=name)
    lines = [f"# This tree's grpo_vs_vpo.py ({ONE_FILE}), trained now", ""]
    if args.set:
        lines += [f"Settings changed in both runs: {', '.join(args.set)}.", ""]
    lines += tables(args.out, names, args.seeds)
    print("\n".join(lines))
    with open(os.path.join(args.out, "tables.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
