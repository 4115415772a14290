"""
The headline experiment: does training for diversity make test-time search pay off more as the
budget grows? `python train.py` (no --config) runs this file's `run_headline`.

    python train.py                         # the default comparison, sized for a laptop CPU
    python train.py --quick                 # a smoke-test size: a minute, numbers meaningless
    python train.py --ablations             # also multi_rlvr, random_weights, goal_conditioned,
                                            # vpo_loo, and GRPO given m x the samples
    python train.py --set seed=1 out_dir=out/h1   # any train.py key applies to every run
    python train.py --seeds 0 1 2                 # mean and spread over seeds
    python experiment.py out/headline             # reprint (and rewrite) a finished run's summary.md

For each task (persona, code, and the collinear control) and seed: one warm start, then every
algorithm from it; then every checkpoint (warm start included) samples a pool of n answers per
held-out problem; then, on the code problems that no checkpoint's pool solved (screening up to
evo_screen more held-out problems when the evaluation set has too few), an evolutionary search
per checkpoint at equal budgets. Jobs run in `workers` processes with one torch thread each
(on a 2-core VM two 1-thread processes beat one 2-thread process).

Writes into out_dir: results.json (every number, with seed and commit), summary.md (also printed),
best_at_k.png, pass_at_k.png, reward_vectors.png, training.png, evolution.png, and runs/ with each
training run's own folder.

Deliberately left out: hyperparameter sweeps, confidence intervals beyond mean and spread over
seeds, anything that needs a GPU.
"""

import json
import os
import random
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np

# Per-task settings of the default experiment; train.py's DEFAULTS fill in the rest.
TASKS = {
    "persona": dict(task="persona", task_options={"answer_len": 12}, sft_steps=300, steps=250, lr=1e-3),
    "code": dict(task="code", task_options={"noise": 0.2}, sft_steps=900, sft_batch=32, sft_lr=1e-3,
                 sft_parent_fraction=0.15, steps=200, lr=3e-4, kl_coef=0.05),
    "persona_collinear": dict(task="persona_collinear", task_options={"answer_len": 12}, sft_steps=300,
                              steps=250, lr=1e-3),
}
# The control's prompts and demonstrations are the persona task's (only the reward differs), so it
# starts from the persona warm start instead of training its own.
SHARED_WARMSTART = {"persona_collinear": "persona"}
ALGOS = ["grpo", "vpo"]
ABLATIONS = ["multi_rlvr", "random_weights", "goal_conditioned", "vpo_loo", "grpo_x3"]
HEADLINE = dict(seeds=[0], eval_n=30, eval_problems=40, evo_problems=8, evo_screen=200, evo_budget=60, evo_seeds=2,
                workers=2)
QUICK = dict(seeds=[0], eval_n=6, eval_problems=6, evo_problems=2, evo_screen=6, evo_budget=12, evo_seeds=1,
             workers=2)
QUICK_TRAIN = dict(model="nano", sft_steps=60, sft_batch=16, sft_lr=1e-2, steps=6, prompts_per_step=2,
                   group_size=4, num_weights=16, eval_every=3, eval_problems=4, ckpt_every=3)


def run_config(task_name, algo, seed, overrides, out_dir, quick):
    """The train.py config of one run. 'grpo_x3' is GRPO given m times the samples per step."""
    from train import resolve_config
    spec = dict(TASKS[task_name])
    if quick:
        spec.update(QUICK_TRAIN)
    spec.update(overrides)
    name = f"{task_name}-{algo}-s{seed}"
    spec.update(algo="grpo" if algo == "grpo_x3" else algo, seed=seed, quiet=True, threads=1,
                out_dir=os.path.join(out_dir, "runs", name), warmstart_dir=os.path.join(out_dir, "warmstart"))
    if algo == "grpo_x3":
        spec["prompts_per_step"] = spec.get("prompts_per_step", 8) * spec.get("answers_per_rollout", 3)
    return resolve_config(overrides=[f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in spec.items()])


def _warm_start_job(cfg):
    import torch
    from model import Tokenizer
    from rewards import make_task
    from train import warm_start
    torch.set_num_threads(1)
    t0 = time.time()
    _, path = warm_start(cfg, make_task(cfg["task"], **cfg["task_options"]), Tokenizer(cfg["tokenizer"]),
                         "cpu", lambda msg: None)
    return path, time.time() - t0


def _train_job(cfg):
    import torch
    from train import train
    torch.set_num_threads(1)
    t0 = time.time()
    out = train(cfg)
    return out, time.time() - t0


