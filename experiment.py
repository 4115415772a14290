"""
The headline experiment: does training for diversity make test-time search pay off more as the
budget grows? `python train.py` without --config hands over to this file.

    python experiment.py                        # the default comparison, sized for a laptop CPU
    python experiment.py --quick                # a smoke-test size: a minute, numbers meaningless
    python experiment.py --seeds 0 1 2          # mean and spread over seeds
    python experiment.py --ablations            # also the ablations and baselines (ABLATIONS below)
    python experiment.py --tasks code --algos grpo vpo grpo_x3
    python experiment.py --set out_dir=out/h1 kl_coef=0   # any train.py key, applied to every run
    python experiment.py --report out/headline  # reprint (and rewrite) a finished run's summary.md

For each task (persona, code, and the collinear control) and seed: one warm start, then every
algorithm from it, with the settings of configs/<task>.yaml (the one place they live); then every
checkpoint (warm start included) samples a pool of n answers per held-out problem; then, on code
problems that no checkpoint's pool solved (screening up to evo_screen more held-out problems when
the evaluation set has too few), an evolutionary search per checkpoint at equal budgets.
Jobs run in `workers` processes with one torch thread each (on a 2-core VM two 1-thread processes
beat one 2-thread process); a job starts as soon as what it needs is done, longest jobs first.

Writes into out_dir: results.json (every number, with seeds, commit and timings), summary.md (also
printed), best_at_k.png, pass_at_k.png, reward_vectors.png, training.png, evolution.png, and runs/
with each training run's own folder. A finished identical run is reused, so adding seeds only
trains the new ones.

Deliberately left out: hyperparameter sweeps, confidence intervals beyond mean and spread over
seeds, anything that needs a GPU.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context

import numpy as np
import torch
import yaml

import plots
import search
import train
from checkpoint import model_from_checkpoint
from config import ConfigError, parse_value
from model import Tokenizer
from rewards import make_task

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = ["persona", "code", "persona_collinear"]  # each trains with configs/<task>.yaml
# The control's prompts and demonstrations are the persona task's (only the reward differs), so it
# starts from the persona warm start instead of training its own.
SHARED_WARMSTART = {"persona_collinear": "persona"}
ALGOS = ["grpo", "vpo"]
# Methods that are an algorithm of train.ADVANTAGES run with other settings, each at the value its
# paper gives (DAPO: clip-higher 0.28, dynamic sampling until P groups spread; the entropy bonus has
# no paper default: 0.01, a common value, not tuned).
VARIANTS = {
    "grpo_x3": ("grpo", {}),  # GRPO given m times the prompts per step: as many answers per step as VPO
    "dr_grpo": ("grpo", {"std_norm": False, "loss_norm": "constant"}),  # both halves of Dr. GRPO
    # clipping acts only from a batch's second update on (the ratio is 1 at the first), so clip-higher
    # is compared with GRPO at the same two updates per batch, not with one-update GRPO
    "grpo_2ep": ("grpo", {"epochs_per_batch": 2}),
    "grpo_clip_higher": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2}),
    "grpo_entropy": ("grpo", {"entropy_coef": 0.01}),
    # DAPO draws until P groups spread; verl's recipe gives up after 10 generation batches (of 3x the
    # prompts), here after 10 rounds of P, to bound the CPU cost (metrics.jsonl: flat_groups_kept)
    "dapo": ("grpo", {"clip_high": 0.28, "epochs_per_batch": 2, "dynamic_sampling": 10}),
}
ABLATIONS = ["multi_rlvr", "random_weights", "goal_conditioned", "vpo_loo", "max_at_k", "gdpo", "maxrl", *VARIANTS]
HEADLINE = dict(seeds=[0], eval_n=30, eval_problems=40, evo_problems=16, evo_screen=200, evo_budget=60, evo_seeds=1,
                workers=2)
QUICK = dict(seeds=[0], eval_n=6, eval_problems=6, evo_problems=2, evo_screen=6, evo_budget=12, evo_seeds=1,
             workers=2)
QUICK_TRAIN = dict(model="nano", sft_steps=60, sft_batch=16, sft_lr=1e-2, steps=6, prompts_per_step=2,
                   group_size=4, max_k=2, num_weights=16, eval_every=3, eval_problems=4, ckpt_every=3)  # max_k < G


def run_config(task_name, name, seed, overrides, out_dir, quick):
    """The train.py config of one run of method `name` (an algorithm or one of VARIANTS)."""
    path = os.path.join(HERE, "configs", f"{task_name}.yaml")
    algo, settings = VARIANTS.get(name, (name, {}))
    spec = {**(QUICK_TRAIN if quick else {}), **overrides, **settings, "algo": algo,
            "seed": seed, "quiet": True, "threads": 1, "out_dir": os.path.join(out_dir, "runs", f"{task_name}-{name}-s{seed}"),
            "warmstart_dir": os.path.join(out_dir, "warmstart")}
    cfg = train.resolve_config(path, [f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in spec.items()])
    if name == "grpo_x3":
        cfg["prompts_per_step"] *= cfg["answers_per_rollout"]
    return cfg


# ----------------------------------------------------------------------------------------------
# The jobs, each run in a worker process

def _warm_start_job(cfg):
    torch.set_num_threads(1)
    t0 = time.time()
    _, path = train.warm_start(cfg, make_task(cfg["task"], **cfg["task_options"]), Tokenizer(cfg["tokenizer"]),
                               "cpu", lambda msg: None)
    return path, time.time() - t0


def _train_job(cfg):
    torch.set_num_threads(1)
    t0 = time.time()
    out = train.train(cfg)
    return out, time.time() - t0


def _eval_job(path, cfg, num_problems, n, seed, m):
    """Pools of n answers on the held-out problems of `seed` -> (metrics, rewards, answers, problems)."""
    torch.set_num_threads(1)
    task = make_task(cfg["task"], **cfg["task_options"])
    problems = task.problems("heldout", num_problems, random.Random(seed))
    result, rewards, answers = search.evaluate_checkpoint(path, problems, n, seed=seed, m=m, task=task)
    return result, rewards, [a[:n] for a in answers], problems


def _solved_job(path, cfg, problems, n, seed, m):
    """Which problems a checkpoint's pool of n answers solves (some answer passes every test)."""
    torch.set_num_threads(1)
    _, rewards, _ = search.evaluate_checkpoint(path, problems, n, seed=seed, m=m,
                                               task=make_task(cfg["task"], **cfg["task_options"]))
    return (rewards >= 1.0).all(-1).any(-1)  # (problems,)


