"""Does RL's narrowing spread to unsolved problems, and does outcome-based exploration or VPO stop
it? The measurements of Song, Kempe and Munos ("Outcome-based Exploration for LLM Reasoning", arXiv
2509.06941) on this project's code task and maze.

    python lab/exploration.py                    # code and the maze, 6 methods, 3 seeds
    python lab/exploration.py --quick            # a smoke test: tiny sizes, numbers meaningless
    python lab/exploration.py --seeds 0          # one seed
    python lab/exploration.py --measure-only     # measure finished runs again, train nothing
    python lab/exploration.py --methods ucb_con batch_explore --set explore_coef=1.0 --out DIR \
        --against docs/figures/exploration      # a new arm beside another folder's finished runs
    python lab/exploration.py --report out/exploration   # tables and figure from stored files
    python lab/exploration.py --methods ucb_con_before ucb_con_current --against DIR  # open choices
    python lab/exploration.py --tasks code --methods grpo ucb_con batch_explore --set \
        outcome_reward=true format_coef=0 train_screen_answers=8   # a set the start half solves

For each task and seed: one finite training set (SIZES: drawn once, visited for ten epochs), one
starting point (the code task's warm start, the maze's committed base), and from it GRPO, the four
outcome-based exploration methods (ucb, ucb_mean, ucb_con, batch_explore), VPO and GRPO with VPO's
compute (grpo_x3: three times the prompts a step, so as many answers per problem as VPO), all with
the same steps. lab/experiment.py trains them and measures them on held-out problems (pass@k,
best@k, w-best@30, diversity, with paired intervals against GRPO and VPO). Then, per run:
  a. RL as a sampling process (the paper's Figure 2): the run's own history (metrics.jsonl: the
     share of training problems solved so far and the distinct outcomes per problem, all and on the
     problems still unsolved, against answers drawn per problem), beside fresh samples of the
     starting point on the same problems at the same counts (single answers; and for VPO, whose
     answers come m to a rollout, also the starting point asked for m answers a call).
  b. The transfer (the paper's Table 2): distinct outcomes among 8 answers per training problem, on
     the problems the run solved during training and on those it never solved, from the starting
     point and from the final policy; token entropy on correct and on incorrect answers.
Solved: the code task passes every hidden test; the maze reaches its exact optimum (task.solved).
Writes, beside experiment.py's runs/ and results/: exploration/*.json (one per task and seed for
the starting point, one per run), exploration.md and exploration.png. Finished files are reused;
with --against DIR, so are DIR's for every method not trained here and for the starting point (the
same training sets and starting points: a run and a start of different problems are refused), and
the tables show those methods marked as DIR's.
Deliberately left out: the search (evo_problems=0), the paper's pass@k over training steps.
"""

import argparse
import contextlib
import json
import math
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)  # so that `python lab/exploration.py` finds the reference and the lab

import numpy as np
import torch

import runfiles
from config import ConfigError, WriteError, make_task
from evaluate import load_policy
from exploration import candidate_batches
from lab import experiment, ray_jobs, report, tables
from lab.report import paired_bootstrap_interval
from lab.workers import worker_pool
from rollouts import sample_rollouts
from tasks import TrainingSet

METHODS = ["grpo", "ucb", "ucb_mean", "ucb_con", "batch_explore", "vpo", "grpo_x3"]
# the paper's open choices (lab/experiment.py's VARIANTS), run only when named with --methods;
# the tables show every method measured, these after the seven
OPEN_CHOICES = list(experiment.OPEN_CHOICES)
SHOWN = METHODS + OPEN_CHOICES
TASKS = ["code", "maze"]
# RL steps and the finite training set's size per task: ten epochs of prompts_per_step problems a
# step (code 16, maze 8). The code task trains 400 steps here, not its headline 1,600, so that three
# seeds fit two hours on two cores; every method gets the same steps.
SIZES = {
    "code": {"steps": 400, "train_problems": 640},
    "maze": {"steps": 300, "train_problems": 240},
}
QUICK_SIZES = {"steps": 4, "train_problems": 4}  # configs/tiny.yaml: 2 prompts a step, 2 epochs
TRANSFER_ANSWERS = 8  # answers per training problem for the transfer table (the paper's 8)
CHUNK_ROWS = 4096  # rows per sampler call: memory stays small
# The starting point sampled two ways: single answers, and (for VPO, whose answers come m to a
# rollout, written to differ) asked for VPO's m answers a call. Tables a and b: (row, run, start).
STARTS = ["start", "start_sets"]
ROWS = [(method, method, "start") for method in SHOWN]
ROWS += [("vpo, against the start asked for sets", "vpo", "start_sets")]