def _eval_job(path, task_name, task_options, num_problems, n, seed, m):
    import torch
    from rewards import make_task
    from search import evaluate_checkpoint
    torch.set_num_threads(1)
    task = make_task(TASKS[task_name]["task"], **task_options)
    problems = task.problems("heldout", num_problems, random.Random(seed))
    result, rewards, answers = evaluate_checkpoint(path, problems, n, seed=seed, m=m, task=task)
    return result, rewards, [a[:n] for a in answers], problems


def _solved_job(path, task_options, problems, n, seed, m):
    """Which problems a checkpoint's pool of n answers solves (some answer passes every test)."""
    import torch
    from rewards import make_task
    from search import evaluate_checkpoint
    torch.set_num_threads(1)
    _, rewards, _ = evaluate_checkpoint(path, problems, n, seed=seed, m=m, task=make_task("code", **task_options))
    return (rewards >= 1.0).all(-1).any(-1)  # (problems,)


def _evolve_job(path, task_options, problems, budget, seeds, m):
    import torch
    from rewards import make_task
    from search import evolve
    from train import model_from_checkpoint
    torch.set_num_threads(1)
    model, tok, cfg = model_from_checkpoint(path)
    task = make_task("code", **task_options)
    results = []
    for problem in problems:
        for s in seeds:
            r = evolve(model, tok, task, problem, m, cfg, budget=budget, seed=s)
            results.append({"problem": repr(problem), "seed": s, "solved_at": r["solved_at"],
                            "best_score": r["best_score"], "best": r["best"]})
    return results


def finished(cfg):
    """True if cfg's out_dir holds a finished run of exactly this config."""
    import yaml
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
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def run_headline(overrides=None, quick=False, ablations=False, out_dir=None, tasks=None, algos=None):
    overrides = dict(overrides or {})
    settings = dict(QUICK if quick else HEADLINE)
    if "seed" in overrides:
        settings["seeds"] = [overrides.pop("seed")]
    if "seeds" in overrides:
        settings["seeds"] = list(overrides.pop("seeds"))
    requested = overrides.pop("out_dir", "")
    out_dir = out_dir or requested or ("out/quick" if quick else "out/headline")
    if os.path.exists(os.path.join(out_dir, "results.json")) and not overrides.get("overwrite"):
        from train import ConfigError
        raise ConfigError(f"{out_dir} already holds a finished experiment; choose another out_dir "
                          f"or --set overwrite=true")
    tasks = tasks or list(TASKS)
    algos = list(algos or ALGOS) + (ABLATIONS if ablations else [])
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.time()
    timings = {}
    commit = git_commit()  # the code that runs, not whatever is checked out when it ends
    configs = {(t, a, s): run_config(t, a, s, overrides, out_dir, quick)
               for t in tasks for a in algos for s in settings["seeds"]}
    for cfg in configs.values():  # results.json is replaced; a finished identical run is still reused
        cfg["overwrite"] = True if overrides.get("overwrite") else cfg["overwrite"]

    def say(msg):
        print(f"[{time.time() - t_start:6.0f}s] {msg}", flush=True)

    with ProcessPoolExecutor(max_workers=settings["workers"], mp_context=get_context("spawn")) as pool:
        # 1. one warm start per task and seed, shared by every algorithm
        warm = {}
        own = [t for t in tasks if SHARED_WARMSTART.get(t) not in tasks]
        jobs = {(t, s): pool.submit(_warm_start_job, configs[(t, algos[0], s)])
                for t in own for s in settings["seeds"]}
        for key, job in jobs.items():
            warm[key], timings[f"warmstart/{key[0]}/s{key[1]}"] = job.result()
            say(f"warm start {key[0]} seed {key[1]} ready ({timings[f'warmstart/{key[0]}/s{key[1]}']:.0f}s)")
        for t in set(tasks) - set(own):
            for s in settings["seeds"]:
                warm[(t, s)] = warm[(SHARED_WARMSTART[t], s)]
                for a in algos:
                    configs[(t, a, s)]["warmstart_from"] = warm[(t, s)]
        # 2. RL runs (a run this experiment already finished with the same config is reused: runs
        # are deterministic, so rerunning with more seeds only trains the new ones)
        runs = {key: cfg["out_dir"] for key, cfg in configs.items() if finished(cfg)}
        for key in runs:
            say(f"reusing finished run {runs[key]}")
        jobs = {key: pool.submit(_train_job, cfg) for key, cfg in configs.items() if key not in runs}
        for key, job in jobs.items():
            runs[key], timings[f"train/{key[0]}/{key[1]}/s{key[2]}"] = job.result()
            say(f"trained {key[0]} {key[1]} seed {key[2]} ({timings[f'train/{key[0]}/{key[1]}/s{key[2]}']:.0f}s)")
        # 3. pools of n answers on held-out problems, for every checkpoint including the warm start
        from train import answers_per_rollout
        checkpoints = {}
        for (t, s), path in warm.items():
            checkpoints[(t, "warm_start", s)] = (path, 1)
        for (t, a, s), run_dir in runs.items():
            checkpoints[(t, a, s)] = (os.path.join(run_dir, "final.pt"), answers_per_rollout(configs[(t, a, s)]))
        jobs = {key: pool.submit(_eval_job, path, key[0], configs[(key[0], algos[0], key[2])]["task_options"],
                                 settings["eval_problems"], settings["eval_n"], key[2], m)
                for key, (path, m) in checkpoints.items()}
        evals = {}
        for key, job in jobs.items():
            evals[key] = job.result()
        say("evaluated every checkpoint on held-out problems")
        # 4. evolutionary search on the code problems no checkpoint's pool solved
        evo = {}
        if "code" in tasks:
            for s in settings["seeds"]:
                keys = [k for k in evals if k[0] == "code" and k[2] == s]
                problems = evals[keys[0]][3]
                solved_any = np.zeros(len(problems), dtype=bool)
                for k in keys:
                    solved_any |= (evals[k][1] >= 1.0).all(-1).any(-1)
                hard = [p for p, solved in zip(problems, solved_any) if not solved][:settings["evo_problems"]]
                if len(hard) < settings["evo_problems"] and settings["evo_screen"]:
                    # too few: screen more held-out problems with the same pools (n answers per
                    # checkpoint) and keep those that no checkpoint solves
                    from rewards import make_task
                    options = configs[("code", algos[0], s)]["task_options"]
                    extra = [p for p in make_task("code", **options).problems(
                        "heldout", settings["evo_screen"], random.Random(20_000 + s)) if p not in problems]
                    screens = [pool.submit(_solved_job, checkpoints[k][0], options, extra, settings["eval_n"], s,
                                           checkpoints[k][1]) for k in keys]
                    solved_any = np.zeros(len(extra), dtype=bool)
                    for job in screens:
                        solved_any |= job.result()
                    hard += [p for p, solved in zip(extra, solved_any) if not solved][:settings["evo_problems"] - len(hard)]
                    settings["evo_screened_problems"] = len(extra)
                say(f"evolutionary search on {len(hard)} hard code problems (seed {s})")
                jobs = {k: pool.submit(_evolve_job, checkpoints[k][0], configs[("code", algos[0], s)]["task_options"],
                                       hard, settings["evo_budget"], list(range(settings["evo_seeds"])),
                                       checkpoints[k][1])
                        for k in keys if hard}
                for k, job in jobs.items():
                    evo[k] = job.result()
    timings["total"] = time.time() - t_start
    results = summarize(out_dir, tasks, algos, settings, evals, evo, runs, timings, quick, commit)
    say(f"done: {out_dir}")
    return results