def _evolve_job(path, cfg, problems, budget, seeds, m):
    torch.set_num_threads(1)
    model, tok, _, _ = model_from_checkpoint(path)
    task = make_task(cfg["task"], **cfg["task_options"])
    results = []
    for problem in problems:
        for s in seeds:
            r = search.evolve(model, tok, task, problem, m, cfg, budget=budget, seed=s)
            results.append({"problem": repr(problem), "seed": s, "solved_at": r["solved_at"],
                            "best_score": r["best_score"], "best": r["best"], "mutations": r["mutations"]})
    return results


def finished(cfg):
    """True if cfg's out_dir holds a finished run of exactly this config."""
    ignore = ("resume", "overwrite", "quiet", "threads", "device", "out_dir", "warmstart_dir")  # not results
    try:
        with open(os.path.join(cfg["out_dir"], "config.yaml")) as f:
            saved = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return False
    if not isinstance(saved, dict):
        return False
    # a cached warm start's file name is the hash of everything that shaped it, so a run copied into
    # another output folder (with its warm start) still counts as the same run
    same = all(saved.get(k) == v for k, v in cfg.items() if k not in ignore + ("warmstart_from",)) and \
        os.path.basename(str(saved.get("warmstart_from"))) == os.path.basename(str(cfg["warmstart_from"]))
    return same and os.path.exists(os.path.join(cfg["out_dir"], "final.pt"))


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=HERE).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


# ----------------------------------------------------------------------------------------------
# The experiment