# ---- Sampling a checkpoint on the training set ----


def answer_entropies(batch, tok, m):
    """Each answer's mean token entropy -> (B, m), nan where a rollout wrote fewer answers. An
    answer's tokens run up to its <|sep|> or <|eos|>, which count with it."""
    tokens = batch["completion"].cpu()
    mask = batch["completion_mask"].cpu()
    entropy = batch["entropy"].float().cpu()
    out = np.full((tokens.size(0), m), np.nan)
    for row in range(tokens.size(0)):
        j, total, count = 0, 0.0, 0
        for t in range(tokens.size(1)):
            if not mask[row, t] or j >= m:
                break
            total += float(entropy[row, t])
            count += 1
            if int(tokens[row, t]) in (tok.sep, tok.eos):
                out[row, j] = total / count
                j, total, count = j + 1, 0.0, 0
    return out


def sample_answers(path, task, problems, answers_per_problem, seed, m=None):
    """answers_per_problem answers on each problem from a checkpoint at temperature 1, written m a
    rollout (default: its own m), scored as written -> per problem: outcomes, solved flags and
    token entropies (lists of answers_per_problem)."""
    policy, _ = load_policy(path, m, temperature=1.0)
    policy = policy.seeded(seed)
    m = policy.answers_per_rollout
    rollouts = math.ceil(answers_per_problem / m)
    per_call = max(1, CHUNK_ROWS // rollouts)
    out = []
    for start in range(0, len(problems), per_call):
        chunk = problems[start : start + per_call]
        batch = sample_rollouts(policy, task, chunk, G=rollouts, as_written=True)
        entropies = answer_entropies(batch, policy.tok, m).reshape(len(chunk), rollouts * m)
        for i, problem in enumerate(chunk):
            answers = [a for rollout in batch["answers"][i] for a in rollout]
            rewards = batch["rewards"][i].reshape(-1, task.dim).numpy()
            n = answers_per_problem
            out.append(
                {
                    "outcomes": [task.outcome(problem, a) for a in answers[:n]],
                    "solved": [bool(task.solved(problem, r)) for r in rewards[:n]],
                    "entropy": [None if np.isnan(e) else float(e) for e in entropies[i][:n]],
                }
            )
    return out


def candidates(task, rng, count):
    """The first `count` candidates of exploration.candidate_batches: the problems a screened
    set's positions name."""
    out = []
    for batch in candidate_batches(task, rng):
        out += batch
        if len(out) >= count:
            return out[:count]


def training_problems(cfg):
    """The run's finite training set, drawn exactly as train.make_run draws it; a screened one
    (train_screen_answers) from the places its final checkpoint names among the candidates."""
    task = make_task(cfg["task"], **cfg["task_options"])
    rng = random.Random(cfg["seed"])
    if not cfg["train_screen_answers"]:
        return task, TrainingSet(task, cfg["train_problems"], rng).problems
    final = os.path.join(cfg["out_dir"], "final.pt")
    positions = torch.load(final, map_location="cpu", weights_only=True)["train_set"]["positions"]
    drawn = candidates(task, rng, max(positions) + 1)
    return task, [drawn[i] for i in positions]


def sampling_curve(per_problem, counts):
    """Fresh samples per problem (sample_answers) -> at each count k of `counts`: the share of
    problems solved within k answers, the mean distinct outcomes among them, the same on the
    problems not solved within k."""
    curve = {"samples": [], "solved_share": [], "distinct": [], "distinct_unsolved": []}
    for k in counts:
        solved = [any(p["solved"][:k]) for p in per_problem]
        distinct = [len(set(p["outcomes"][:k])) for p in per_problem]
        unsolved = [d for d, s in zip(distinct, solved) if not s]
        curve["samples"].append(k)
        curve["solved_share"].append(float(np.mean(solved)))
        curve["distinct"].append(float(np.mean(distinct)))
        curve["distinct_unsolved"].append(float(np.mean(unsolved)) if unsolved else math.nan)
    return curve


def transfer_summary(per_problem):
    """Eight answers per problem (sample_answers) -> per problem: distinct outcomes; and the mean
    token entropy of correct and of incorrect answers with their counts."""
    entropy = {"correct": [], "incorrect": []}
    for p in per_problem:
        for ok, e in zip(p["solved"], p["entropy"]):
            if e is not None:
                entropy["correct" if ok else "incorrect"].append(e)
    return {
        "distinct": [len(set(p["outcomes"])) for p in per_problem],
        "entropy": {k: float(np.mean(v)) if v else math.nan for k, v in entropy.items()},
        "answers": {k: len(v) for k, v in entropy.items()},
    }


def start_job(path, cfg, runs_samples, m=1):
    """The starting point on a task and seed: fresh answers on every training problem, m a call, as
    many as the most any run drew (its sampling curve, at powers of 2 and at each run's own count
    `runs_samples`), and its transfer measurement (the first 8 of them)."""
    task, problems = training_problems(cfg)
    max_samples = max(runs_samples)
    per_problem = sample_answers(path, task, problems, max_samples, seed=cfg["seed"], m=m)
    counts = sorted({min(max_samples, 2**i) for i in range(20)} | set(runs_samples))
    transfer = [{k: v[:TRANSFER_ANSWERS] for k, v in p.items()} for p in per_problem]
    return {
        "curve": sampling_curve(per_problem, counts),
        "solved_within": [
            next((i + 1 for i, ok in enumerate(p["solved"]) if ok), None) for p in per_problem
        ],
        "distinct_within": [[len(set(p["outcomes"][:k])) for k in counts] for p in per_problem],
        "counts": counts,
        "transfer": transfer_summary(transfer),
        "problems": [repr(q) for q in problems],
        "answers_a_call": m,
    }


def run_job(run_dir, cfg):
    """One finished run: its history as a sampling process (metrics.jsonl), which training problems
    it solved (final.pt's history), and its transfer measurement from the final policy."""
    task, problems = training_problems(cfg)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [r for r in map(json.loads, f) if r["kind"] == "train"]
    names = ("explore_samples", "explore_solved_share", "explore_distinct")
    names += ("explore_distinct_unsolved",)
    curve = {name: [r[name] for r in steps] for name in names}
    saved = torch.load(os.path.join(run_dir, "final.pt"), map_location="cpu", weights_only=True)
    history = saved["history"]
    final = sample_answers(
        os.path.join(run_dir, "final.pt"), task, problems, TRANSFER_ANSWERS, seed=cfg["seed"]
    )
    keys = [repr(q) for q in problems]
    return {
        "curve": curve,
        "solved": [k in history["solved_at"] for k in keys],
        "distinct": [len(history["counts"].get(k, {})) for k in keys],
        "samples": [history["samples"].get(k, 0) for k in keys],
        "transfer": transfer_summary(final),
        "problems": keys,
    }


# ---- The experiment ----


def measurement_path(out_dir, task, method, seed):
    return os.path.join(out_dir, "exploration", f"{task}-{method}-s{seed}.json")


def run_measurements(
    out_dir, tasks, seeds, quick, workers, extra=None, methods=METHODS, against=None, cluster=None
):
    """After the runs: every missing measurement file of `methods` and of the starting point (unless
    `against`, another experiment's folder, has it), each in a worker (extra: --set's; cluster: a
    lab/ray_jobs.RayJobs to run them on instead)."""
    jobs = []
    for task in tasks:
        for seed in seeds:
            configs = {}  # every method's that --set allows (outcome_reward: not VPO's)
            for a in SHOWN:
                try:
                    configs[a] = experiment.run_config(
                        task, a, seed, out_dir, quick, {**overrides(task, quick), **(extra or {})}
                    )
                except ConfigError:
                    continue
            for method in methods:
                cfg = configs[method]
                path = measurement_path(out_dir, task, method, seed)
                if not os.path.exists(path):
                    jobs.append((path, run_job, (cfg["out_dir"], cfg)))
            # the answers each method's run draws on one problem (VPO: m to a rollout)
            runs_samples = sorted({answers_drawn_per_problem(c) for c in configs.values()})
            path = measurement_path(out_dir, task, "start", seed)
            if not measured(out_dir, against, task, "start", seed):
                # a screened set is read from a run trained here (each method's is the same)
                cfg = configs["grpo" if "grpo" in methods or against else methods[0]]
                jobs.append((path, start_job, (start_path(cfg), cfg, runs_samples)))
            path = measurement_path(out_dir, task, "start_sets", seed)
            if "vpo" in methods and not measured(out_dir, against, task, "start_sets", seed):
                cfg = configs["vpo"]
                m = experiment.train.answers_per_rollout(cfg)
                drawn = [answers_drawn_per_problem(cfg)]
                jobs.append((path, start_job, (start_path(cfg), cfg, drawn, m)))
    if not jobs:
        return
    where = f"{cluster.cpus()} Ray CPUs" if cluster else f"{workers} workers"
    print(f"measuring {len(jobs)} checkpoints on their training sets ({where})", flush=True)
    t0 = time.time()
    running = contextlib.nullcontext(cluster) if cluster else worker_pool(workers)
    with running as pool:
        futures = [(path, pool.submit(fn, *args)) for path, fn, args in jobs]
        for path, future in futures:
            result = future.result()
            with runfiles.writing(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            runfiles.write_json(path, result)  # a file is whole or absent
            print(f"[{time.time() - t0:5.0f}s] {os.path.relpath(path, out_dir)}", flush=True)


def measured(out_dir, against, task, name, seed):
    """Whether out_dir, or the folder `against`, holds this measurement file."""
    folders = [out_dir, against] if against else [out_dir]
    return any(os.path.exists(measurement_path(d, task, name, seed)) for d in folders)


def answers_drawn_per_problem(cfg):
    """The answers a run draws on each problem of its finite training set (VPO: m a rollout)."""
    m = experiment.train.answers_per_rollout(cfg)
    drawn = cfg["steps"] * cfg["prompts_per_step"] * cfg["group_size"] * m
    return math.ceil(drawn / cfg["train_problems"])


def start_path(cfg):
    """The checkpoint every run of a task and seed starts from (the maze's base, else its cached
    warm start)."""
    if cfg["warmstart_from"]:
        return cfg["warmstart_from"]
    return experiment.warmstart_path(cfg)


def overrides(task, quick):
    return {**(QUICK_SIZES if quick else SIZES[task]), "evo_problems": 0}


# ---- The report ----


def load(out_dir, tasks, seeds, against=None):
    """{(task, method, seed): measurement} of the files on disk; with `against`, another folder's
    files fill in each (task, method) that out_dir has none of -> (found, {(task, method) taken
    from `against`})."""
    found, borrowed = {}, set()
    for task in tasks:
        for method in [*STARTS, *SHOWN]:
            for folder in [out_dir, against] if against else [out_dir]:
                for seed in seeds:
                    path = measurement_path(folder, task, method, seed)
                    if os.path.exists(path):
                        with open(path) as f:
                            found[task, method, seed] = json.load(f)
                if any((task, method, seed) in found for seed in seeds):
                    if folder != out_dir:
                        borrowed.add((task, method))
                    break
    return found, borrowed


def start_at(start, samples):
    """The starting point's per-problem solved flags and distinct outcomes at `samples` answers a
    problem (the nearest measured count at or below it)."""
    i = max(j for j, k in enumerate(start["counts"]) if k <= max(1, samples))
    solved = [w is not None and w <= start["counts"][i] for w in start["solved_within"]]
    distinct = [d[i] for d in start["distinct_within"]]
    return start["counts"][i], np.array(solved, float), np.array(distinct, float)


def nan_mean(values):
    """The mean of the numbers that are not nan (nan if none): a seed may have no unsolved problem
    or no correct answer."""
    kept = [float(v) for v in values if not math.isnan(float(v))]
    return float(np.mean(kept)) if kept else math.nan


def measured_pairs(found, task, method, seeds, start="start"):
    """[(the run's measurement, its start's)] of the seeds that have both. Both must be of the same
    training problems: a run paired with a start of another set (a screened set lent by --against
    from another screen) is refused, not compared."""
    pairs = []
    for seed in seeds:
        run, begin = found.get((task, method, seed)), found.get((task, start, seed))
        if not (run and begin):
            continue
        if run["problems"] != begin["problems"]:
            raise ConfigError(
                f"{task} {method} seed {seed}: its run and its starting point ({start}) were "
                "measured on different training problems (another training set or screen)"
            )
        pairs.append((run, begin))
    return pairs


def interval_cell(a, b):
    """Paired (seeds, problems) arrays -> "mean a, b: a - b [95%]"."""
    diff = paired_bootstrap_interval(np.array(a), np.array(b))
    return f"{np.mean(a):.3f} vs {np.mean(b):.3f}: {report.fmt_interval(diff)}"


def marked(label, task, method, borrowed, against):
    """A row's label, with the folder it was taken from when --against lent it."""
    return f"{label} ({against}'s)" if (task, method) in borrowed else label


def sampling_table(found, task, seeds, borrowed=(), against=None):
    """Table a: at the end of training, RL's history against the starting point's fresh samples at
    the same answers per problem (paired over seeds and training problems)."""
    lines = [
        f"#### {task}: RL as a sampling process, at the end of training (against the starting "
        "point's fresh samples at the same count)",
        "",
        "| method | answers a problem | solved at least once: RL vs start, RL - start [95%] | "
        "distinct outcomes a problem: RL vs start | distinct on problems still unsolved: "
        "RL vs start |",
        "|---|---|---|---|---|",
    ]
    for label, method, start_name in ROWS:
        rows = measured_pairs(found, task, method, seeds, start=start_name)
        if not rows:
            continue
        label = marked(label, task, method, borrowed, against)
        solved_rl, solved_start, distinct_rl, distinct_start = [], [], [], []
        unsolved_rl, unsolved_start = [], []
        counts = set()
        for run, start in rows:
            samples = int(round(np.mean(run["samples"])))
            k, solved, distinct = start_at(start, samples)
            counts.add(k)
            solved_rl.append(np.array(run["solved"], float))
            solved_start.append(solved)
            distinct_rl.append(np.array(run["distinct"], float))
            distinct_start.append(distinct)
            unsolved_rl.append(
                np.mean([d for d, s in zip(run["distinct"], run["solved"]) if not s])
            )
            unsolved_start.append(np.mean(distinct[solved == 0]) if (solved == 0).any() else 0)
        unsolved = (
            f"{nan_mean(unsolved_rl):.2f} vs {nan_mean(unsolved_start):.2f}"
            f" ({' '.join(f'{a:.2f}/{b:.2f}' for a, b in zip(unsolved_rl, unsolved_start))})"
        )
        lines.append(
            f"| {label} | {'/'.join(map(str, sorted(counts)))} | "
            f"{interval_cell(solved_rl, solved_start)} | "
            f"{interval_cell(distinct_rl, distinct_start)} | {unsolved} |"
        )
    return lines + [""]


def pooled_interval(per_seed, num_resamples=10_000, level=0.95, seed=0):
    """Paired differences, one array per seed, of different lengths -> (their pooled mean, low,
    high): a percentile bootstrap that draws seeds, and inside each drawn seed its problems, with
    replacement, every problem weighing the same (report.paired_bootstrap_interval when the seeds
    have equally many). None when there is no difference at all."""
    per_seed = [np.asarray(d, dtype=float) for d in per_seed if len(d)]
    if not per_seed:
        return None
    rng = np.random.default_rng(seed)
    S = len(per_seed)
    drawn_seeds = rng.integers(0, S, size=(num_resamples, S))
    sums = np.zeros(num_resamples)
    counts = np.zeros(num_resamples)
    for position in range(S):  # each position of the drawn seeds draws its own problems
        for s, diff in enumerate(per_seed):
            here = drawn_seeds[:, position] == s
            picks = rng.integers(0, len(diff), size=(int(here.sum()), len(diff)))
            sums[here] += diff[picks].sum(axis=1)
            counts[here] += len(diff)
    means = sums / counts
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    pooled = np.concatenate(per_seed)
    return float(pooled.mean()), float(low), float(high)


def distinct_change(run, start):
    """Per training problem: distinct outcomes among the final policy's answers minus the
    start's."""
    end = np.array(run["transfer"]["distinct"], float)
    return end - np.array(start["transfer"]["distinct"], float)


def unsolved_change(rows):
    """[(run, start) records of one method, a pair per seed] -> the end - start change of distinct
    outcomes on every problem the run never solved, with its 95% interval ("-" without any). It is
    paired over seeds and those problems: the same problems at the start and at the end."""
    interval = unsolved_interval(rows)
    return report.fmt_interval(interval) if interval else "-"


def unsolved_interval(rows):
    """unsolved_change's (mean, low, high), or None."""
    diffs = []
    for run, start in rows:
        diffs.append(distinct_change(run, start)[~np.array(run["solved"], bool)])
    return pooled_interval(diffs)


def against_grpo_unsolved(rows, grpo_rows):
    """A method's and GRPO's (run, start) pairs, a pair per seed of each -> the method's end - start
    change minus GRPO's, on every problem neither run solved, with its 95% interval ("-" without
    any): paired over seeds and problems."""
    interval = against_grpo_interval(rows, grpo_rows)
    return report.fmt_interval(interval) if interval else "-"


def against_grpo_interval(rows, grpo_rows):
    """against_grpo_unsolved's (mean, low, high), or None."""
    by_problems = {tuple(run["problems"]): (run, start) for run, start in grpo_rows}
    diffs = []
    for run, start in rows:
        grpo_run, grpo_start = by_problems.get(tuple(run["problems"]), (None, None))
        if grpo_run is None:
            continue
        neither = ~np.array(run["solved"], bool) & ~np.array(grpo_run["solved"], bool)
        change = distinct_change(run, start) - distinct_change(grpo_run, grpo_start)
        diffs.append(change[neither])
    return pooled_interval(diffs)


def transfer_table(found, task, seeds, borrowed=(), against=None):
    """Table b: distinct outcomes among 8 answers per training problem, on the problems each run
    solved during training and on those it never solved, from the start and at the end, the change
    against GRPO's on the problems neither solved; token entropy of correct and incorrect answers at
    the end."""
    lines = [
        f"#### {task}: the transfer, distinct outcomes among {TRANSFER_ANSWERS} answers a training "
        "problem (start -> end of training), and token entropy at the end",
        "",
        "| method | solved problems (share) | distinct on solved: start -> end | distinct on "
        "unsolved: start -> end | end - start on unsolved [95%] | its change - GRPO's, on the "
        "problems neither solved [95%] | entropy, correct / incorrect answers |",
        "|---|---|---|---|---|---|---|",
    ]
    grpo_rows = measured_pairs(found, task, "grpo", seeds)
    for label, method, start_name in ROWS:
        rows = measured_pairs(found, task, method, seeds, start=start_name)
        if not rows:
            continue
        label = marked(label, task, method, borrowed, against)
        cells = {"solved": [[], []], "unsolved": [[], []]}
        share, entropy = [], []
        for run, start in rows:
            solved = np.array(run["solved"], bool)
            share.append(solved.mean())
            begin = np.array(start["transfer"]["distinct"], float)
            end = np.array(run["transfer"]["distinct"], float)
            for name, where in (("solved", solved), ("unsolved", ~solved)):
                cells[name][0].append(begin[where].mean() if where.any() else math.nan)
                cells[name][1].append(end[where].mean() if where.any() else math.nan)
            entropy.append(run["transfer"]["entropy"])
        unsolved_diff = unsolved_change(rows)
        against_grpo = "" if method == "grpo" else against_grpo_unsolved(rows, grpo_rows)
        correct = nan_mean([e["correct"] for e in entropy])
        incorrect = nan_mean([e["incorrect"] for e in entropy])

        def change(pair):
            return f"{nan_mean(pair[0]):.2f} -> {nan_mean(pair[1]):.2f}"

        lines.append(
            f"| {label} | {np.mean(share):.2f} | {change(cells['solved'])} | "
            f"{change(cells['unsolved'])} | {unsolved_diff} | {against_grpo} | "
            f"{correct:.3f} / {incorrect:.3f} |"
        )
    for name in STARTS:
        starts = [
            found[task, name, s]["transfer"]["entropy"] for s in seeds if (task, name, s) in found
        ]
        if starts:
            lines.append(
                f"| {name} | | | | | | {nan_mean([e['correct'] for e in starts]):.3f} / "
                f"{nan_mean([e['incorrect'] for e in starts]):.3f} |"
            )
    return lines + [""]


def compute_matched_table(found, task, seeds):
    """VPO against GRPO with VPO's compute (grpo_x3: as many answers per training problem), paired
    over seeds and training problems: problems solved and distinct outcomes in training, and the
    transfer (VPO's change minus grpo_x3's on the problems neither solved, VPO's counted from each
    of its starting points)."""
    x3 = measured_pairs(found, task, "grpo_x3", seeds)
    vpo = measured_pairs(found, task, "vpo", seeds)
    if not x3 or len(vpo) != len(x3):
        return []
    cells = versus_cells(vpo, x3)
    cells.append(against_grpo_unsolved(measured_pairs(found, task, "vpo", seeds, "start_sets"), x3))
    return [
        f"#### {task}: VPO - grpo_x3, the same answers per training problem [95%]",
        "",
        "| solved at least once | distinct outcomes a problem | change on the problems neither "
        "solved | the same, VPO from the start asked for sets |",
        "|---|---|---|---|",
        f"| {' | '.join(cells)} |",
        "",
    ]


def versus_cells(rows, base_rows):
    """Two methods' (run, start) pairs, a pair per seed of each -> the first minus the second, each
    with its 95% interval paired over seeds and training problems: problems solved at least once,
    distinct outcomes a problem, and the change of distinct outcomes on the problems neither
    solved."""
    cells = []
    for name in ("solved", "distinct"):
        a = np.array([run[name] for run, _ in rows], float)
        b = np.array([run[name] for run, _ in base_rows], float)
        cells.append(report.fmt_interval(paired_bootstrap_interval(a, b)))
    return cells + [against_grpo_unsolved(rows, base_rows)]


def open_choices_table(found, task, seeds, results=None):
    """Each of the paper's open choices (OPEN_CHOICES) minus UCB-Con as the paper writes it, paired
    over seeds and problems: in training (versus_cells) and held out (best@30, pass@30)."""
    base = measured_pairs(found, task, "ucb_con", seeds)
    rows = []
    for choice in OPEN_CHOICES:
        pairs = measured_pairs(found, task, choice, seeds)
        if not base or len(pairs) != len(base):
            continue
        cells = versus_cells(pairs, base)
        for key in ("best", "pass"):
            interval = report.paired(results, task, choice, "ucb_con", key) if results else None
            cells.append(report.fmt_interval(interval) if interval else "-")
        rows.append(f"| {choice} | {' | '.join(cells)} |")
    if not rows:
        return []
    return [
        f"#### {task}: the open choices - UCB-Con (the bonus after the z-score, N of earlier steps)"
        " [95%]",
        "",
        "| choice | solved at least once | distinct outcomes a problem | change on the problems "
        "neither solved | held out best@30 | held out pass@30 |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


HELDOUT = [("best", "best@30"), ("pass", "pass@30"), ("w_best", "w-best@30")]
HELDOUT += [("diversity", "diversity")]


def heldout_table(results, task, borrowed=(), against=None):
    """Table c: per method, pass@1, best@1 and each measure of HELDOUT at k = 30, with its 95%
    paired interval against GRPO and against VPO (over held-out problems and seeds)."""
    per_method = results["tasks"].get(task, {})
    head = " | ".join(f"{name}: mean, - GRPO, - VPO" for _, name in HELDOUT)
    lines = [
        f"#### {task}: held out (40 problems a seed, pools of 30), against GRPO and VPO [95%]",
        "",
        f"| method | best@1 | pass@1 | {head} |",
        "|---|---|---|" + "---|" * len(HELDOUT),
    ]
    for method in ["warm_start", "warm_start_m3", *SHOWN]:
        entry = per_method.get(method)
        if not entry or "per_problem" not in entry:
            continue
        cells = []
        for key, _ in HELDOUT:
            values = [np.mean(entry["per_problem"][s][key]) for s in entry["per_problem"]]
            intervals = [
                report.paired(results, task, method, other, key) if other != method else None
                for other in ("grpo", "vpo")
            ]
            shown = [report.fmt_interval(iv) if iv else "" for iv in intervals]
            cells.append(f"{np.mean(values):.3f}, {shown[0]}, {shown[1]}")
        first = f"{entry['best_at_k'][0]:.3f} | {entry['pass_at_k'][0]:.3f}"
        label = marked(method, task, method, borrowed, against)
        lines.append(f"| {label} | {first} | {' | '.join(cells)} |")
    return lines + [""]


LABELS = {
    "start": "starting point, fresh samples",
    "start_sets": "starting point asked for sets, fresh",
}
COLORS = {
    "start": "black",
    "start_sets": "gray",
    "grpo": "tab:red",
    "ucb": "tab:olive",
    "ucb_mean": "tab:orange",
    "ucb_con": "tab:brown",
    "batch_explore": "tab:purple",
    "vpo": "tab:blue",
    "grpo_x3": "tab:pink",
    "ucb_con_before": "tab:green",
    "ucb_con_current": "tab:cyan",
}


def draw(found, tasks, seeds, path, borrowed=()):
    """exploration.png: per task, solved share and distinct outcomes per training problem against
    answers drawn per problem (the seeds' mean); solid all problems, dashed those still unsolved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 4 * len(tasks)), squeeze=False)
    for row, task in zip(axes, tasks):
        for method in [*STARTS, *SHOWN]:
            runs = [found[task, method, s] for s in seeds if (task, method, s) in found]
            if not runs:
                continue
            if method in STARTS:
                x = runs[0]["curve"]["samples"]
                solved = np.mean([r["curve"]["solved_share"] for r in runs], 0)
                distinct = np.mean([r["curve"]["distinct"] for r in runs], 0)
                unsolved = np.nanmean([r["curve"]["distinct_unsolved"] for r in runs], 0)
            else:
                size = min(len(r["curve"]["explore_samples"]) for r in runs)
                x = np.mean([r["curve"]["explore_samples"][:size] for r in runs], 0)
                solved = np.mean([r["curve"]["explore_solved_share"][:size] for r in runs], 0)
                distinct = np.mean([r["curve"]["explore_distinct"][:size] for r in runs], 0)
                unsolved = np.nanmean(
                    [r["curve"]["explore_distinct_unsolved"][:size] for r in runs], 0
                )
            label = LABELS.get(method, method) + (" (lent)" if (task, method) in borrowed else "")
            color = COLORS[method]
            width = 2 if method in STARTS else 1.3
            row[0].plot(x, solved, color=color, label=label, lw=width)
            row[1].plot(x, distinct, color=color, lw=width)
            row[1].plot(x, unsolved, color=color, ls="--", lw=1)
        row[0].set(
            title=f"{task}: training problems solved at least once",
            xlabel="answers drawn per training problem",
            ylabel="share solved",
            xscale="log",
        )
        row[1].set(
            title=f"{task}: distinct outcomes (dashed: unsolved so far)",
            xlabel="answers drawn per training problem",
            ylabel="distinct outcomes",
            xscale="log",
        )
        row[0].legend(fontsize=8)
    fig.tight_layout()
    fig.set_layout_engine(None)  # laid out: savefig need not draw it twice
    runfiles.save_figure(fig, path, dpi=110)
    plt.close(fig)


def write_report(out_dir, tasks, seeds, against=None):
    """exploration.md (tables a, b and the held-out boards of experiment.py's result files) and
    exploration.png; with `against`, its files fill in the methods out_dir has not measured."""
    found, borrowed = load(out_dir, tasks, seeds, against)
    lines = [f"# Outcome-based exploration beside VPO ({out_dir}, seeds {seeds})", ""]
    if against:
        lent = sorted({m for _, m in borrowed})
        lines += [f"Rows marked ({against}'s) are that folder's runs: {', '.join(lent)}.", ""]
    records = report.load_records([out_dir])
    own = {(r["task"], r["method"]) for r in records}
    lent = [r for r in report.load_records([against] if against else []) if r["task"] in tasks]
    lent = [r for r in lent if (r["task"], r["method"]) not in own]
    records = [r for r in records + lent if r["task"] in tasks]
    results = report.merge(records, experiment.TASKS) if records else None
    for task in tasks:
        lines += sampling_table(found, task, seeds, borrowed, against)
        lines += transfer_table(found, task, seeds, borrowed, against)
        lines += compute_matched_table(found, task, seeds)
        lines += open_choices_table(found, task, seeds, results)
    if records:
        lent_methods = {(r["task"], r["method"]) for r in lent}
        for task in tasks:
            lines += heldout_table(results, task, lent_methods, against)
        lines += ["### Held out: each board ranked, against VPO and GRPO"]
        lines += tables.leaderboard_table(results)
    text = "\n".join(lines)
    runfiles.write_file(os.path.join(out_dir, "exploration.md"), text + "\n")
    draw(found, tasks, seeds, os.path.join(out_dir, "exploration.png"), borrowed)
    print(text)
    print(f"wrote {out_dir}/exploration.md, {out_dir}/exploration.png")


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke-test sizes (numbers meaningless)")
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--tasks", nargs="*", default=TASKS, choices=TASKS)
    p.add_argument(
        "--methods",
        nargs="*",
        default=METHODS,
        choices=SHOWN,
        help="train and measure these only (the report shows every method measured in --out)",
    )
    p.add_argument("--workers", type=int, help="worker processes (default: as lab/experiment.py)")
    p.add_argument("--out", help="the experiment's folder (default out/exploration)")
    p.add_argument("--report", metavar="DIR", help="only rewrite the report from DIR's files")
    p.add_argument(
        "--against",
        metavar="DIR",
        help="reuse DIR's finished files for every method not trained here and the starting point",
    )
    p.add_argument(
        "--measure-only",
        action="store_true",
        help="measure the finished runs in --out and write the report; train nothing",
    )
    p.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="train.py settings for every run"
    )
    experiment.add_ray_arguments(p)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        if args.report:
            return write_report(args.report, args.tasks, args.seeds, args.against)
        out_dir = args.out or ("out/exploration_quick" if args.quick else "out/exploration")
        sizes = {task: overrides(task, args.quick) for task in args.tasks}
        extra = experiment.checked_overrides(args.set, args.tasks, args.methods, per_task=sizes)
        workers = args.workers
        if workers is None:  # on Ray: as many jobs at once as the cluster has CPUs
            workers = None if args.ray is not None else 2
        cluster = None
        if args.ray is not None:  # one cluster for the training and the measurements
            os.makedirs(out_dir, exist_ok=True)
            cluster = ray_jobs.connect(args.ray, out_dir, workers, args.gpu_share)
        try:
            for task in [] if args.measure_only else args.tasks:  # each task its own sizes
                experiment.run_headline(
                    {**overrides(task, args.quick), **extra, "out_dir": out_dir},
                    quick=args.quick,
                    tasks=[task],
                    algos=args.methods,
                    seeds=args.seeds,
                    workers=workers,
                    ray=args.ray,
                    gpu_share=args.gpu_share,
                )
            run_measurements(
                out_dir,
                args.tasks,
                args.seeds,
                args.quick,
                workers,
                extra,
                methods=args.methods,
                against=args.against,
                cluster=cluster,
            )
        finally:
            if cluster:
                cluster.close()
        write_report(out_dir, args.tasks, args.seeds, args.against)
    except KeyboardInterrupt:
        sys.exit(130)
    except (ConfigError, FileNotFoundError, WriteError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