def summarize(out_dir, tasks, algos, settings, evals, evo, runs, timings, quick, commit):
    """results.json, summary.md and the plots, from the finished jobs."""
    import plots
    from search import solved_curve
    seeds = settings["seeds"]
    names = ["warm_start"] + algos
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
            for metric in ("diversity", "distinct_answers", "pareto_fraction", "entropy", "valid_answers",
                           "tokens_generated", "mean_scalar"):
                values = np.array([r[metric] for r in rows], dtype=float)
                entry[metric] = round(float(values.mean()), 4)
                entry[metric + "_spread"] = round(float(values.max() - values.min()), 4)
            if any(k in evo for k in keys):
                all_runs = [r for k in keys for r in evo.get(k, [])]
                entry["evolution"] = {"searches": len(all_runs), "budget": settings["evo_budget"],
                                      "solved": sum(r["solved_at"] is not None for r in all_runs),
                                      "solved_curve": solved_curve(all_runs, settings["evo_budget"]),
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
        head += ["diversity", "distinct"]
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
                row.append(f"{ev['solved']}/{ev['searches']}" if ev else "-")
            row += [f"{e['diversity']:.3f}", f"{e['distinct_answers']:.1f}"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines.append("best@k: fixed scalarisation (mean of components); w-best@k: averaged over 64 held-out "
                 "random weightings; ± is half the spread (max - min) over seeds; diversity: mean pairwise "
                 "L1 between the pool's reward vectors; evo solved: searches that found a program passing "
                 "every test within the budget, on problems no checkpoint's pool solved.")
    return "\n".join(lines + [""] + training_table(results)) + "\n"


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


if __name__ == "__main__":
    import sys
    folder = sys.argv[1] if len(sys.argv) > 1 else "out/headline"
    try:
        with open(os.path.join(folder, "results.json")) as f:
            finished_results = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        sys.exit(f"error: no readable results.json in {folder} ({err}); run `python train.py` first")
    text = summary_markdown(finished_results)
    with open(os.path.join(folder, "summary.md"), "w") as f:
        f.write(text)
    print(text)