def run_headline(overrides=None, quick=False, ablations=False, tasks=None, algos=None, seeds=None):
    overrides = dict(overrides or {})
    settings = dict(QUICK if quick else HEADLINE)
    if seeds:
        settings["seeds"] = list(seeds)
    elif "seed" in overrides:
        settings["seeds"] = [overrides.pop("seed")]
    out_dir = overrides.pop("out_dir", "") or ("out/quick" if quick else "out/headline")
    if os.path.exists(os.path.join(out_dir, "results.json")) and not overrides.get("overwrite"):
        raise ConfigError(f"{out_dir} already holds a finished experiment; choose another out_dir "
                          f"or --set overwrite=true")
    tasks = tasks or list(TASKS)
    algos = list(algos or ALGOS) + (ABLATIONS if ablations else [])
    os.makedirs(out_dir, exist_ok=True)
    t_start, timings, commit = time.time(), {}, git_commit()  # the code that runs, not what is checked out at the end
    configs = {(t, a, s): run_config(t, a, s, overrides, out_dir, quick)
               for t in tasks for a in algos for s in settings["seeds"]}
    first = {(t, s): configs[(t, algos[0], s)] for t in tasks for s in settings["seeds"]}  # a task's settings

    def say(msg):
        print(f"[{time.time() - t_start:6.0f}s] {msg}", flush=True)

    # A job waits in `ready` until a worker is free; the longest kinds go first, so the critical path
    # (the code task's set-method runs) starts as early as it can.
    ready, running = [], {}
    order = {"warm": 0, "train": 1, "eval": 2, "solved": 3, "evolve": 4}

    def add(kind, key, fn, *args):
        long_first = (order[kind], -(kind == "train" and configs[key]["algo"] in train.SET_ALGOS),
                      -(key[0] == "code"))
        ready.append((long_first, kind, key, fn, args))

    warm, runs, evals, checkpoints, evo, screens = {}, {}, {}, {}, {}, {}
    for t in tasks:  # a task whose warm start another task trains waits for it (SHARED_WARMSTART)
        if SHARED_WARMSTART.get(t) not in tasks:
            for s in settings["seeds"]:
                add("warm", (t, s), _warm_start_job, first[(t, s)])

    def warm_ready(t, s, path):
        for u in [t] + [u for u in tasks if SHARED_WARMSTART.get(u) == t]:
            warm[(u, s)] = path
            checkpoints[(u, "warm_start", s)] = (path, 1)
            add("eval", (u, "warm_start", s), _eval_job, path, first[(u, s)], settings["eval_problems"],
                settings["eval_n"], s, 1)
            for a in algos:
                cfg = configs[(u, a, s)]
                cfg["warmstart_from"] = path if u != t else cfg["warmstart_from"]
                if finished(cfg):  # runs are deterministic: an identical finished run is reused
                    say(f"reusing finished run {cfg['out_dir']}")
                    run_ready((u, a, s), cfg["out_dir"])
                else:
                    add("train", (u, a, s), _train_job, cfg)

    def run_ready(key, run_dir):
        runs[key] = run_dir
        checkpoints[key] = (os.path.join(run_dir, "final.pt"), train.answers_per_rollout(configs[key]))
        add("eval", key, _eval_job, checkpoints[key][0], first[(key[0], key[2])], settings["eval_problems"],
            settings["eval_n"], key[2], checkpoints[key][1])

    def code_seed_evaluated(s):
        """Every code checkpoint of seed s has its pool: find the problems none solves."""
        keys = [("code", a, s) for a in ["warm_start"] + algos]
        problems = evals[keys[0]][3]
        solved = np.any([(evals[k][1] >= 1.0).all(-1).any(-1) for k in keys], axis=0)
        hard = [p for p, ok in zip(problems, solved) if not ok][:settings["evo_problems"]]
        screens[s] = {"hard": hard, "left": 0}
        if len(hard) < settings["evo_problems"] and settings["evo_screen"]:
            # too few: screen more held-out problems with the same pools, keep those no checkpoint solves
            extra = [p for p in make_task("code", **first[("code", s)]["task_options"]).problems(
                "heldout", settings["evo_screen"], random.Random(20_000 + s)) if p not in problems]
            screens[s].update(extra=extra, solved=np.zeros(len(extra), dtype=bool), left=len(keys))
            settings["evo_screened_problems"] = len(extra)
            for k in keys:
                add("solved", k, _solved_job, checkpoints[k][0], first[("code", s)], extra, settings["eval_n"],
                    s, checkpoints[k][1])
        else:
            start_evolution(s)

    def start_evolution(s):
        hard = screens[s]["hard"]
        say(f"evolutionary search on {len(hard)} hard code problems (seed {s})")
        for k in ([("code", a, s) for a in ["warm_start"] + algos] if hard else []):
            add("evolve", k, _evolve_job, checkpoints[k][0], first[("code", s)], hard, settings["evo_budget"],
                list(range(settings["evo_seeds"])), checkpoints[k][1])

    with ProcessPoolExecutor(max_workers=settings["workers"], mp_context=get_context("spawn")) as pool:
        while ready or running:
            ready.sort(key=lambda job: job[0])
            while ready and len(running) < settings["workers"]:
                _, kind, key, fn, args = ready.pop(0)
                running[pool.submit(fn, *args)] = (kind, key, time.time())
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                kind, key, t0 = running.pop(future)
                result = future.result()
                name = "/".join(map(str, key))
                if kind == "warm":
                    timings[f"warmstart/{name}"] = result[1]
                    say(f"warm start {name} ready ({result[1]:.0f}s)")
                    warm_ready(*key, result[0])
                elif kind == "train":
                    timings[f"train/{name}"] = result[1]
                    say(f"trained {name} ({result[1]:.0f}s)")
                    run_ready(key, result[0])
                elif kind == "eval":
                    timings[f"eval/{name}"] = time.time() - t0
                    evals[key] = result
                    if key[0] == "code" and all(("code", a, key[2]) in evals for a in ["warm_start"] + algos):
                        code_seed_evaluated(key[2])
                elif kind == "solved":
                    screen = screens[key[2]]
                    screen["solved"] |= result
                    screen["left"] -= 1
                    if not screen["left"]:
                        screen["hard"] += [p for p, ok in zip(screen["extra"], screen["solved"])
                                           if not ok][:settings["evo_problems"] - len(screen["hard"])]
                        start_evolution(key[2])
                else:
                    timings[f"evolve/{name}"] = time.time() - t0
                    evo[key] = result
    timings["total"] = time.time() - t_start
    results = summarize(out_dir, tasks, ["warm_start"] + algos, settings, evals, evo, runs, timings, quick, commit)
    say(f"done: {out_dir}")
    return results


# ----------------------------------------------------------------------------------------------
# Tables and figures

def summarize(out_dir, tasks, names, settings, evals, evo, runs, timings, quick, commit):
    """results.json, summary.md and the plots, from the finished jobs."""
    seeds = settings["seeds"]
    results = {"commit": commit, "seeds": seeds, "settings": settings, "quick": quick,
               "timings_s": {k: round(v, 1) for k, v in timings.items()}, "tasks": {}}
    for t in tasks:
        per_algo = {}
        for a in names:
            keys = [(t, a, s) for s in seeds if (t, a, s) in evals]
            if not keys:
                continue
            rows = [evals[k][0] for k in keys]
            entry = {"ks": rows[0]["ks"], "m": rows[0]["m"]}
            for metric in ("best_at_k", "heldout_weight_best_at_k", "pass_at_k"):
                values = np.array([r[metric] for r in rows])
                entry[metric] = values.mean(0).round(4).tolist()
                entry[metric + "_spread"] = (values.max(0) - values.min(0)).round(4).tolist()
                entry[metric + "_per_seed"] = values.round(4).tolist()
            for metric in ("diversity", "distinct_answers", "pareto_fraction", "entropy", "wasted", "nonzero_answers",
                           "tokens_generated", "mean_scalar"):
                values = np.array([r[metric] for r in rows], dtype=float)
                entry[metric] = round(float(values.mean()), 4)
                entry[metric + "_spread"] = round(float(values.max() - values.min()), 4)
            if any(k in evo for k in keys):
                all_runs = [r for k in keys for r in evo.get(k, [])]
                entry["evolution"] = {"searches": len(all_runs), "budget": settings["evo_budget"],
                                      "solved": sum(r["solved_at"] is not None for r in all_runs),
                                      "solved_per_seed": [sum(r["solved_at"] is not None for r in evo.get(k, []))
                                                          for k in keys],
                                      "solved_curve": search.solved_curve(all_runs, settings["evo_budget"]),
                                      "mutations": {c: sum(r["mutations"][c] for r in all_runs)
                                                    for c in ("children", "invalid", "improved")},
                                      "runs": all_runs}
            if a != "warm_start":
                entry["training_metrics"] = [os.path.join(runs[k], "metrics.jsonl") for k in keys]
            per_algo[a] = entry
        results["tasks"][t] = per_algo
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    samples = {k: (v[1], v[2]) for k, v in evals.items() if k[2] == seeds[0]}
    plots.make_all(out_dir, results, samples)
    md = summary_markdown(results)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(md)
    print(md)
    return results


def summary_markdown(results):
    lines = [f"Seeds {results['seeds']}, commit {results['commit']}, wall time "
             f"{results['timings_s']['total']:.0f} s. Held-out problems; k counts answers.", ""]
    for t, per_algo in results["tasks"].items():
        any_entry = next(iter(per_algo.values()))
        ks = any_entry["ks"]
        show = [i for i, k in enumerate(ks) if k in (1, ks[len(ks) // 2], ks[-1])]
        lines.append(f"### {t}")
        head = ["algorithm"] + [f"best@{ks[i]}" for i in show] + [f"w-best@{ks[i]}" for i in show]
        if t == "code":
            head += [f"pass@{ks[i]}" for i in show] + ["evo solved"]
        head += ["diversity", "distinct", "wasted"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        multi = len(results["seeds"]) > 1
        for a, e in per_algo.items():
            def fmt(metric, i):
                v = e[metric][i]
                return f"{v:.3f}" + (f" ±{e[metric + '_spread'][i] / 2:.3f}" if multi else "")
            row = [a] + [fmt("best_at_k", i) for i in show] + [fmt("heldout_weight_best_at_k", i) for i in show]
            if t == "code":
                row += [fmt("pass_at_k", i) for i in show]
                ev = e.get("evolution")
                per_seed = f" ({' '.join(map(str, ev['solved_per_seed']))})" if ev and multi else ""
                row.append(f"{ev['solved']}/{ev['searches']}{per_seed}" if ev else "-")
            row += [f"{e['diversity']:.3f}", f"{e['distinct_answers']:.1f}", f"{e.get('wasted', 0):.2f}"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines.append("best@k: fixed scalarisation (mean of components); w-best@k: averaged over 64 held-out "
                 "random weightings; ± is half the spread (max - min) over seeds; diversity: mean pairwise "
                 "L1 between the pool's reward vectors, every answer scored as written; distinct: distinct "
                 "answers in a pool; wasted: share of a pool's answers that repeat an earlier answer of their "
                 "own rollout or are invalid; evo solved: searches that found a program passing every test "
                 "within the budget, on problems no checkpoint's pool solved (per seed in brackets).")
    return "\n".join(lines + [""] + mutation_table(results) + training_table(results)) + "\n"


def mutation_table(results):
    """The policy as a mutation operator: what share of the children it wrote from parents were invalid
    and what share beat their best parent (summed over every search of a checkpoint)."""
    rows = [(a, e["evolution"]["mutations"]) for a, e in results["tasks"].get("code", {}).items()
            if "mutations" in e.get("evolution", {})]
    if not rows:
        return []
    lines = ["Evolutionary search, the policy as mutation operator (children written from parents):", "",
             "| algorithm | children | invalid | better than their best parent |", "|---|---|---|---|"]
    for a, mu in rows:
        n = max(1, mu["children"])
        lines.append(f"| {a} | {mu['children']} | {mu['invalid'] / n:.2f} | {mu['improved'] / n:.3f} |")
    return lines + [""]


def training_table(results):
    """Per-seed training dynamics from each run's metrics.jsonl (seeds separated by ' / ')."""
    lines = ["Training, per seed: held-out scalar = mean fixed reward of valid answers on the held-out "
             "problems of train.evaluate_heldout (warm start -> end); entropy, distinct first answers per "
             "group and set score averaged over the first and last 10 RL steps.", "",
             "| task | algo | held-out scalar | token entropy | distinct first answers | set score |",
             "|---|---|---|---|---|---|"]
    for t, per_algo in results["tasks"].items():
        for a, e in per_algo.items():
            logs = [p for p in e.get("training_metrics", []) if os.path.exists(p)]
            if not logs:
                continue
            cells = {k: ([], []) for k in ("heldout_scalar", "entropy", "distinct_first_answers", "set_score")}
            for path in logs:
                with open(path) as f:
                    rows = [json.loads(line) for line in f]
                evals = [r for r in rows if r["kind"] == "eval"]
                steps = [r for r in rows if r["kind"] == "train"]
                cells["heldout_scalar"][0].append(evals[0]["heldout_scalar"])
                cells["heldout_scalar"][1].append(evals[-1]["heldout_scalar"])
                for k in ("entropy", "distinct_first_answers", "set_score"):
                    cells[k][0].append(np.mean([r[k] for r in steps[:10]]))
                    cells[k][1].append(np.mean([r[k] for r in steps[-10:]]))
            row = [" / ".join(f"{v:.2f}" for v in before) + " -> " + " / ".join(f"{v:.2f}" for v in after)
                   for before, after in cells.values()]
            lines.append(f"| {t} | {a} | " + " | ".join(row) + " |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="train.py keys applied to every run (out_dir: the experiment's folder)")
    parser.add_argument("--quick", action="store_true", help="smoke-test size (numbers mean nothing)")
    parser.add_argument("--ablations", action="store_true", help=f"also run {', '.join(ABLATIONS)}")
    parser.add_argument("--tasks", nargs="*", help=f"only these tasks (of {', '.join(TASKS)})")
    parser.add_argument("--seeds", nargs="*", type=int, help="these seeds (mean and spread over them)")
    parser.add_argument("--algos", nargs="*", help="these algorithms (default: grpo vpo)")
    parser.add_argument("--report", metavar="DIR", help="reprint and rewrite DIR/summary.md of a finished run")
    parser.add_argument("--config", help=argparse.SUPPRESS)  # train.py's: one run, not the experiment
    args = parser.parse_args(argv)
    try:
        if args.config:
            raise ConfigError("--config trains one run: use python train.py --config ...")
        if args.report:
            try:
                with open(os.path.join(args.report, "results.json")) as f:
                    finished_results = json.load(f)
            except (OSError, json.JSONDecodeError) as err:
                raise ConfigError(f"no readable results.json in {args.report} ({err}); run the experiment first")
            text = summary_markdown(finished_results)
            with open(os.path.join(args.report, "summary.md"), "w") as f:
                f.write(text)
            print(text)
            return
        unknown = sorted(set(args.tasks or []) - set(TASKS))
        if unknown:
            raise ConfigError(f"unknown task(s) {unknown} for --tasks (choose from {TASKS})")
        unknown = sorted(set(args.algos or []) - set(train.ADVANTAGES) - set(VARIANTS))
        if unknown:
            raise ConfigError(f"unknown method(s) {unknown} for --algos (choose from "
                              f"{sorted(train.ADVANTAGES) + sorted(VARIANTS)})")
        overrides = {}
        for item in args.set:  # checked against train.py's DEFAULTS now, applied to every run
            train.resolve_config(overrides=[item])
            key, value = (part.strip() for part in item.split("=", 1))
            if key in ("task", "algo"):
                raise ConfigError(f"'{key}' is chosen by the experiment; use --tasks or --algos, "
                                  f"or python train.py --config for a single run")
            overrides[key] = parse_value(value)
        run_headline(overrides, quick=args.quick, ablations=args.ablations, tasks=args.tasks, algos=args.algos,
                     seeds=args.seeds)
    except (ConfigError, FileNotFoundError, RuntimeError, FloatingPointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
